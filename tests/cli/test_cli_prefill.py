"""``python -m kvviz prefill``: JSON keys and values, and one-line errors with non-zero exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvviz.cli import main

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.model

KEYS = {"model", "device", "dtype", "num_tokens", "num_layers", "num_heads", "num_kv_heads", "head_dim",
        "kv_bytes_measured", "kv_bytes_per_token", "prefill_ms"}


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["prefill", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_has_the_keys_and_measured_bytes(capsys):
    code, out, err = _run(capsys, "--text", "Hello, cache! Привет 😀", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data.keys() >= KEYS
    assert (data["num_layers"], data["num_heads"], data["num_kv_heads"], data["head_dim"]) == (30, 9, 3, 64)
    per_token = 2 * 30 * 3 * 64 * data["element_size"]
    assert data["kv_bytes_per_token"] == per_token == data["kv_bytes_per_token_formula"]
    assert data["kv_bytes_measured"] == per_token * data["num_tokens"]
    assert data["model"] == "SmolLM2-135M-Instruct" and data["prefill_ms"] > 0
    assert data["truncated"] is False


def test_tokens_and_truncation(capsys):
    code, out, _ = _run(capsys, "--text", "a b c d e f g h", "--max-tokens", "3", "--tokens", "--json")
    data = json.loads(out)
    assert code == 0 and data["num_tokens"] == 3 and data["truncated"] is True
    assert len(data["token_ids"]) == len(data["pieces"]) == 3 and data["notice"]


def test_text_from_file(capsys, tmp_path):
    path = tmp_path / "prompt.txt"
    path.write_text("שלום 你好", encoding="utf-8")
    code, out, _ = _run(capsys, "--file", str(path), "--json")
    assert code == 0 and json.loads(out)["num_tokens"] > 1


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--text", "   "], "empty"),
        (["--text", ""], "empty"),
        (["--text", "hi", "--model", "kvviz-tests/no-such-model"], "kvviz-tests/no-such-model"),
        (["--text", "hi", "--device", "tpu"], "unknown device"),
        (["--text", "hi", "--dtype", "int3"], "unknown dtype"),
        (["--text", "hi", "--max-tokens", "0"], "max_tokens"),
        (["--text", "hi", "--max-tokens", "many"], "invalid int"),
        (["--text", "hi", "--model", "/no/such/folder"], "does not exist"),
        ([], "required"),
    ],
)
def test_errors_are_one_line_with_nonzero_exit(capsys, argv, needle):
    code, out, err = _run(capsys, *argv, "--json")
    assert code != 0 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0]
    assert "Traceback" not in err


def test_binary_file_is_refused(capsys, tmp_path):
    path = tmp_path / "blob.bin"
    path.write_bytes(bytes(range(256)) * 4)
    code, _, err = _run(capsys, "--file", str(path))
    assert code == 2 and "not UTF-8" in err and len(err.strip().splitlines()) == 1


def test_real_process_error_has_no_traceback():
    proc = subprocess.run([sys.executable, "-m", "kvviz", "prefill", "--text", " ", "--json"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == ["error: The text is empty: type or paste at least one visible character."]
