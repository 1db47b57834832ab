"""``python -m kvviz hash`` with no --seed prints the digest a default vLLM computes (sha256 over pickle,
NONE_HASH from "vllm-none-hash"), computed here with hashlib + pickle only."""

from __future__ import annotations

import hashlib
import json
import pickle
import subprocess
import sys
from pathlib import Path

from kvviz.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _sha256(obj) -> bytes:
    return hashlib.sha256(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)).digest()


def test_default_hash_equals_a_default_vllm(capsys):
    assert main(["hash", "--tokens", "1,2,3,4", "--block-size", "4", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    none_hash = _sha256("vllm-none-hash")
    assert data["none_hash"] == none_hash.hex()
    assert data["blocks"][0]["hash"] == _sha256((none_hash, (1, 2, 3, 4), None)).hex()
    assert (data["hash"], data["none_hash_seed"], data["none_hash_seed_reason"]) == (
        "sha256", "vllm-none-hash", "default_crypto")


def test_xxhash_default_seed_is_random_and_not_printed():
    """Two real processes: the claim is about a fresh seed per process."""
    cmd = [sys.executable, "-m", "kvviz", "hash", "--tokens", "1,2", "--block-size", "2", "--hash", "xxhash",
           "--json"]
    a, b = (json.loads(subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120,
                                      check=True).stdout) for _ in range(2))
    assert a["none_hash_seed"] is None and a["none_hash_seed_reason"] == "random_non_crypto"
    assert a["none_hash"] != b["none_hash"]  # a fresh process draws a fresh seed, as vLLM does
