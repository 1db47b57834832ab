"""CI's entry point (.ci/run) is valid bash, installs what the browser and kernel tests need, and ends by running
``make test`` (CI runs exactly that script; a syntax error in it fails every run before any test)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

CI_RUN = Path(__file__).resolve().parents[2] / ".ci" / "run"


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash on this machine")
def test_ci_run_parses_as_bash():
    done = subprocess.run(["bash", "-n", str(CI_RUN)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr


def test_ci_run_installs_chromium_and_a_compiler_then_runs_make_test():
    lines = [line.strip() for line in CI_RUN.read_text(encoding="utf-8").splitlines()]
    commands = [line for line in lines if line and not line.startswith("#")]
    assert lines[0] == "#!/usr/bin/env bash"
    assert commands[0] == "set -euo pipefail"
    assert commands[-1] == "make test"
    assert sum(line == "make test" for line in commands) == 1
    text = "\n".join(commands)
    assert "chromium" in text and "g++" in text
