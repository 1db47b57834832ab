"""The "edit one character" experiment: diffs, presets, the edit (reuse) step, the proof, the CLI report."""
