"""The model folder kvviz writes (the embedded GGUF de-quantised) names its architecture in config.json:
vLLM and other tools pick the model class from ``architectures``, and a GGUF load leaves it null. A folder
written before this was fixed is repaired in place, its manifest still valid."""

from __future__ import annotations

import json

import pytest

from kvviz.model import cache as unit_cache
from kvviz.model.embedded import folder_config, repair_model_config


def test_folder_config_names_the_architecture() -> None:
    raw = {"model_type": "llama", "architectures": None, "quantization_config": {"q": 1},
           "_model_name_or_path": "/somewhere", "hidden_size": 576}
    out = folder_config(raw)
    assert out["architectures"] == ["LlamaForCausalLM"] and out["dtype"] == "float32"
    assert "quantization_config" not in out and "_model_name_or_path" not in out and out["hidden_size"] == 576
    assert folder_config({"model_type": "llama", "architectures": ["MyLlama"]})["architectures"] == ["MyLlama"]
    assert folder_config({"model_type": "no-such-type"}).get("architectures") is None


def _old_unit(folder, architectures) -> None:
    def build(tmp):
        (tmp / "model.safetensors").write_bytes(b"w" * 100)
        (tmp / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": architectures}))
        return {"kind": "model", "source": "x.gguf"}

    unit_cache.ensure_unit(folder, build, ("config.json", "model.safetensors"))


def test_an_old_folder_is_repaired_in_place(tmp_path) -> None:
    folder = tmp_path / "model"
    _old_unit(folder, None)
    assert repair_model_config(folder) is True
    assert json.loads((folder / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]
    assert unit_cache.check_unit(folder, ("config.json", "model.safetensors")) is None  # no rebuild follows
    manifest = json.loads((folder / unit_cache.MANIFEST).read_text())
    assert manifest["kind"] == "model" and manifest["source"] == "x.gguf"
    assert repair_model_config(folder) is False  # nothing left to do


def test_a_named_folder_is_left_alone(tmp_path) -> None:
    folder = tmp_path / "model"
    _old_unit(folder, ["LlamaForCausalLM"])
    before = (folder / unit_cache.MANIFEST).read_text()
    assert repair_model_config(folder) is False and (folder / unit_cache.MANIFEST).read_text() == before


@pytest.mark.model
def test_the_embedded_model_folder_names_llama() -> None:
    from kvviz.model import ensure_embedded_cache

    _, model_dir, _ = ensure_embedded_cache()
    assert json.loads((model_dir / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]
