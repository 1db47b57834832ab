"""``python -m kvviz scenario --host-blocks N``: a scenario replayed over a host tier prints host memory and
each prompt's tokens by source; a bad size, or a host tier with --radix, is a one-line error."""

from __future__ import annotations

import json

from kvviz.cli import main


def run_json(capsys, *argv: str) -> dict:
    code = main([*argv, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def run_error(capsys, *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:")
    return lines[0]


def test_host_blocks_adds_the_tier_and_tokens_by_source(capsys):
    data = run_json(capsys, "scenario", "--name", "pool_pressure", "--host-blocks", "16", "--step", "7")
    assert data["host_tier"]["num_blocks"] == 16 and len(data["host_tier"]["lru"]) == 15
    report = next(r for r in data["prompts_by_source"] if r["request_id"] == "report-2")
    assert report == {"request_id": "report-2", "prompt_tokens": 143, "device": 96, "host": 32, "computed": 15}
    assert data["counters"]["host_hit_tokens"] == 32
    kinds = [e["kind"] for e in data["events"]]
    assert "host_load" in kinds and "host_store" in kinds
    store = next(e for e in data["events"] if e["kind"] == "host_store")
    assert all(k["medium"] == "CPU" for k in store["kv_events"])
    plain = run_json(capsys, "scenario", "--name", "pool_pressure", "--step", "7")
    assert "host_tier" not in plain and "prompts_by_source" not in plain


def test_bad_host_blocks_and_radix_are_one_line_errors(capsys):
    assert "host-blocks" in run_error(capsys, "scenario", "--name", "pool_pressure", "--host-blocks", "0")
    assert "host-blocks" in run_error(capsys, "scenario", "--name", "pool_pressure", "--host-blocks", "x")
    assert "--radix" in run_error(capsys, "scenario", "--name", "pool_pressure", "--host-blocks", "8", "--radix")
