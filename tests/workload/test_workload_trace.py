"""Parsing workload traces: line kinds, hashing with kvviz's vLLM hashing, and one-line errors naming the line."""

from __future__ import annotations

import json

import pytest

from kvviz.analysis.workload.gen import WorkloadGenConfig, generate
from kvviz.analysis.workload.parse import parse_trace
from kvviz.analysis.workload.trace import WorkloadError
from kvviz.mirror.hashing import DEFAULT_HASH, DEFAULT_SEED, hash_block_chain, init_none_hash


def _jsonl(*objs) -> str:
    return "\n".join(json.dumps(o) for o in objs)


def test_mooncake_lines_default_block_size_and_fields():
    trace = parse_trace(_jsonl({"timestamp": 0, "input_length": 1000, "output_length": 7, "hash_ids": [4, 9]},
                               {"timestamp": 5, "input_length": 600, "hash_ids": [4, 10]}))
    assert trace.block_size == 512 and trace.num_requests == 2 and trace.num_blocks == 3
    r = trace.requests[0]
    assert r.lookup_blocks == 2 and r.full_blocks == 1 and r.output_tokens == 7 and r.timestamp_ms == 0
    assert trace.block_labels == ["4", "9", "10"] and trace.block_parent == [-1, 0, 0]


def test_token_ids_hash_with_kvviz_default_hashing():
    tokens = list(range(40))
    trace = parse_trace(_jsonl({"token_ids": tokens}))
    assert trace.block_size == 16
    expected = hash_block_chain(tokens, 16, DEFAULT_HASH, init_none_hash(DEFAULT_HASH, DEFAULT_SEED))
    assert trace.block_labels == [h.hex()[:12] for h in expected]
    r = trace.requests[0]
    assert r.blocks == (0, 1) and r.lookup_blocks == (40 - 1) // 16 and r.input_tokens == 40


@pytest.mark.parametrize(("text", "message"), [
    ("", "empty"),
    ("\n  \n", "empty"),
    ('{"hash_ids": [1], "input_length": 5}\n{bad', "line 2: not valid JSON"),
    ("[1, 2]", "line 1: expected a JSON object"),
    ('{"input_length": 5}', "line 1: give exactly one of"),
    ('{"hash_ids": [1], "token_ids": [1]}', "line 1: give exactly one of"),
    ('{"hash_ids": [1]}', "line 1: a 'hash_ids' line needs 'input_length'"),
    ('{"hash_ids": [1], "input_length": -3}', "line 1: 'input_length' must be in 0.."),
    ('{"hash_ids": [1], "input_length": "5"}', "line 1: 'input_length' must be an integer"),
    ('{"hash_ids": "1,2", "input_length": 5}', "line 1: 'hash_ids' must be a list"),
    ('{"hash_ids": [1, -2], "input_length": 5}', "line 1: 'hash_ids'[1] must be a non-negative integer"),
    ('{"hash_ids": [1, 1], "input_length": 900}', "repeats an id"),
    ('{"hash_ids": [1, 2, 3], "input_length": 600}', "do not cover input_length 600"),
    ('{"token_ids": []}', "line 1: no tokens"),
    ('{"token_ids": [1, true]}', "'token_ids'[1] must be a non-negative integer"),
    ('{"token_ids": [1], "extra": 1}', "unknown key 'extra'"),
    ('{"hash_ids": [1], "input_length": 5, "timestamp": -1}', "'timestamp' must be >= 0"),
    ('{"hash_ids": [1], "input_length": 5, "timestamp": 9}\n{"hash_ids": [2], "input_length": 5, "timestamp": 3}',
     "line 2: timestamp 3 ms is before"),
    ('{"token_ids": [1, 2]}\n{"hash_ids": [1], "input_length": 5}', "line 2: a 'hash_ids' line in a trace"),
    ('{"prompt": "hi"}', "line 1: a 'prompt' line needs the model's tokenizer"),
])
def test_bad_input_is_one_line_naming_the_line(text, message):
    with pytest.raises(WorkloadError) as info:
        parse_trace(text)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_binary_and_bad_block_size():
    with pytest.raises(WorkloadError, match="not UTF-8"):
        parse_trace(b"\xff\xfe\x00garbage")
    with pytest.raises(WorkloadError, match="block size"):
        parse_trace('{"hash_ids": [1], "input_length": 5}', block_size=0)
    with pytest.raises(WorkloadError, match="line 1: token_ids lines are hashed by kvviz"):
        parse_trace('{"token_ids": [1, 2]}', block_size=512)


def test_generator_is_seeded_and_parses():
    cfg = WorkloadGenConfig(num_requests=200, block_size=64, seed=3)
    a, b = generate(cfg), generate(cfg)
    assert a == b and len(a) == 200
    assert generate(WorkloadGenConfig(num_requests=200, block_size=64, seed=4)) != a
    trace = parse_trace(_jsonl(*a), 64)
    assert trace.has_timestamps and trace.num_blocks < sum(len(r.blocks) for r in trace.requests)


def test_an_in_memory_read_reports_lines_rate_and_eta():
    from kvviz.analysis.workload.example import EXAMPLE_PATH

    seen = []
    trace = parse_trace(EXAMPLE_PATH.read_bytes(), progress=lambda p: seen.append(
        (p.unit, p.done, p.total, p.requests, p.rate, p.eta_s)), every_s=0.0)
    lines = len(EXAMPLE_PATH.read_bytes().splitlines())
    assert [s[1] for s in seen] == list(range(512, lines + 1, 512)) and all(s[2] == lines for s in seen)
    assert all(s[0] == "lines" and s[4] > 0 and s[5] is not None for s in seen)
    assert [s[3] for s in seen] == [n - 1 for n in range(512, lines + 1, 512)] and trace.num_requests == lines
