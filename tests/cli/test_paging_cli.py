"""``python -m kvviz paging``: JSON keys and one-line errors."""

from __future__ import annotations

import json

import pytest

from kvviz.cli import main


def test_paging_json_keys(capsys):
    assert main(["paging", "--requests", "12", "--snapshot-step", "5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"config", "contiguous", "paged", "paper_band", "fit_ratio", "speedup_steps"} <= set(out)
    for layout in ("contiguous", "paged"):
        summary = out[layout]
        assert {"utilisation", "waste_share", "requests_fit_at_start", "steps", "preemptions"} <= set(summary)
        assert 0 < summary["utilisation"] <= 1
    assert sum(s["length"] for s in out["contiguous"]["snapshot"]) == out["config"]["memory_tokens"]
    assert out["paper_band"] == [0.204, 0.382]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--memory-tokens", "1000"], "multiple of block_size"),
        (["--requests", "99999999"], "num_requests"),
        (["--prompt", "500", "10"], "prompt_min"),
        (["--reservation", "huge"], "invalid choice"),
        (["--block-size", "abc"], "invalid int"),
        (["--snapshot-step", "-1"], "snapshot-step"),
    ],
)
def test_paging_errors_are_one_line(capsys, argv, message):
    assert main(["paging", *argv, "--json"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and err.startswith("error:")
