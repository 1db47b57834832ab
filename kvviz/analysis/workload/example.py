"""The bundled example trace: kvviz's own seeded generator, written as Mooncake JSON Lines.

``python -m kvviz.analysis.workload.example`` rewrites ``assets/workload/example_trace.jsonl``; a test checks
the committed file equals a fresh generation, so the asset is always kvviz's own output.
"""

from __future__ import annotations

import json
from pathlib import Path

from kvviz.analysis.workload.gen import WorkloadGenConfig, generate

EXAMPLE_PATH = Path(__file__).resolve().parents[3] / "assets" / "workload" / "example_trace.jsonl"
EXAMPLE_CONFIG = WorkloadGenConfig(num_requests=1500, block_size=512, seed=0, rate_per_s=0.15,
                                   think_s=(5.0, 600.0))


def example_text() -> str:
    """The example trace as JSONL text, generated now."""
    return "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in generate(EXAMPLE_CONFIG))


def main() -> None:
    EXAMPLE_PATH.parent.mkdir(parents=True, exist_ok=True)
    EXAMPLE_PATH.write_text(example_text())
    print(f"wrote {EXAMPLE_PATH}")


if __name__ == "__main__":
    main()
