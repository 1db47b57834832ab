"""The de-quantised model cache: damage is detected, builds are atomic, a damaged cache is rebuilt."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from kvviz.model import cache as unit_cache
from kvviz.model import embedded_cache_paths, ensure_embedded_cache, load_model


def _builder(payload: bytes = b"x" * 1000, calls: list | None = None):
    def build(tmp: Path) -> dict:
        if calls is not None:
            calls.append(tmp)
        (tmp / "weights.bin").write_bytes(payload)
        (tmp / "config.json").write_text('{"a": 1}')
        return {"kind": "test"}

    return build


def test_unit_is_built_once_and_then_valid(tmp_path):
    unit = tmp_path / "unit"
    calls: list = []
    assert unit_cache.ensure_unit(unit, _builder(calls=calls), ("weights.bin",)) is True
    assert unit_cache.check_unit(unit, ("weights.bin",)) is None
    assert unit_cache.ensure_unit(unit, _builder(calls=calls)) is False
    assert len(calls) == 1
    manifest = json.loads((unit / "manifest.json").read_text())
    assert manifest["files"]["weights.bin"]["size"] == 1000 and manifest["kind"] == "test"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".build.lock", "unit"]  # no temp leftovers


@pytest.mark.parametrize("damage", ["truncate", "delete", "garbage", "no-manifest", "bad-manifest", "missing-required"])
def test_damage_is_detected_and_rebuilt(tmp_path, damage):
    unit = tmp_path / "unit"
    unit_cache.ensure_unit(unit, _builder())
    weights = unit / "weights.bin"
    if damage == "truncate":
        weights.write_bytes(b"x" * 500)
    elif damage == "delete":
        weights.unlink()
    elif damage == "garbage":
        weights.write_bytes(b"y" * 1000)  # same size, other content
    elif damage == "no-manifest":
        (unit / "manifest.json").unlink()
    elif damage == "bad-manifest":
        (unit / "manifest.json").write_text("{not json")
    required = ("weights.bin", "tokenizer.json") if damage == "missing-required" else ("weights.bin",)
    reasons: list[str] = []
    assert unit_cache.check_unit(unit, required) is not None
    if damage == "missing-required":
        return  # a unit lacking a required file can never satisfy it; rebuild is covered below
    assert unit_cache.ensure_unit(unit, _builder(), required, on_rebuild=reasons.append) is True
    assert reasons and unit_cache.check_unit(unit, required) is None
    assert weights.read_bytes() == b"x" * 1000


def test_failed_build_leaves_no_partial_unit(tmp_path):
    unit = tmp_path / "unit"

    def broken(tmp: Path) -> dict:
        (tmp / "weights.bin").write_bytes(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        unit_cache.ensure_unit(unit, broken)
    assert not unit.exists()
    assert [p.name for p in tmp_path.iterdir()] == [".build.lock"]
    # an existing unit survives a failed rebuild attempt untouched until a good build replaces it
    unit_cache.ensure_unit(unit, _builder())
    (unit / "weights.bin").write_bytes(b"z")
    with pytest.raises(RuntimeError):
        unit_cache.ensure_unit(unit, broken)
    assert (unit / "weights.bin").read_bytes() == b"z"
    assert unit_cache.ensure_unit(unit, _builder()) is True


@pytest.mark.model
def test_damaged_embedded_cache_is_rebuilt(tmp_path, monkeypatch):
    """Truncated weights, a garbage config and a missing tokenizer file: all detected, all rebuilt."""
    lm = load_model()  # makes sure the shared cache exists; its tensors are the reference
    tok_dir, model_dir = embedded_cache_paths()
    copy = tmp_path / "cache"
    shutil.copytree(model_dir.parent, copy / model_dir.parent.name)
    monkeypatch.setenv("KVVIZ_CACHE_DIR", str(copy))
    new_tok, new_model = embedded_cache_paths()
    assert new_model.parent.parent == copy

    weights = new_model / "model.safetensors"
    with open(weights, "r+b") as fh:
        fh.truncate(weights.stat().st_size // 2)
    (new_model / "config.json").write_text("this is not json")
    (new_tok / "tokenizer.json").unlink()
    assert unit_cache.check_unit(new_model) is not None
    assert unit_cache.check_unit(new_tok) is not None

    steps = []
    _, _, built = ensure_embedded_cache(lambda step, f: steps.append(step))
    assert built
    assert {"first_run", "writing_cache"} <= {step.code for step in steps}
    assert unit_cache.check_unit(new_model) is None and unit_cache.check_unit(new_tok) is None
    assert json.loads((new_model / "config.json").read_text())["num_hidden_layers"] == 30

    from safetensors.torch import load_file

    rebuilt = load_file(str(weights))
    reference = lm.model.state_dict()
    for name in ("model.embed_tokens.weight", "model.layers.0.self_attn.k_proj.weight", "model.layers.29.mlp.down_proj.weight"):
        assert torch.equal(rebuilt[name].to(reference[name].dtype), reference[name].cpu())
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(new_tok))
    assert tok("Привет 😀")["input_ids"] == lm.tokenizer("Привет 😀")["input_ids"]
