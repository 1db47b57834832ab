"""CLI: ``hash``, ``diff`` and ``simulate`` with --json, example traces, and every error path."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import cbor2
import pytest

from kvviz.cli import main

ROOT = Path(__file__).resolve().parents[2]
TRACES = sorted((ROOT / "assets" / "traces").glob("*.json"))


def run_json(capsys, *argv: str) -> dict:
    code = main([*argv, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert err == ""
    return json.loads(out)


def run_error(capsys, *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    assert "Traceback" not in err
    return lines[0]


def test_hash_tokens_json(capsys):
    data = run_json(capsys, "hash", "--tokens", "1,2,3,4,5", "--block-size", "2", "--hash", "sha256_cbor",
                    "--seed", "0")
    assert set(data) == {"reference", "none_hash", "blocks", "hash", "none_hash_seed", "none_hash_seed_reason"}
    assert data["reference"] == "vLLM 0.33.0"
    assert (data["none_hash_seed"], data["none_hash_seed_reason"]) == ("0", "explicit")
    none = hashlib.sha256(cbor2.dumps("0", canonical=True)).hexdigest()
    assert data["none_hash"] == none
    b0, b1, b2 = data["blocks"]
    assert set(b0) == {"index", "start", "end", "tokens", "parent", "hash", "full", "extra_keys"}
    expected0 = hashlib.sha256(cbor2.dumps((bytes.fromhex(none), (1, 2), None), canonical=True)).hexdigest()
    assert b0 == {"index": 0, "start": 0, "end": 2, "tokens": [1, 2], "parent": none, "hash": expected0,
                  "full": True, "extra_keys": None}
    assert b1["parent"] == expected0
    assert b2["hash"] is None and b2["full"] is False and b2["tokens"] == [5]


def test_hash_salt_seed_and_hash_options(capsys):
    plain = run_json(capsys, "hash", "--tokens", "1 2 3 4")
    salted = run_json(capsys, "hash", "--tokens", "[1, 2, 3, 4]", "--salt", "tenant")
    assert plain["blocks"][0]["tokens"] == salted["blocks"][0]["tokens"] == [1, 2, 3, 4]
    assert plain["blocks"][0]["hash"] is None  # 4 tokens < block size 16: partial
    full = run_json(capsys, "hash", "--tokens", "1,2,3,4", "--block-size", "4")
    full_salted = run_json(capsys, "hash", "--tokens", "1,2,3,4", "--block-size", "4", "--salt", "t")
    assert full["blocks"][0]["hash"] != full_salted["blocks"][0]["hash"]
    seed1 = run_json(capsys, "hash", "--tokens", "1,2,3,4", "--block-size", "4", "--seed", "1")
    assert seed1["none_hash"] != full["none_hash"]
    xx = run_json(capsys, "hash", "--tokens", "1,2,3,4", "--block-size", "4", "--hash", "xxhash_cbor")
    assert len(bytes.fromhex(xx["blocks"][0]["hash"])) == 16
    unsafe = run_json(capsys, "hash", "--tokens", "1,2", "--block-size", "2", "--hash", "python_hash")
    assert "warning" in unsafe and len(bytes.fromhex(unsafe["blocks"][0]["hash"])) == 8
    r1 = run_json(capsys, "hash", "--tokens", "1,2", "--block-size", "2", "--no-seed")
    r2 = run_json(capsys, "hash", "--tokens", "1,2", "--block-size", "2", "--no-seed")
    assert r1["none_hash"] != r2["none_hash"]


def test_hash_human_output(capsys):
    assert main(["hash", "--tokens", "1,2", "--block-size", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("reference: vLLM 0.33.0\nnone_hash: ") and "blocks: " in out


def test_diff_vllm_example(capsys):
    data = run_json(capsys, "diff", "--a-tokens", ",".join(map(str, range(1, 13))),
                    "--b-tokens", "1,2,3,4,5,6,7,8,9,10,13,14", "--block-size", "4")
    assert data["common_prefix_tokens"] == 10 and data["reused_tokens"] == 8
    assert data["recompute_tokens"] == 4 and data["first_changed_token"] == 10
    assert [b["status"] for b in data["blocks"]] == ["hit", "hit", "miss"]
    assert {"index", "status", "hash_a", "hash_b"} <= set(data["blocks"][0])
    assert data["blocks"][0]["hash_a"] == data["blocks"][0]["hash_b"]


def test_diff_salts_and_cascade(capsys):
    data = run_json(capsys, "diff", "--a-tokens", "1,2,3,4,5,6,7,8", "--b-tokens", "1,2,3,4,5,6,7,8,9",
                    "--block-size", "4", "--salt-a", "x", "--salt-b", "y")
    assert [b["status"] for b in data["blocks"]] == ["invalidated", "invalidated", "partial"]
    assert data["reused_tokens"] == 0 and data["blocks"][2]["hash_b"] is None
    data = run_json(capsys, "diff", "--a-tokens", "1,2,3,4,5,6,7,8", "--b-tokens", "0,2,3,4,5,6,7,8",
                    "--block-size", "4")
    assert [b["status"] for b in data["blocks"]] == ["miss", "invalidated"]
    assert data["first_changed_token"] == 0


@pytest.mark.parametrize("trace", TRACES, ids=[t.stem for t in TRACES])
def test_simulate_example_traces(capsys, trace):
    data = run_json(capsys, "simulate", "--trace", str(trace))
    spec = json.loads(trace.read_text())
    assert len(data["steps"]) == len(spec["steps"])
    for step in data["steps"]:
        assert set(step) >= {"op", "id", "num_computed_tokens", "hit_blocks", "new_blocks", "evicted_blocks",
                             "error", "error_params", "events", "kv_events", "prefix_cache"}
    final = data["final"]
    assert set(final) == {"free_queue", "cached_block_ids", "ref_cnt", "usage"}
    assert 0 not in final["free_queue"] and final["ref_cnt"][0] == 0  # the null block
    assert len(final["ref_cnt"]) == spec["num_blocks"]
    assert sorted(final["free_queue"]) == [i for i, r in enumerate(final["ref_cnt"]) if r == 0 and i > 0]


def test_simulate_trace_outcomes(capsys):
    data = run_json(capsys, "simulate", "--trace", str(ROOT / "assets/traces/tail_first_eviction.json"))
    steps = data["steps"]
    assert steps[2]["evicted_blocks"] == [3] and steps[4]["hit_blocks"] == [1, 2]
    data = run_json(capsys, "simulate", "--trace", str(ROOT / "assets/traces/refused.json"))
    assert data["steps"][1]["error"] == "refuse" and data["steps"][1]["reason"].startswith("Refused")
    assert data["steps"][2]["error"] == "skipped_refused"
    assert data["steps"][4]["error"] is None and data["steps"][4]["evicted_blocks"] == [3]
    data = run_json(capsys, "simulate", "--trace", str(ROOT / "assets/traces/shared_prefix.json"))
    assert data["steps"][1]["num_computed_tokens"] == 8 and data["steps"][5]["num_computed_tokens"] == 16


def test_simulate_stdin(capsys, monkeypatch):
    import io

    trace = {"num_blocks": 3, "block_size": 2, "steps": [{"op": "add", "id": 1, "tokens": [1, 2, 3]}]}
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(trace)))
    data = run_json(capsys, "simulate", "--trace", "-")
    assert data["steps"][0]["new_blocks"] == [1, 2] and data["final"]["cached_block_ids"] == [1]


@pytest.mark.parametrize("argv, fragment", [
    (["hash", "--tokens", "1,x"], "not a non-negative integer"),
    (["hash", "--tokens", "1,-2"], "not a non-negative integer"),
    (["hash", "--tokens", "99999999999"], "out of range"),
    (["hash", "--tokens", ""], "no token ids"),
    (["hash", "--tokens", " , "], "no token ids"),
    (["hash", "--tokens", "1", "--block-size", "0"], "block size must be in 1..256"),
    (["hash", "--tokens", "1", "--block-size", "257"], "block size must be in 1..256"),
    (["hash", "--tokens", "1", "--block-size", "abc"], "invalid int value"),
    (["hash", "--tokens", "1", "--hash", "md5"], "valid: sha256, sha256_cbor, xxhash, xxhash_cbor, python_hash"),
    (["hash", "--text", "   "], "empty"),
    (["hash"], "required"),
    (["hash", "--tokens", "1", "--text", "x"], "not allowed"),
    (["diff", "--a-tokens", "1,2"], "prompt B is missing"),
    (["diff", "--b-tokens", "1,2"], "prompt A is missing"),
    (["diff", "--a-tokens", "1", "--a", "x", "--b-tokens", "1"], "either"),
    (["diff", "--a-tokens", "1", "--b-tokens", "1", "--block-size", "0"], "block size"),
    (["diff", "--a-tokens", "1", "--b-tokens", "1", "--hash", "nope"], "unknown hash function"),
    (["simulate"], "required"),
    (["simulate", "--trace", "/nonexistent/trace.json"], "cannot read"),
])
def test_cli_errors(capsys, argv, fragment):
    assert fragment in run_error(capsys, *argv)


BAD_TRACES = [
    ("not json {", "not valid JSON"),
    ("[]", "a trace is a JSON object"),
    ('{"steps": []}', "missing 'num_blocks'"),
    ('{"num_blocks": 4}', "missing 'steps'"),
    ('{"num_blocks": 0, "steps": []}', "num_blocks must be in 2..65536"),
    ('{"num_blocks": 1e9, "steps": []}', "num_blocks must be an integer"),
    ('{"num_blocks": 99999999, "steps": []}', "num_blocks must be in"),
    ('{"num_blocks": 4, "block_size": 0, "steps": []}', "block size must be an integer in 1..256, got 0"),
    ('{"num_blocks": 4, "hash": "md5", "steps": []}', "unknown hash function"),
    ('{"num_blocks": 4, "seed": [1], "steps": []}', "seed must be a string"),
    ('{"num_blocks": 4, "steps": {}}', "'steps' must be a list"),
    ('{"num_blocks": 4, "stepz": []}', "unknown trace key"),
    ('{"num_blocks": 4, "steps": [1]}', "step 0: a step is a JSON object"),
    ('{"num_blocks": 4, "steps": [{"op": "drop", "id": "a"}]}', "step 0: 'op' must be one of"),
    ('{"num_blocks": 4, "steps": [{"op": "add", "id": "a"}]}', "step 0: add needs 'tokens'"),
    ('{"num_blocks": 4, "steps": [{"op": "add", "tokens": [1]}]}', "'id' must be a non-empty string"),
    ('{"num_blocks": 4, "steps": [{"op": "add", "id": "a", "tokens": "12"}]}', "list of integers"),
    ('{"num_blocks": 4, "steps": [{"op": "add", "id": "a", "tokens": [1, -1]}]}', "step 0: token 1"),
    ('{"num_blocks": 4, "steps": [{"op": "add", "id": "a", "tokens": []}]}', "step 0: no tokens"),
    ('{"num_blocks": 4, "steps": [{"op": "add", "id": "a", "tokens": [1], "salt": 3}]}', "'salt' must be"),
    ('{"num_blocks": 4, "steps": [{"op": "free", "id": "a", "tokens": [1]}]}', "unknown key(s) for free"),
    ('{"num_blocks": 4, "steps": [{"op": "append", "id": "a", "tokens": [1]}]}', "unknown request 'a'"),
    ('{"num_blocks": 4, "steps": [{"op": "free", "id": "a"}]}', "step 0: free 'a': unknown request"),
    ('{"num_blocks": 4, "steps": [{"op": "add", "id": "a", "tokens": [1]}, '
     '{"op": "add", "id": "a", "tokens": [2]}]}', "step 1: add 'a': request 'a' is already running"),
]


@pytest.mark.parametrize("content, fragment", BAD_TRACES)
def test_simulate_malformed_traces(capsys, tmp_path, content, fragment):
    path = tmp_path / "trace.json"
    path.write_text(content)
    assert fragment in run_error(capsys, "simulate", "--trace", str(path))


def test_simulate_binary_directory_and_deep_nesting(capsys, tmp_path):
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe\x00\x01garbage")
    assert "not UTF-8" in run_error(capsys, "simulate", "--trace", str(binary))
    assert "directory" in run_error(capsys, "simulate", "--trace", str(tmp_path))
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100000 + "]" * 100000)
    assert "error:" in run_error(capsys, "simulate", "--trace", str(deep))


def test_python_m_kvviz_entry_point():
    proc = subprocess.run(
        [sys.executable, "-m", "kvviz", "diff", "--a-tokens", "1,2,3,4", "--b-tokens", "1,2,3,4,5",
         "--block-size", "4", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["reused_tokens"] == 4
    bad = subprocess.run([sys.executable, "-m", "kvviz", "hash", "--tokens", "a"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and bad.stdout == ""


@pytest.mark.model
def test_hash_and_diff_text_use_the_model_tokenizer(capsys):
    from kvviz.mirror.hashing import hash_request_blocks, init_none_hash
    from kvviz.model import tokenize

    ids = tokenize("The cat sat on the mat.").ids
    data = run_json(capsys, "hash", "--text", "The cat sat on the mat.", "--block-size", "2")
    none = init_none_hash("sha256", None)  # vLLM's defaults
    expected = hash_request_blocks(ids, 2, "sha256", none)
    assert [b["tokens"] for b in data["blocks"]] == [list(r.tokens) for r in expected]
    assert [b["hash"] for b in data["blocks"]] == [r.hash.hex() if r.hash else None for r in expected]
    diff = run_json(capsys, "diff", "--a", "The cat sat on the mat.", "--b", "The cat sat on the hat.",
                    "--block-size", "2")
    assert diff["num_tokens_a"] == len(ids) and 0 < diff["common_prefix_tokens"] < len(ids)
