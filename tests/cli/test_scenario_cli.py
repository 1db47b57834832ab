"""``python -m kvviz scenario``: keys, steps, --radix, --list, the error paths, and built-in scenarios whose
stored token ids still match the embedded tokenizer."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from kvviz.analysis.scenarios.load import SCENARIO_DIR, builtin_names, load_builtin
from kvviz.analysis.scenarios.play import play_scenario
from kvviz.cli import main

ROOT = Path(__file__).resolve().parents[2]


def run_json(capsys, *argv: str) -> dict:
    code = main([*argv, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def run_error(capsys, *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code != 0 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in err, err
    return lines[0]


def test_state_at_a_step(capsys):
    data = run_json(capsys, "scenario", "--name", "pool_pressure", "--step", "4")
    assert set(data) >= {"block_tables", "pool", "free_queue", "next_eviction", "events", "counters", "step",
                         "num_steps", "action", "summary"}
    assert data["step"] == 4 and data["num_steps"] == 11 and data["summary"] == "letter arrives (74 tokens)"
    assert [e["kind"] for e in data["events"]] == ["miss", "evict", "allocate", "cache"]
    assert data["events"][1]["block_ids"] == [10, 9, 8]
    assert data["counters"]["evictions"] == 3 and data["next_eviction"] == data["free_queue"][0]
    rows = data["block_tables"]["letter"]["block_table"]
    assert rows[0]["label"].startswith("tokens 1-16 -> block ")
    # the same function the page calls
    view = play_scenario(load_builtin("pool_pressure")).view_at(4)
    assert {k: v for k, v in data.items() if k != "summary"} == json.loads(json.dumps(view.to_dict()))


def test_default_step_is_the_last_and_step_zero(capsys):
    last = run_json(capsys, "scenario", "--name", "tenant_salts")
    assert last["step"] == last["num_steps"] == 10 and last["block_tables"] == {}
    zero = run_json(capsys, "scenario", "--name", "tenant_salts", "--step", "0")
    assert zero["action"] is None and zero["events"] == [] and zero["free_queue"] == list(range(1, 21))


def test_list_and_human_output(capsys):
    data = run_json(capsys, "scenario", "--list")
    assert [s["name"] for s in data["scenarios"]] == builtin_names()
    assert main(["scenario", "--name", "shared_prompt", "--step", "2"]) == 0
    out = capsys.readouterr().out
    assert "summary: u2 arrives (80 tokens)" in out and "counters: " in out


def test_radix_comparison(capsys):
    data = run_json(capsys, "scenario", "--name", "branching_prompts", "--radix", "--window", "32")
    assert set(data) >= {"requests", "evictions", "radix", "pool", "window", "capacity_tokens", "sliding_window"}
    first_a_end = next(r for r in data["requests"] if r["request_id"] == "a-end")
    assert first_a_end["radix_tokens"] == 77 and first_a_end["pool_tokens"] == 64
    assert first_a_end["partial_tail_tokens"] == 13
    assert {e["engine"] for e in data["evictions"]} == {"radix", "pool", "window"}
    early = run_json(capsys, "scenario", "--name", "branching_prompts", "--radix", "--step", "4", "--page-size", "16")
    assert early["step"] == 4 and early["radix_page_size"] == 16
    assert early["requests"][-1]["radix_tokens"] == 64  # page size 16: the tree matches whole pages too


def test_error_paths(capsys, tmp_path):
    assert "unknown scenario 'nope'; built-in: shared_prompt" in run_error(capsys, "scenario", "--name", "nope")
    assert "step must be an integer in 0..15, got 16" in run_error(
        capsys, "scenario", "--name", "shared_prompt", "--step", "16")
    assert "got -1" in run_error(capsys, "scenario", "--name", "shared_prompt", "--step", "-1")
    assert "got 99" in run_error(capsys, "scenario", "--name", "shared_prompt", "--radix", "--step", "99")
    assert "sliding window must be" in run_error(capsys, "scenario", "--name", "shared_prompt", "--radix",
                                                 "--window", "1")
    bad = tmp_path / "bad.json"
    bad.write_text("{\"num_blocks\": 4, \"steps\": [")
    assert "is not valid JSON" in run_error(capsys, "scenario", "--file", str(bad))
    bad.write_text(json.dumps({"num_blocks": 4, "steps": [{"op": "add", "id": "a", "tokens": "12"}]}))
    assert "step 1: 'tokens' must be a list" in run_error(capsys, "scenario", "--file", str(bad))
    bad.write_text(json.dumps({"num_blocks": 4, "steps": [{"op": "append", "id": "a", "tokens": [1]}]}))
    assert "step 1: append 'a': unknown request" in run_error(capsys, "scenario", "--file", str(bad))
    bad.write_bytes(b"\xff\x00")
    assert "not UTF-8" in run_error(capsys, "scenario", "--file", str(bad))
    assert "cannot read" in run_error(capsys, "scenario", "--file", str(tmp_path / "missing.json"))
    assert "is a directory" in run_error(capsys, "scenario", "--file", str(tmp_path))
    assert "one of the arguments" in run_error(capsys, "scenario")


def test_trace_file_and_stdin(capsys, monkeypatch):
    """``--file -`` reads the trace from stdin's bytes (in-process; tests/cli/test_cli_pipe.py runs real pipes)."""
    trace = ROOT / "assets" / "traces" / "salt_isolation.json"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(trace.read_bytes()), encoding="utf-8"))
    data = run_json(capsys, "scenario", "--file", "-", "--step", "2")
    assert data["step"] == 2 and data["block_tables"]["bob1"]["hit_tokens"] == 0


@pytest.mark.parametrize("name", builtin_names())
def test_builtin_tokens_match_the_tokenizer(name):
    """The stored ids are what the embedded tokenizer gives for the stored text (regenerate with
    kvviz.analysis.scenarios.load.tokenize_scenario(obj, pieces_tokenizer(MAX_REQUEST_TOKENS)) after editing a text)."""
    from kvviz.analysis.scenarios.records import MAX_REQUEST_TOKENS
    from kvviz.model.tokens import pieces_tokenizer

    tok = pieces_tokenizer(MAX_REQUEST_TOKENS + 1)
    scenario = load_builtin(name)
    for step in scenario.steps:
        if step.text is not None:
            ids, pieces = tok(step.text)
            assert tuple(ids) == step.tokens, (name, step.id)
            assert tuple(pieces) == step.pieces


def test_text_only_file_is_tokenized(capsys, tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"num_blocks": 8, "steps": [
        {"op": "add", "id": "a", "text": "The cat sat on the mat. " * 4},
        {"op": "free", "id": "a"},
        {"op": "add", "id": "b", "text": "The cat sat on the mat. " * 4 + "Then it slept."},
    ]}))
    data = run_json(capsys, "scenario", "--file", str(path))
    assert data["block_tables"]["b"]["hit_tokens"] == 16
    assert (SCENARIO_DIR / "shared_prompt.json").exists()
