"""The CLI stops quietly when the reader of its stdout goes away (``... | head -c 100``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvviz.cli import EXIT_PIPE_CLOSED

ROOT = Path(__file__).resolve().parents[2]


def run_into_closed_pipe(args: list[str]) -> subprocess.CompletedProcess:
    """Run ``python -m kvviz ARGS`` with stdout a pipe whose read end is already closed."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        return subprocess.run([sys.executable, "-m", "kvviz", *args], cwd=ROOT, stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120, env=env)
    finally:
        os.close(write_end)


@pytest.mark.parametrize(("args", "code"), [
    (["bytes", "--preset", "llama-2-7b", "--json"], EXIT_PIPE_CLOSED),
    (["bytes", "--preset", "llama-2-7b"], EXIT_PIPE_CLOSED),
    (["hash", "--tokens", "1,2,3,4,5", "--block-size", "2", "--json"], EXIT_PIPE_CLOSED),
    (["paging", "--json"], EXIT_PIPE_CLOSED),
    (["--help"], 0),  # argparse itself drops help text it cannot write
], ids=["bytes-json", "bytes-text", "hash-json", "paging-json", "help"])
def test_closed_stdout_is_quiet(args, code):
    proc = run_into_closed_pipe(args)
    assert proc.stderr == "", proc.stderr
    assert proc.returncode == code


def test_head_of_the_output_through_a_shell():
    """The issue's own command: ``head -c 100`` takes 100 bytes and closes; nothing reaches stderr."""
    cmd = f"{sys.executable} -m kvviz bytes --preset llama-2-7b --json | head -c 100"
    proc = subprocess.run(["bash", "-c", cmd], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert len(proc.stdout) == 100 and proc.stdout.startswith("{")


def test_open_pipe_still_gets_everything(capsys):
    from kvviz.cli import main

    assert main(["hash", "--tokens", "1,2,3", "--json"]) == 0
    assert capsys.readouterr().out.startswith("{")
