"""kvviz's native Llama decoder against transformers' LlamaForCausalLM: same logits, same K/V.

Two kinds of check: tiny random Llamas (MHA, GQA, MQA, several rotary bases) saved with
transformers and loaded natively, and the embedded SmolLM2 loaded both ways.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvviz.model import (
    InputError,
    ModelLoadError,
    load_model,
    prefill,
    prefill_continue,
    resolve_backend,
    resolve_model,
)
from kvviz.model.llama import KVCache, LlamaConfig, load_native_llama, native_llama_supported

ROOT = Path(__file__).resolve().parents[2]
TOL = 1e-5  # fp32 on the CPU; in practice the two agree bit for bit


def _tiny_llama(folder: Path, heads: int, kv_heads: int, theta: float, seed: int = 0) -> torch.nn.Module:
    """A random 2-layer Llama saved by transformers into ``folder``; the transformers model."""
    from transformers import LlamaConfig as HFLlamaConfig
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = HFLlamaConfig(vocab_size=97, hidden_size=16 * heads, intermediate_size=40, num_hidden_layers=2,
                        num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=256,
                        rope_theta=theta, tie_word_embeddings=True, rms_norm_eps=1e-5)
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():  # random norms too, so a mix-up of the two norms would show
        for layer in model.model.layers:
            layer.input_layernorm.weight.uniform_(0.5, 1.5)
            layer.post_attention_layernorm.weight.uniform_(0.5, 1.5)
    model.save_pretrained(str(folder))
    return model


@pytest.fixture(scope="module", params=[(4, 4, 10000.0), (4, 2, 100000.0), (6, 1, 500.0)], ids=["MHA", "GQA", "MQA"])
def pair(request, tmp_path_factory):
    heads, kv_heads, theta = request.param
    folder = tmp_path_factory.mktemp("tiny-llama")
    hf = _tiny_llama(folder, heads, kv_heads, theta)
    native = load_native_llama(folder, torch.float32, "cpu").eval()
    return hf, native


def _run(model: torch.nn.Module, ids: list[int], cache=None):
    kwargs = {} if cache is None else {"past_key_values": cache}
    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids]), use_cache=True, **kwargs)


def _layers(cache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(layer.keys, layer.values) for layer in cache.layers]


def test_native_parameters_are_transformers_parameters(pair):
    hf, native = pair
    ours, theirs = native.state_dict(), hf.state_dict()
    assert set(ours) == set(theirs)
    for name, tensor in theirs.items():
        assert torch.equal(ours[name], tensor), name
    assert native.lm_head.weight is native.model.embed_tokens.weight  # tied, not copied


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ids=st.lists(st.integers(0, 96), min_size=1, max_size=40), split=st.floats(0, 1))
def test_same_logits_and_kv_in_one_pass_and_after_a_prefix(pair, ids, split):
    hf, native = pair
    a, b = _run(hf, ids), _run(native, ids)
    assert (a.logits - b.logits).abs().max().item() <= TOL
    for (ka, va), (kb, vb) in zip(_layers(a.past_key_values), _layers(b.past_key_values), strict=True):
        assert ka.shape == kb.shape and (ka - kb).abs().max().item() <= TOL and (va - vb).abs().max().item() <= TOL
    p = int(split * (len(ids) - 1))  # a prefix, then the rest on top of its cache
    if p == 0:
        return
    head = _run(native, ids[:p])
    tail = _run(native, ids[p:], head.past_key_values)
    assert (tail.logits[0, -1] - a.logits[0, -1]).abs().max().item() <= 1e-4
    assert tail.past_key_values.get_seq_length() == len(ids)


def test_fused_projections_are_views_and_a_replaced_weight_falls_back(pair):
    hf, native = pair
    ids = [3, 1, 4, 1, 5, 9, 2, 6]
    attn, mlp = native.model.layers[0].self_attn, native.model.layers[0].mlp
    parts = [attn.q_proj, attn.k_proj, attn.v_proj]
    assert attn.qkv is not None and attn.qkv.applies() and mlp.gate_up.applies()
    assert parts[1].weight.untyped_storage().data_ptr() == attn.qkv.weight.untyped_storage().data_ptr()  # no copy
    fused = _run(native, ids).logits
    assert (fused - _run(hf, ids).logits).abs().max().item() <= TOL
    saved = attn.k_proj.weight
    try:  # a replaced weight (a move, an edit): the layer computes with it, not with the stale fused copy
        attn.k_proj.weight = torch.nn.Parameter(saved.detach().clone() * 2, requires_grad=False)
        assert not attn.qkv.applies()
        changed = _run(native, ids).logits
        assert (changed - fused).abs().max().item() > 1e-3
    finally:
        attn.k_proj.weight = saved
    assert attn.qkv.applies()


def test_cache_grows_into_new_tensors_and_never_writes_the_prefix(pair):
    _, native = pair
    first = _run(native, [1, 2, 3, 4])
    prefix = [(k.clone(), v.clone()) for k, v in _layers(first.past_key_values)]
    given_tensors = [(k.clone(), v.clone()) for k, v in prefix]
    cache = native.new_cache(given_tensors)
    out = _run(native, [5, 6], cache)
    for (k, v), (k0, v0) in zip(given_tensors, prefix, strict=True):
        assert torch.equal(k, k0) and torch.equal(v, v0)
    assert out.past_key_values.get_seq_length() == 6
    with pytest.raises(ValueError, match="layers of K/V"):
        KVCache(3, given_tensors)


def test_unsupported_configs_are_named_and_refused(tmp_path):
    base = {"model_type": "llama", "hidden_act": "silu", "tie_word_embeddings": True}
    assert native_llama_supported(base) is None
    assert "model_type" in native_llama_supported({**base, "model_type": "qwen2"})
    assert "rotary" in native_llama_supported({**base, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}})
    assert "bias" in native_llama_supported({**base, "attention_bias": True})
    assert "activation" in native_llama_supported({**base, "hidden_act": "gelu"})
    assert "untied" in native_llama_supported({**base, "tie_word_embeddings": False})
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**base, "model_type": "gpt2"}))
    with pytest.raises(ValueError, match="does not support model_type 'gpt2'"):
        load_native_llama(folder, torch.float32, "cpu")
    (folder / "config.json").write_text(json.dumps({**base, "vocab_size": 8, "hidden_size": 8, "intermediate_size": 8,
                                                   "num_hidden_layers": 1, "num_attention_heads": 2}))
    with pytest.raises(ValueError, match="model.safetensors"):
        load_native_llama(folder, torch.float32, "cpu")


def test_a_missing_tensor_is_refused(tmp_path):
    from safetensors.torch import load_file, save_file

    _tiny_llama(tmp_path, 4, 2, 10000.0)
    state = load_file(str(tmp_path / "model.safetensors"))
    del state["model.layers.1.mlp.up_proj.weight"]
    save_file(state, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(RuntimeError, match="up_proj"):
        load_native_llama(tmp_path, torch.float32, "cpu")


def test_config_reads_new_and_old_rotary_fields():
    common = {"vocab_size": 10, "hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 1,
              "num_attention_heads": 2}
    assert LlamaConfig.from_dict({**common, "rope_parameters": {"rope_theta": 123.0}}).rope_theta == 123.0
    assert LlamaConfig.from_dict({**common, "rope_theta": 77.0}).rope_theta == 77.0
    cfg = LlamaConfig.from_dict(common)
    assert (cfg.num_key_value_heads, cfg.head_dim) == (2, 4)


def test_backend_choice(monkeypatch):
    embedded, hub = resolve_model("embedded"), resolve_model("HuggingFaceTB/SmolLM2-360M-Instruct")
    monkeypatch.delenv("KVVIZ_BACKEND", raising=False)
    assert resolve_backend(embedded) == "native"
    assert resolve_backend(hub) == "transformers"
    assert resolve_backend(embedded, "transformers") == "transformers"
    monkeypatch.setenv("KVVIZ_BACKEND", "transformers")
    assert resolve_backend(embedded) == "transformers"
    with pytest.raises(InputError, match="hub ids"):
        resolve_backend(hub, "native")
    with pytest.raises(InputError, match="unknown backend"):
        resolve_backend(embedded, "onnx")


@pytest.mark.model
def test_embedded_model_native_equals_transformers():
    native, hf = load_model(backend="native"), load_model(backend="transformers")
    assert (native.info.backend, hf.info.backend) == ("native", "transformers")
    assert native.info.num_params == hf.info.num_params
    text = "Привет 😀 مرحبا 你好. The cache keeps keys and values. " * 8
    # the native decoder's own pass (the engine multiplies with oneDNN-packed weights: 3e-6 relative apart,
    # tests/model/test_prefill_engine.py)
    a, b = prefill(native, text=text), prefill(hf, text=text)
    assert a.token_ids == b.token_ids and a.kv_bytes_measured == b.kv_bytes_measured
    assert (a.last_logits - b.last_logits).abs().max().item() <= TOL
    for ka, kb in zip(a.keys + a.values, b.keys + b.values, strict=True):
        assert (ka - kb).abs().max().item() <= TOL
    p = a.num_tokens // 2
    ca = prefill_continue(native, [k[:, :p] for k in a.keys], [v[:, :p] for v in a.values], a.token_ids)
    cb = prefill_continue(hf, [k[:, :p] for k in b.keys], [v[:, :p] for v in b.values], b.token_ids)
    assert (ca.last_logits - cb.last_logits).abs().max().item() <= TOL
    assert (ca.last_logits - a.last_logits).abs().max().item() <= 1e-3


@pytest.mark.model
def test_native_load_of_a_folder_and_a_clear_error_for_an_unsupported_one(tmp_path):
    from transformers import AutoTokenizer

    from kvviz.model import embedded_cache_paths

    load_model()  # builds the embedded cache if needed
    tok_dir, model_dir = embedded_cache_paths()
    folder = tmp_path / "smol"
    folder.mkdir()
    for f in ("config.json", "model.safetensors"):
        (folder / f).symlink_to(model_dir / f)
    AutoTokenizer.from_pretrained(str(tok_dir)).save_pretrained(str(folder))
    lm = load_model(str(folder), backend="native")
    assert lm.info.backend == "native" and lm.info.num_layers == 30
    bad = tmp_path / "bad"
    bad.mkdir()
    raw = json.loads((model_dir / "config.json").read_text())
    (bad / "config.json").write_text(json.dumps({**raw, "attention_bias": True}))
    with pytest.raises(ModelLoadError, match="bias terms"):
        load_model(str(bad), backend="native")


@pytest.mark.model
def test_warm_start_imports_neither_transformers_models_nor_dynamo():
    """The point of the native decoder: a warm load skips transformers' modeling stack (and the
    torch.distributed / dynamo / sympy imports it pulls in)."""
    load_model()  # the cache exists before the child starts
    code = ("import sys; from kvviz.model import load_model, prefill; lm = load_model(); "
            "r = prefill(lm, text='hi there'); "
            "print(lm.info.backend, r.num_tokens, "
            "sorted(m for m in ('transformers.modeling_utils', 'torch._dynamo', 'sympy') if m in sys.modules))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("KVVIZ_BACKEND", None)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["native", "2", "[]"]
