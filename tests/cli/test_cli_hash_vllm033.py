"""``python -m kvviz hash`` prints vLLM 0.33.0's block hashes for salted and LoRA requests (the vectors of
tests/vectors/vllm033_vectors.py, computed without kvviz) and names the release it follows."""

from __future__ import annotations

import json

import pytest
from vectors.vllm033_expected import VECTORS

from kvviz.cli import main


def _hash(capsys: pytest.CaptureFixture, *args: str) -> dict:
    assert main(["hash", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_salted_and_lora_chains_match_the_vectors(capsys: pytest.CaptureFixture) -> None:
    out = _hash(capsys, "--tokens", "473", "--block-size", "1", "--hash", "sha256_cbor", "--salt", "s2")
    assert out["reference"] == "vLLM 0.33.0"
    assert [b["hash"] for b in out["blocks"]] == VECTORS["salt_bs1_sha256_cbor"]
    assert out["blocks"][0]["extra_keys"] == [["cache_salt", "s2"]]
    out = _hash(capsys, "--tokens", "0,1,2,3,4,5,6,7", "--block-size", "4", "--salt", "s", "--lora-name", "sql-adapter",
                "--lora-path", "/adapters/sql")
    assert [b["hash"] for b in out["blocks"]] == VECTORS["lora_salt_sha256"]


@pytest.mark.parametrize("args", [["--lora-name", "a"], ["--lora-path", "/p"]])
def test_lora_name_and_path_go_together(capsys: pytest.CaptureFixture, args: list[str]) -> None:
    assert main(["hash", "--tokens", "1,2", *args]) == 2
    assert capsys.readouterr().err.count("\n") == 1
