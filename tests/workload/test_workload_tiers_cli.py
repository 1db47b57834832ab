"""``python -m kvviz workload --host-blocks``: the two-tier grid in the JSON equals the plain replay; bad
flags are one-line errors (exit 2)."""

from __future__ import annotations

import json

from kvviz.analysis.workload.example import EXAMPLE_PATH
from kvviz.analysis.workload.parse import parse_trace
from kvviz.analysis.workload.tiers import replay_two_tier
from kvviz.cli import main


def _run(capsys, *argv: str):
    code = main(["workload", *argv])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code == 0 and "--json" in argv else None), out.err


def test_host_blocks_grid_in_the_json(capsys):
    code, out, _ = _run(capsys, "--trace", str(EXAMPLE_PATH), "--capacities", "100,1000", "--host-blocks",
                        "0,500,3000", "--preset", "llama-3-8b", "--json")
    assert code == 0
    tier = out["two_tier"]
    assert tier["device_blocks"] == [100, 1000] and tier["host_blocks"] == [0, 500, 3000]
    assert tier["bytes_per_block"] == 131072 * 512  # Llama-3-8B fp16: 128 KiB a token
    trace = parse_trace(EXAMPLE_PATH.read_bytes())
    total = sum(r.input_tokens for r in trace.requests)
    assert len(tier["rows"]) == 6
    for row in tier["rows"]:
        steps = replay_two_tier(trace, row["device_blocks"], row["host_blocks"])
        assert row["host_hit_rate"] == sum(s.host_tokens for s in steps) / total
        assert row["device_hit_rate"] == sum(s.device_tokens for s in steps) / total
        loaded = sum(s.host_blocks for s in steps)
        assert row["host_blocks_loaded"] == loaded
        assert row["load_bytes_per_s"] == loaded * tier["bytes_per_block"] / tier["duration_s"]
    curve = {p["capacity_blocks"]: p["hit_rate"] for p in out["curve"]}
    assert all(r["device_hit_rate"] == curve[r["device_blocks"]] for r in tier["rows"])


def test_host_blocks_default_device_grid_without_a_model(capsys):
    code, out, _ = _run(capsys, "--trace", str(EXAMPLE_PATH), "--host-blocks", "1000", "--json")
    tier = out["two_tier"]
    assert code == 0 and len(tier["device_blocks"]) == 8 and tier["bytes_per_block"] is None
    assert "load_bytes_per_s" not in tier["rows"][0]


def test_host_blocks_refusals(capsys):
    for extra in (["--host-blocks", "x"], ["--host-blocks", "-1"], ["--host-blocks", ""],
                  ["--host-blocks", "10", "--sample-rate", "0.5"],
                  ["--host-blocks", "10", "--capacities", ",".join(str(i) for i in range(1, 70))]):
        code, _, err = _run(capsys, "--trace", str(EXAMPLE_PATH), *extra, "--json")
        assert code == 2 and "--host-blocks" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
