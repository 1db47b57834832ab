"""``python -m kvviz replay``: a Mooncake trace sent at its timestamps to the server (over the engine
double), the measured cached share beside the analyzer's prediction for the server's pool."""

from __future__ import annotations

import json

from kvviz.cli import main
from kvviz.server import replay_client as rc

MOONCAKE = [
    {"timestamp": 0, "input_length": 1200, "output_length": 4, "hash_ids": [1, 2, 3]},
    {"timestamp": 20, "input_length": 1100, "output_length": 4, "hash_ids": [1, 2, 4]},
    {"timestamp": 40, "input_length": 1500, "output_length": 4, "hash_ids": [1, 2, 3]},
]


def test_plan_maps_equal_hash_ids_to_equal_tokens():
    sends, predicted = rc.plan("\n".join(json.dumps(x) for x in MOONCAKE), 4, 3, None, speedup=10)
    a, b, c = (s.body["prompt"] for s in sends)
    assert a[:8] == b[:8] == c[:8] and a[8:] != b[8:]
    assert len(a) == 4 + 4 + 1  # the last id covers 176 of 512 tokens: 1.375 of 4, rounded to 1
    assert [s.at_s for s in sends] == [0.0, 0.002, 0.004]
    assert all(s.body["max_tokens"] == 3 for s in sends)
    assert [json.loads(line)["token_ids"] for line in predicted.splitlines()] == [a, b, c]


def test_replay_cli_prints_measured_beside_predicted(served, tmp_path, capsys):
    s = served()
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join(json.dumps(x) for x in MOONCAKE))
    assert main(["replay", str(trace), "--url", s.url, "--speedup", "100", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["requests"] == 3 and out["ok"] == 3 and out["errors"] == {}
    assert out["block_size"] == 4 and out["pool_blocks"] == 63
    # prompts of 9, 9 and 12 tokens (the last hash id's share of 512, rounded); the double caches every full
    # block forever and looks up at most (len - 1) // 4 blocks: requests 2 and 3 hit hash ids 1 and 2
    assert out["cached_tokens"] == 8 + 8 and out["prompt_tokens"] == 9 + 9 + 12
    assert out["measured_hit_rate"] == round(16 / 30, 4)
    assert 0 < out["predicted_lru_hit_rate"] <= out["infinite_cache_hit_rate"]


def test_replay_bad_input_is_one_line(served, tmp_path, capsys):
    s = served()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"hash_ids": [1], "input_length": 5, "colour": 1}\n')
    assert main(["replay", str(bad), "--url", s.url]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "colour" in err and len(err.splitlines()) == 1
    assert main(["replay", str(bad), "--url", "ftp://127.0.0.1:1"]) == 2
    assert main(["replay", str(tmp_path / "missing.jsonl"), "--url", s.url]) == 2
