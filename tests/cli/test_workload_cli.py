"""``python -m kvviz workload``: its JSON keys, agreement with the analyzer, one-line errors (exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvviz.analysis.workload.example import EXAMPLE_PATH
from kvviz.analysis.workload.parse import parse_trace
from kvviz.analysis.workload.reuse_distance import analyze, replay_lru
from kvviz.cli import main

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"num_requests", "input_tokens", "block_size", "num_block_accesses", "unique_blocks",
        "hit_tokens_infinite", "hit_rate_infinite", "curve"}


def _run(capsys, *argv: str) -> tuple[int, dict | None, str]:
    code = main(["workload", *argv])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code == 0 and "--json" in argv else None), out.err


def test_example_with_capacities_ttl_and_preset(capsys):
    code, out, _ = _run(capsys, "--trace", str(EXAMPLE_PATH), "--capacities", "1000,10,100", "--ttl-seconds", "300",
                        "--preset", "llama-3-8b", "--dtype", "fp8", "--json")
    assert code == 0 and set(out) >= KEYS
    trace = parse_trace(EXAMPLE_PATH.read_bytes())
    assert out["block_size"] == 512 and out["num_requests"] == trace.num_requests
    assert [p["capacity_blocks"] for p in out["curve"]] == [10, 100, 1000]
    for p in out["curve"]:
        assert p["hit_tokens"] == sum(replay_lru(trace, p["capacity_blocks"]))
        assert p["ttl_hit_tokens"] == sum(replay_lru(trace, p["capacity_blocks"], 300))
        assert p["capacity_tokens"] == 512 * p["capacity_blocks"]
        assert p["capacity_bytes"] == 65536 * p["capacity_tokens"]  # Llama-3-8B fp8: 32 x 8 x 128 x 2 x 1 byte
    assert out["ttl"]["ttl_seconds"] == 300 and out["hit_tokens_infinite"] == analyze(trace).hit_tokens_infinite


def test_default_grid_is_log_spaced_and_sorted(capsys, tmp_path):
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join(json.dumps({"token_ids": list(range(50)) + [i]}) for i in range(30)))
    code, out, _ = _run(capsys, "--trace", str(f), "--json")
    caps = [p["capacity_blocks"] for p in out["curve"]]
    assert code == 0 and out["block_size"] == 16 and caps == sorted(caps) and caps[0] == 1
    assert caps[-1] == out["unique_blocks"] and "capacity_bytes" not in out["curve"][0] and "ttl" not in out
    assert out["hit_tokens_infinite"] == 29 * 48  # 3 full blocks of the shared 50-token head, from request 2 on


@pytest.mark.parametrize(("content", "argv", "message"), [
    ("", [], "the trace is empty"),
    ('{"hash_ids": [1], "input_length": 5}\n{"hash_ids": [2], "input_length": -1}', ["--strict"], "line 2:"),
    ('{"hash_ids": [1], "input_length": 5}\nnot json', ["--strict"], "line 2: not valid JSON"),
    ('{"hash_ids": [1, 2, 3], "input_length": 1536}', ["--block-size", "16"], "3 hash_ids are too few"),
    ('{"hash_ids": [1], "input_length": 5}', ["--capacities", "10,0"], "--capacities"),
    ('{"hash_ids": [1], "input_length": 5}', ["--capacities", "ten"], "--capacities"),
    ('{"hash_ids": [1], "input_length": 5}', ["--ttl-seconds", "60"], "needs a timestamp"),
    ('{"hash_ids": [1], "input_length": 5}', ["--ttl-seconds", "-1"], "--ttl-seconds"),
    ('{"hash_ids": [1], "input_length": 5}', ["--preset", "nope"], "unknown preset"),
    ('{"hash_ids": [1], "input_length": 5}', ["--dtype", "fp8"], "--dtype needs a model"),
    ('{"hash_ids": [1], "input_length": 5}', ["--block-size", "0"], "block size"),
])
def test_bad_input_is_one_line_exit_2(capsys, tmp_path, content, argv, message):
    f = tmp_path / "t.jsonl"
    f.write_text(content)
    code, _, err = _run(capsys, "--trace", str(f), *argv, "--json")
    assert code == 2 and message in err and err.count("\n") == 1 and "Traceback" not in err


def test_missing_file_and_binary(capsys, tmp_path):
    code, _, err = _run(capsys, "--trace", str(tmp_path / "nope.jsonl"))
    assert code == 2 and "no such file" in err
    f = tmp_path / "b.jsonl"
    f.write_bytes(b"\x00\xff\xfe" * 100)
    code, _, err = _run(capsys, "--trace", str(f))
    assert code == 2 and "not UTF-8" in err


def test_cli_does_not_import_torch_for_hash_id_traces():
    code = ("import sys\nfrom kvviz.cli import main\n"
            f"main(['workload', '--trace', {str(EXAMPLE_PATH)!r}, '--capacities', '5', '--json'])\n"
            "print('torch' in sys.modules, 'streamlit' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip().splitlines()[-1] == "False False"


def test_bad_lines_are_counted_by_default_and_all_bad_is_one_line(capsys, tmp_path):
    f = tmp_path / "t.jsonl"
    f.write_text('{"hash_ids": [1], "input_length": 5}\nnot json\n{"hash_ids": [1], "input_length": 5}\n'
                 '{"hash_ids": [1, 2, 3], "input_length": 1536}\n')
    code, out, err = _run(capsys, "--trace", str(f), "--block-size", "16", "--json")
    assert code == 0 and out["num_requests"] == 2 and out["hit_tokens_infinite"] == 5
    assert out["bad_lines"] == {"count": 2, "first": [
        {"file": str(f), "line": 2, "error": "line 2: not valid JSON (Expecting value)"},
        {"file": str(f), "line": 4, "error": "line 4: 3 hash_ids are too few for input_length 1536 in blocks of "
                                             "16 (need 96; is the block size right?)"}]}
    assert "skipped 2 bad lines" in err and "line 2: not valid JSON" in err and "Traceback" not in err
    _, legacy, _ = _run(capsys, "--trace", str(f), "--block-size", "16", "--skip-bad-lines", "--json")
    assert legacy == out
    f.write_text("x\ny\n")
    code, _, err = _run(capsys, "--trace", str(f), "--json")
    assert code == 2 and "all 2 lines are bad" in err and err.count("\n") == 1
    code, _, err = _run(capsys, "--trace", str(f), "--strict", "--json")
    assert code == 2 and "line 1: not valid JSON" in err and err.count("\n") == 1


def test_gz_and_a_directory_of_parquet_shards(capsys, tmp_path):
    import gzip

    import pyarrow as pa
    import pyarrow.parquet as pq

    raw = EXAMPLE_PATH.read_bytes()
    (tmp_path / "t.jsonl.gz").write_bytes(gzip.compress(raw))
    rows = [json.loads(x) for x in raw.splitlines()]
    (tmp_path / "dir").mkdir()
    for i, part in enumerate((rows[:900], rows[900:])):
        pq.write_table(pa.table({"timestamp": [r["timestamp"] for r in part],
                                 "input_length": [r["input_length"] for r in part],
                                 "hash_ids": pa.array([r["hash_ids"] for r in part], pa.list_(pa.int64()))}),
                       tmp_path / "dir" / f"{i}.parquet")
    _, plain, _ = _run(capsys, "--trace", str(EXAMPLE_PATH), "--capacities", "50,500", "--json")
    _, gz, _ = _run(capsys, "--trace", str(tmp_path / "t.jsonl.gz"), "--capacities", "50,500", "--json")
    _, shards, _ = _run(capsys, "--trace", str(tmp_path / "dir"), "--capacities", "50,500", "--json")
    assert gz == plain and shards["curve"] == plain["curve"] and shards["unique_blocks"] == plain["unique_blocks"]
    (tmp_path / "none").mkdir()
    (tmp_path / "none" / "notes.md").write_text("no trace here")
    code, _, err = _run(capsys, "--trace", str(tmp_path / "none"), "--json")
    assert code == 2 and "no trace files" in err and err.count("\n") == 1


def test_sampled_mode_json_and_its_flags(capsys):
    code, out, _ = _run(capsys, "--trace", str(EXAMPLE_PATH), "--sample-rate", "0.5", "--capacities", "100,1000",
                        "--json")
    assert code == 0 and out["sampled"] is True and out["sample_rate"] == 0.5 and set(out) >= KEYS
    assert 0 <= out["hit_rate_error"] <= 1 and all("hit_rate_error" in p for p in out["curve"])
    _, exact, _ = _run(capsys, "--trace", str(EXAMPLE_PATH), "--capacities", "100,1000", "--json")
    assert abs(out["hit_rate_infinite"] - exact["hit_rate_infinite"]) < 0.05
    code, fits, _ = _run(capsys, "--trace", str(EXAMPLE_PATH), "--memory-mb", "64", "--capacities", "100", "--json")
    assert code == 0 and fits["sampled"] is False and fits["curve"] == exact["curve"][:1]
    for argv, message in ((["--sample-rate", "0"], "--sample-rate"), (["--sample-rate", "2"], "--sample-rate"),
                          (["--sample-rate", "0.5", "--memory-mb", "5"], "not both"),
                          (["--sample-rate", "0.5", "--ttl-seconds", "60"], "no TTL")):
        code, _, err = _run(capsys, "--trace", str(EXAMPLE_PATH), *argv, "--json")
        assert code == 2 and message in err and err.count("\n") == 1


def test_routing_section(capsys):
    code, out, _ = _run(capsys, "--trace", str(EXAMPLE_PATH), "--capacities", "200", "--replicas", "1,2",
                        "--routing", "round_robin,prefix", "--json")
    assert code == 0 and out["routing"]["replicas"] == [1, 2]
    rows = out["routing"]["results"]
    assert set(rows) == {"round_robin", "prefix"} and [r["replicas"] for r in rows["prefix"]] == [1, 2]
    one = rows["round_robin"][0]
    assert one["prefill_tokens_saved"] == out["curve"][0]["hit_tokens"] and one["load_imbalance"] == 1.0
    for argv, message in ((["--replicas", "0"], "--replicas"), (["--replicas", "2", "--routing", "random"],
                                                                  "unknown policy")):
        code, _, err = _run(capsys, "--trace", str(EXAMPLE_PATH), *argv, "--json")
        assert code == 2 and message in err and err.count("\n") == 1


def test_workload_and_bytes_print_the_same_budget_blocks(capsys, tmp_path):
    """One rule for "G GiB -> blocks, the null block left out": `bytes` and `workload` agree."""
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join(json.dumps({"token_ids": list(range(50)) + [i]}) for i in range(30)))
    args = ["--preset", "deepseek-v3", "--budget-gib", "24", "--block-size", "16", "--json"]
    assert main(["bytes", *args]) == 0
    capacity = json.loads(capsys.readouterr().out)["capacity"]
    assert main(["workload", "--trace", str(trace), *args]) == 0
    budget = json.loads(capsys.readouterr().out)["budget"]
    assert budget["usable_blocks"] == capacity["usable_blocks"] == capacity["num_blocks"] - 1 > 0
    assert budget["num_blocks"] == capacity["num_blocks"]
    assert main(["workload", "--trace", str(trace), "--budget-gib", "24"]) == 2  # needs a model
    assert "--budget-gib needs a model" in capsys.readouterr().err


def test_sampled_mode_streams_with_the_whole_trace_numbers(capsys, tmp_path):
    """--sample-rate samples the trace as it is read: the same JSON as sampling the whole trace's columns;
    --memory-mb picks its rate before reading, from the file's size (an upper bound on its accesses)."""
    from kvviz.analysis.workload.sample import analyze_sampled, rate_for_memory
    from kvviz.analysis.workload.sample_report import sampled_report
    from kvviz.analysis.workload.stream import estimated_accesses, read_trace

    cols, _ = read_trace(EXAMPLE_PATH)
    code, out, _ = _run(capsys, "--trace", str(EXAMPLE_PATH), "--sample-rate", "0.3", "--json")
    want = json.loads(json.dumps(sampled_report(analyze_sampled(cols, 0.3))))
    assert code == 0 and out == want | {"bad_lines": out["bad_lines"]}
    argv = ("--trace", str(EXAMPLE_PATH), "--preset", "llama-3-8b", "--budget-gib", "2", "--json")
    code, budget, _ = _run(capsys, *argv, "--sample-rate", "0.3")
    assert code == 0 and budget["budget"] == _run(capsys, *argv)[1]["budget"]
    rate = rate_for_memory(0.01, estimated_accesses(EXAMPLE_PATH))
    assert 0 < rate < 1 and estimated_accesses(EXAMPLE_PATH) >= cols.num_accesses
    code, low, err = _run(capsys, "--trace", str(EXAMPLE_PATH), "--memory-mb", "0.01", "--progress", "--json")
    assert code == 0 and low["sampled"] is True and low["sample_rate"] == rate
    assert low["hit_rate_infinite"] == sampled_report(analyze_sampled(cols, rate))["hit_rate_infinite"]
    assert "requests" in err  # progress still on stderr
