"""``python -m kvviz session``: JSON keys, events, and one-line errors for bad files and numbers."""

from __future__ import annotations

import json

import pytest

from kvviz.cli import main


def test_session_json_keys_and_events(capsys):
    argv = ["session", "--example", "chat", "--policy", "anthropic-5m", "--pause-at", "3", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"turns", "policy", "is_policy", "cumulative_without_cache", "cumulative_with_cache",
            "projection", "policy_values"} <= set(out)
    t3 = out["turns"][2]
    assert {"cache_read_input_tokens", "cache_creation_input_tokens", "input_tokens"} <= set(t3)
    assert t3["events"] == ["long_pause"] and t3["cache_read_input_tokens"] == 0
    assert all(v["source"] and v["as_of"] for v in out["policy_values"])
    proj = out["projection"]
    assert proj["without_cache"] > 10 * proj["with_cache"]


def test_session_from_file(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"system": "Short.", "turns": [{"user": "hi", "answer": "hello"},
                                                           {"user": "again", "answer": "yes"}]}))
    assert main(["session", "--file", str(f), "--policy", "vllm", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["session"] == "s" and len(out["turns"]) == 2 and out["is_policy"] is False


@pytest.mark.parametrize(
    "content, extra, message",
    [
        ("{not json", [], "not valid JSON"),
        ('{"system": "s", "turns": "many"}', [], "'turns'"),
        (None, ["--restart-tools-at", "999"], "turn number"),
        (None, ["--block-size", "100000"], "block size must be in 1..256"),
        (None, ["--pause-s", "1e12", "--pause-at", "2"], "pause_s"),
        (None, ["--policy", "gemini"], "invalid choice"),
        (None, ["--project-turns", "0"], "projection"),
    ],
)
def test_session_errors_are_one_line(tmp_path, capsys, content, extra, message):
    if content is None:
        argv = ["session", "--example", "chat", *extra]
    else:
        f = tmp_path / "bad.json"
        f.write_text(content)
        argv = ["session", "--file", str(f), *extra]
    assert main([*argv, "--json"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_session_binary_and_missing_files(tmp_path, capsys):
    f = tmp_path / "bin.json"
    f.write_bytes(b"\xff\xfe\x00garbage")
    assert main(["session", "--file", str(f)]) == 2
    assert "not UTF-8" in capsys.readouterr().err
    assert main(["session", "--file", str(tmp_path / "missing.json")]) == 2
    assert "no such file" in capsys.readouterr().err
