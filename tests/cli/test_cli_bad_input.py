"""Bad input on every CLI subcommand (room, timing and collisions have their own tests): empty and blank
text, binary and huge files, malformed or wrongly shaped JSON, absurd numbers, unknown names, missing
files and directories. Each must exit with status 2 and exactly one line on stderr, quickly.

Fast: nothing here loads the model weights (inputs are rejected before the load); a few cases use the
tokenizer.
"""

from __future__ import annotations

import io
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from kvviz.cli import main

ROOT = Path(__file__).resolve().parents[2]
BIG = "1" + "0" * 100  # 10**100
FILE_CASES = ("empty", "blank", "binary", "malformed", "list", "string", "null", "deep", "deep_object",
              "big", "bom_list", "huge_int", "missing", "directory")


@pytest.fixture(scope="module")
def bad(tmp_path_factory) -> dict[str, str]:
    """Paths of bad input files, by kind."""
    d = tmp_path_factory.mktemp("bad")
    rng = random.Random(7)
    files = {
        "empty": b"",
        "blank": b"  \n\t \n",
        "binary": bytes([0xFF, 0x00]) + rng.randbytes(2000),
        "malformed": b'{"steps": [1, 2,',
        "list": b"[1, 2, 3]",
        "string": b'"hello"',
        "null": b"null",
        "deep": b"[" * 100_000 + b"]" * 100_000,
        "deep_object": b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
        "big": b'{"a": "' + b"x" * 5_000_000 + b'"}',
        "bom_list": b"\xef\xbb\xbf[1]",
        "huge_int": b'{"num_blocks": ' + b"9" * 5000 + b"}",
        "wrong_numbers": b'{"block_size": "sixteen", "num_blocks": "lots", "steps": [{"op": "add", "id": 1, '
                         b'"tokens": ["a"]}], "turns": "many", "num_hidden_layers": "32"}',
        "nested_nulls": b'{"block_size": null, "num_blocks": null, "steps": [null, {"op": null, "tokens": [null]}], '
                        b'"system": null, "turns": [{"user": null, "answer": null}], "num_hidden_layers": null}',
        "nan_config": b'{"num_hidden_layers": NaN, "num_attention_heads": Infinity, "hidden_size": -Infinity}',
        "text": b"one two three " * 400_000,  # 5.6 MB of text
    }
    paths = {}
    for name, content in files.items():
        (d / f"{name}.json").write_bytes(content)
        paths[name] = str(d / f"{name}.json")
    paths["missing"] = str(d / "missing.json")
    (d / "folder").mkdir()
    paths["directory"] = str(d / "folder")
    return paths


def run_bad(capsys, argv: list[str], stdin: bytes | None = None, monkeypatch=None) -> str:
    """Run the CLI in-process; assert exit 2, nothing on stdout, one line on stderr; return that line."""
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    code = main([*argv, "--json"])
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2, (argv[:4], code, err)
    assert out == "" and len(lines) == 1 and lines[0].startswith("error: "), (argv[:4], out[:200], err[:500])
    assert "Traceback" not in err and len(lines[0]) < 400
    return lines[0]


# ----------------------------------------------------------------------------- files and stdin


@pytest.mark.parametrize("kind", [*FILE_CASES, "wrong_numbers", "nested_nulls"])
@pytest.mark.parametrize("argv", [
    ["simulate", "--trace"],
    ["scenario", "--file"],
    ["session", "--file"],
    ["bytes", "--config"],
], ids=lambda a: a[0] if isinstance(a, list) else a)
def test_bad_files(capsys, bad, argv, kind):
    run_bad(capsys, [*argv, bad[kind]])


@pytest.mark.parametrize("kind, message", [
    ("deep", "nested too deeply"),
    ("binary", "not UTF-8"),
    ("malformed", "not valid JSON"),
    ("missing", "no such file"),
    ("directory", "is a directory"),
    ("big", "too large"),  # 5 MB: over the scenario (4 MiB) and session (2 MB) limits; a trace may be 16 MiB
    ("huge_int", "number too long"),
])
def test_file_messages_say_what_is_wrong(capsys, bad, kind, message):
    commands = [["scenario", "--file"], ["session", "--file"]] + ([] if kind == "big" else [["simulate", "--trace"]])
    for argv in commands:
        assert message in run_bad(capsys, [*argv, bad[kind]])


def test_config_with_nan_and_wrong_types(capsys, bad):
    assert "whole number" in run_bad(capsys, ["bytes", "--config", bad["nan_config"]])
    assert "whole number" in run_bad(capsys, ["bytes", "--config", bad["wrong_numbers"]])


@pytest.mark.parametrize("argv", [["simulate", "--trace", "-"], ["scenario", "--file", "-"], ["bytes", "--config", "-"]],
                         ids=lambda a: a[0])
@pytest.mark.parametrize("kind", ["empty", "binary", "deep", "big", "list"])
def test_bad_stdin(capsys, monkeypatch, bad, argv, kind):
    run_bad(capsys, argv, stdin=Path(bad[kind]).read_bytes(), monkeypatch=monkeypatch)


# ----------------------------------------------------------------------------- numbers and names


@pytest.mark.parametrize("argv", [
    # hash / diff (token ids, no model)
    ["hash", "--tokens", ""], ["hash", "--tokens", "   "], ["hash", "--tokens", "a,b"], ["hash", "--tokens", "-1"],
    ["hash", "--tokens", "1e30"], ["hash", "--tokens", BIG], ["hash", "--tokens", "nan"], ["hash", "--tokens", "[]"],
    ["hash", "--tokens", "1,2", "--block-size", "0"], ["hash", "--tokens", "1,2", "--block-size", "-1"],
    ["hash", "--tokens", "1,2", "--block-size", BIG], ["hash", "--tokens", "1,2", "--block-size", "nan"],
    ["hash", "--tokens", "1,2", "--hash", "nope"], ["hash", "--text", ""], ["hash", "--text", " \n\t "],
    ["diff"], ["diff", "--a-tokens", "1,2"], ["diff", "--a-tokens", "1", "--a", "x", "--b-tokens", "1"],
    ["diff", "--a", "", "--b-tokens", "1"], ["diff", "--a-tokens", "1", "--b-tokens", "1", "--block-size", BIG],
    # bytes
    ["bytes"], ["bytes", "--preset", "nope"], ["bytes", "--preset", ""],
    ["bytes", "--layers", "0", "--kv-heads", "8", "--head-dim", "128"],
    ["bytes", "--layers", "-1", "--kv-heads", "8", "--head-dim", "128"],
    ["bytes", "--layers", BIG, "--kv-heads", "8", "--head-dim", "128"],
    ["bytes", "--layers", "32", "--kv-heads", "1e30", "--head-dim", "128"],
    ["bytes", "--layers", "32", "--kv-heads", "8", "--head-dim", "nan"],
    ["bytes", "--layers", "32", "--kv-heads", "8"],
    ["bytes", "--preset", "llama-2-7b", "--tokens", "0"], ["bytes", "--preset", "llama-2-7b", "--tokens", BIG],
    ["bytes", "--preset", "llama-2-7b", "--batch", "-1"], ["bytes", "--preset", "llama-2-7b", "--block-size", "0"],
    ["bytes", "--preset", "llama-2-7b", "--max-len", BIG], ["bytes", "--preset", "llama-2-7b", "--dtype", "nope"],
    ["bytes", "--preset", "llama-2-7b", "--budget-gib", "nan"], ["bytes", "--preset", "llama-2-7b", "--budget-gib", "inf"],
    ["bytes", "--preset", "llama-2-7b", "--budget-gib", "0"], ["bytes", "--preset", "llama-2-7b", "--budget-gib", "1e30"],
    ["bytes", "--preset", "llama-2-7b", "--layers", "3"],
    # paging
    ["paging", "--memory-tokens", "0"], ["paging", "--memory-tokens", BIG], ["paging", "--memory-tokens", "1000000000"],
    ["paging", "--block-size", "-1"], ["paging", "--requests", "0"], ["paging", "--requests", "10000000"],
    ["paging", "--shared-prefix", "-1"], ["paging", "--prompt", "5", "1"], ["paging", "--output", "1", BIG],
    ["paging", "--max-model-len", "0"], ["paging", "--seed", "nan"], ["paging", "--snapshot-step", "-1"],
    ["paging", "--reservation", "nope"],
    # session (built-in example; the tokenizer is fine)
    ["session", "--example", "nope"], ["session", "--example", ""], ["session", "--example", "chat", "--block-size", "0"],
    ["session", "--example", "chat", "--block-size", BIG], ["session", "--example", "chat", "--ttl", "nan"],
    ["session", "--example", "chat", "--ttl", "inf"], ["session", "--example", "chat", "--pause-s", "1e30"],
    ["session", "--example", "chat", "--restart-tools-at", "0"], ["session", "--example", "chat", "--pause-at", BIG],
    ["session", "--example", "chat", "--min-cacheable", "-1"], ["session", "--example", "chat", "--project-turns", BIG],
    ["session", "--example", "chat", "--marks", "nope"], ["session", "--example", "chat", "--policy", "nope"],
    # scenario
    ["scenario", "--name", "nope"], ["scenario", "--name", ""], ["scenario", "--name", "shared_prompt", "--step", "-1"],
    ["scenario", "--name", "shared_prompt", "--step", BIG],
    ["scenario", "--name", "shared_prompt", "--radix", "--step", BIG],
    ["scenario", "--name", "shared_prompt", "--radix", "--window", "0"],
    ["scenario", "--name", "shared_prompt", "--radix", "--page-size", BIG],
    # commands on the real model: rejected before the weights load
    ["prefill", "--text", ""], ["prefill", "--text", "  \n "], ["prefill", "--text", "hi", "--max-tokens", "0"],
    ["prefill", "--text", "hi", "--max-tokens", BIG], ["prefill", "--text", "hi", "--max-tokens", "nan"],
    ["prefill", "--text", "hi", "--model", ""], ["prefill", "--text", "hi", "--model", "  "],
    ["reuse", "--a", "", "--b", "x"], ["reuse", "--a", "x", "--b", " \t"], ["reuse", "--a", "x", "--b", "y", "--max-tokens", "-1"],
    ["reuse", "--a", "x", "--b", "y", "--block-size", "0"], ["reuse", "--a", "x", "--b", "y", "--hash", "nope"],
    ["reuse", "--a", "x", "--b", "y", "--model", ""],
    # no or unknown command
    [], ["nope"],
], ids=lambda a: " ".join(x[:12] for x in a) or "(none)")
def test_bad_arguments(capsys, argv):
    run_bad(capsys, argv)


@pytest.mark.parametrize("kind", ["empty", "blank", "binary", "missing", "directory"])
def test_prefill_bad_files_fail_before_the_model_loads(capsys, bad, kind):
    run_bad(capsys, ["prefill", "--file", bad[kind]])


def test_prefill_bad_model_paths(capsys, bad):
    assert "is a file, not a model folder" in run_bad(capsys, ["prefill", "--text", "hi", "--model", bad["binary"]])
    assert "no config.json" in run_bad(capsys, ["prefill", "--text", "hi", "--model", bad["directory"]])
    assert "offline" in run_bad(capsys, ["prefill", "--text", "hi", "--model", "kvviz-tests/no-such-model"])


# ----------------------------------------------------------------------------- real processes


@pytest.mark.parametrize("argv, stdin_kind", [
    (["simulate", "--trace", "-"], "deep"),
    (["scenario", "--file", "-"], "binary"),
    (["session", "--file", "{text}"], None),
    (["bytes", "--config", "{big}"], None),
    (["hash", "--tokens", BIG], None),
], ids=lambda a: a[0] if isinstance(a, list) else str(a))
def test_a_real_process_prints_one_line_and_exits_2(bad, argv, stdin_kind):
    """The same promise end to end: a child process, stderr exactly one line, no traceback, in seconds."""
    argv = [a.format(text=bad["text"], big=bad["big"]) for a in argv]
    stdin = Path(bad[stdin_kind]).read_bytes() if stdin_kind else b""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "kvviz", *argv], input=stdin, capture_output=True, cwd=ROOT,
                          env=env, timeout=60)
    err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
    assert proc.returncode == 2 and len(err) == 1 and err[0].startswith("error: "), (proc.returncode, err[:5])
    assert proc.stdout == b""
