"""``python -m kvviz generate --json``: one entry per prompt, sequential prompts hit earlier blocks,
bad input is one line with exit status 2 (before any model load)."""

from __future__ import annotations

import json

import pytest

from kvviz.cli import main

SHARED = "The quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat by the door. "


@pytest.mark.parametrize("argv", [
    ["--prompt", "", "--max-tokens", "2"],
    ["--prompt", "hi", "--max-tokens", "0"],
    ["--prompt", "hi", "--temperature", "-1"],
    ["--prompt", "hi", "--block-size", "0"],
    ["--prompt", "hi", "--kv-cache-mib", "0"],
])
def test_bad_input_is_one_line_exit_2(argv, capsys):
    assert main(["generate", *argv, "--json"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err and "Traceback" not in err


@pytest.mark.model
def test_generate_json_sequential_hits_and_concurrent(capsys):
    argv = ["generate", "--prompt", SHARED + "Why?", "--prompt", SHARED + "How?", "--max-tokens", "4", "--ignore-eos", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    first, second = out["results"]
    assert first["prompt_tokens"] > 16 and len(first["token_ids"]) == 4 and first["cached_tokens"] == 0
    assert second["cached_tokens"] > 0 and second["cached_tokens"] % out["engine"]["block_size"] == 0
    assert second["cached_tokens"] < second["prompt_tokens"]
    assert out["engine"]["kv_cache_bytes"] > 0 and out["engine"]["num_blocks"] > 1
    assert {"ttft_ms", "preempted", "text"} <= set(first)
    assert main([*argv, "--concurrent"]) == 0
    both = json.loads(capsys.readouterr().out)
    assert [r["token_ids"] for r in both["results"]] == [first["token_ids"], second["token_ids"]]
