"""Loading models and tokenizers: the embedded SmolLM2 (via a de-quantised cache) or any HF causal LM.

Which model a name means is ``kvviz.model.resolve``; the embedded model's cache ``kvviz.model.embedded``.
Invariants: ``trust_remote_code`` is never enabled; a model is loaded at most once per process for a
given (model, device, dtype) and shared by every caller; every forward pass holds ``LoadedModel.lock``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from kvviz.model.embedded import (
    LoadStep,
    Progress,
    ensure_embedded_cache,
    ensure_embedded_tokenizer,
    invalidate_unit,
    silence_transformers,
)
from kvviz.model.resolve import ModelSource, resolve_backend, resolve_device, resolve_dtype, resolve_model
from kvviz.model.settings import EMBEDDED_MODEL, EMBEDDED_PIP, ModelLoadError
from kvviz.settings import settings

if TYPE_CHECKING:  # types only: transformers is imported where a tokenizer is loaded
    from transformers import PreTrainedTokenizerBase

_TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


# ----------------------------------------------------------------------------- records


@dataclass(frozen=True)
class ModelInfo:
    """The facts the model card shows, read from the loaded model's config and parameters."""

    name: str
    source: str
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    d_model: int
    vocab_size: int
    num_params: int
    device: str
    dtype: str
    load_s: float
    model_id: str = EMBEDDED_MODEL
    architecture: str = ""
    max_position_embeddings: int | None = None
    element_size: int = 4
    from_cache: bool = True
    backend: str = "transformers"  # "native" (kvviz.model.llama) or "transformers"
    source_kind: str = ""  # ModelSource.kind: "embedded" | "folder" | "hub" (the view words it; ``source`` is English)
    source_where: str = ""  # the cache folder (embedded), the local folder, or the hub id

    @property
    def attention_kind(self) -> str:
        """MHA when every query head has its own K/V head, MQA with one, GQA in between."""
        if self.num_kv_heads == self.num_heads:
            return "MHA"
        return "MQA" if self.num_kv_heads == 1 else "GQA"

    @property
    def kv_bytes_per_token_config(self) -> int:
        """2 (K and V) x layers x KV heads x head_dim x bytes per value, from the config."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * self.element_size

    def as_dict(self) -> dict[str, Any]:
        """Plain-data view (for JSON), including the derived fields."""
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["attention_kind"] = self.attention_kind
        out["kv_bytes_per_token_config"] = self.kv_bytes_per_token_config
        return out


@dataclass
class LoadedModel:
    """A model ready for prefill. Hold ``lock`` around every forward pass (it is reentrant)."""

    model: torch.nn.Module  # the native Llama decoder or a transformers model
    tokenizer: PreTrainedTokenizerBase
    info: ModelInfo
    source: ModelSource
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    @property
    def device(self) -> torch.device:
        return torch.device(self.info.device)

    @property
    def torch_dtype(self) -> torch.dtype:
        return _TORCH_DTYPES[self.info.dtype]

    def new_cache(self, data: list[tuple[torch.Tensor, torch.Tensor]] | None = None) -> Any:
        """An empty KV cache for this model, or one holding per-layer (K, V) ``[1, kv_heads, P, head_dim]``
        (used as given, never written to: the cache grows by concatenation into new tensors)."""
        if self.info.backend == "native":
            return self.model.new_cache(data)
        from transformers import DynamicCache

        return DynamicCache(data, config=self.model.config) if data else DynamicCache(config=self.model.config)


# ----------------------------------------------------------------------------- hub and folder errors


def _explain_load_error(source: ModelSource, exc: Exception) -> ModelLoadError:
    """Turn a transformers / hub exception into one clear sentence naming the model and a remedy."""
    text = str(exc)
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    lowered = text.lower()
    if "trust_remote_code" in lowered or "custom code" in lowered:
        return ModelLoadError(
            f"model {source.display_name!r} needs custom code (trust_remote_code), which kvviz never runs: "
            "choose a model that transformers supports natively", "needs_remote_code", name=repr(source.display_name),
        )
    if "unrecognized configuration class" in lowered or "automodelforcausallm" in lowered:
        return ModelLoadError(f"model {source.display_name!r} is not a causal language model that transformers can load ({first})",
                              "not_causal_lm", name=repr(source.display_name), detail=first)
    if source.kind == "hub":
        offline = settings().hf_hub_offline
        not_found = any(s in lowered for s in ("couldn't connect", "cannot find the requested files",
                                                "not a local folder", "is not a valid model identifier",
                                                "offline mode", "couldn't find", "does not appear to have",
                                                "localentrynotfound", "not found in the cache"))
        if offline or not_found or isinstance(exc, OSError):
            mode = "the hub is offline (HF_HUB_OFFLINE=1)" if offline else "it could not be fetched from the hub"
            return ModelLoadError(
                f"model {source.key!r} is not in the local Hugging Face cache and {mode}: download it once with "
                f"`hf download {source.key}` on a machine with internet access, or pass a local model folder "
                f"(KVVIZ_MODEL=/path/to/folder, --model /path/to/folder)",
                "not_cached_offline" if offline else "not_cached_unreachable", key=repr(source.key),
                command=f"hf download {source.key}",
            )
    return ModelLoadError(f"could not load model {source.display_name!r}: {type(exc).__name__}: {first}", "load_failed",
                          name=repr(source.display_name), kind=type(exc).__name__, detail=first)


# ----------------------------------------------------------------------------- tokenizers


_TOKENIZERS: dict[str, PreTrainedTokenizerBase] = {}
_TOKENIZER_LOCK = threading.Lock()


def load_tokenizer(model_name: str | None = None) -> PreTrainedTokenizerBase:
    """The tokenizer for a model (cached per process); needs no weights."""
    source = resolve_model(model_name)
    with _TOKENIZER_LOCK:
        tok = _TOKENIZERS.get(source.key)
        if tok is not None:
            return tok
        for loaded in loaded_models():  # reuse a loaded model's tokenizer
            if loaded.source.key == source.key:
                _TOKENIZERS[source.key] = loaded.tokenizer
                return loaded.tokenizer
        tok = _load_tokenizer_uncached(source)
        _TOKENIZERS[source.key] = tok
        return tok


def _load_tokenizer_uncached(source: ModelSource) -> PreTrainedTokenizerBase:
    from transformers import AutoTokenizer

    silence_transformers()
    if source.kind == "embedded":
        folder = ensure_embedded_tokenizer()
        try:
            return AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
        except Exception:  # noqa: BLE001 - an intact manifest with an unloadable file: rebuild once
            invalidate_unit(folder)
            folder = ensure_embedded_tokenizer()
            return AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
    try:
        return AutoTokenizer.from_pretrained(source.location, trust_remote_code=False)
    except Exception as exc:  # noqa: BLE001
        raise _explain_load_error(source, exc) from exc



# ----------------------------------------------------------------------------- models


_MODELS: dict[tuple[str, str, str, str], LoadedModel] = {}
_MODEL_LOCKS: dict[tuple[str, str, str, str], threading.Lock] = {}
_MODELS_LOCK = threading.Lock()


def load_model(
    model_name: str | None = None,
    device: str | None = None,
    dtype: str | None = None,
    progress: Progress | None = None,
    backend: str | None = None,
) -> LoadedModel:
    """Load (once per process) and return a model ready for prefill.

    ``progress(step, fraction)`` is called at each stage (a ``LoadStep``); fraction goes from 0 to 1.
    Raises InputError for bad device/dtype/backend names and ModelLoadError when the model cannot be
    loaded.
    """
    report = progress or (lambda _m, _f: None)
    source = resolve_model(model_name)
    dev = resolve_device(device)
    dt = resolve_dtype(dev, dtype)
    be = resolve_backend(source, backend)
    key = (source.key, dev, dt, be)
    with _MODELS_LOCK:
        loaded = _MODELS.get(key)
        if loaded is not None:
            report(LoadStep("ready"), 1.0)
            return loaded
        key_lock = _MODEL_LOCKS.setdefault(key, threading.Lock())
    with key_lock:  # concurrent sessions wait for the one load
        loaded = _MODELS.get(key)
        if loaded is None:
            loaded = _load_uncached(source, dev, dt, be, report)
            with _MODELS_LOCK:
                _MODELS[key] = loaded
    report(LoadStep("ready"), 1.0)
    return loaded


def find_loaded_model(model_name: str | None = None, device: str | None = None,
                      dtype: str | None = None, backend: str | None = None) -> LoadedModel | None:
    """The model ``load_model`` would return, if it is already loaded in this process; else None."""
    source = resolve_model(model_name)
    dev = resolve_device(device)
    key = (source.key, dev, resolve_dtype(dev, dtype), resolve_backend(source, backend))
    with _MODELS_LOCK:
        return _MODELS.get(key)


def loaded_models() -> list[LoadedModel]:
    """Every model loaded in this process."""
    with _MODELS_LOCK:
        return list(_MODELS.values())


def clear_model_cache() -> None:
    """Forget every loaded model and tokenizer (tests; frees memory once callers drop references)."""
    with _MODELS_LOCK:
        _MODELS.clear()
        _MODEL_LOCKS.clear()
    with _TOKENIZER_LOCK:
        _TOKENIZERS.clear()


def _load_weights(model_location: str, tokenizer_location: str, torch_dtype: torch.dtype, device: str,
                  backend: str) -> tuple[Any, Any]:
    """(model, tokenizer) from a folder or hub id; the native backend loads straight onto ``device``."""
    from transformers import AutoTokenizer

    if backend == "native":
        from kvviz.model.llama import load_native_llama

        model: Any = load_native_llama(Path(model_location), torch_dtype, device)
    else:
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(model_location, dtype=torch_dtype, trust_remote_code=False)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_location, trust_remote_code=False)
    return model, tokenizer


def _load_uncached(source: ModelSource, device: str, dtype: str, backend: str, report: Progress) -> LoadedModel:
    silence_transformers()
    start = time.perf_counter()
    torch_dtype = _TORCH_DTYPES[dtype]
    report(LoadStep("locating", {"name": source.display_name}), 0.02)
    built = False
    if source.kind == "embedded":
        tok_dir, model_dir, built = ensure_embedded_cache(report)
        report(LoadStep("loading_cached"), 0.8)
        try:
            model, tokenizer = _load_weights(str(model_dir), str(tok_dir), torch_dtype, device, backend)
        except Exception:  # noqa: BLE001 - manifest intact but unloadable: rebuild once, then give up loudly
            invalidate_unit(model_dir)
            invalidate_unit(tok_dir)
            tok_dir, model_dir, built = ensure_embedded_cache(report)
            try:
                model, tokenizer = _load_weights(str(model_dir), str(tok_dir), torch_dtype, device, backend)
            except Exception as exc:  # noqa: BLE001
                raise ModelLoadError(f"the rebuilt cache in {model_dir.parent} does not load: {exc}", "rebuilt_cache_broken",
                                     folder=str(model_dir.parent), detail=str(exc)) from exc
        description = f"embedded GGUF Q4_1 ({EMBEDDED_PIP}), de-quantised to a safetensors copy in {model_dir.parent}"
    else:
        report(LoadStep("loading", {"name": source.display_name}), 0.3)
        try:
            model, tokenizer = _load_weights(source.location, source.location, torch_dtype, device, backend)
        except Exception as exc:  # noqa: BLE001
            raise _explain_load_error(source, exc) from exc
        description = f"local folder {source.location}" if source.kind == "folder" else f"Hugging Face hub id {source.key}"
    report(LoadStep("moving", {"device": device}), 0.92)
    try:
        model = model.to(device)
    except Exception as exc:  # noqa: BLE001
        raise ModelLoadError(f"could not move model {source.display_name!r} to {device}: {exc}", "move_failed",
                             name=repr(source.display_name), device=device, detail=str(exc)) from exc
    model.eval()
    model.requires_grad_(False)
    report(LoadStep("warming_up"), 0.96)
    _warm_up(model, device)
    info = _model_info(model, source, description, device, dtype, time.perf_counter() - start, not built, backend)
    where = str(model_dir.parent) if source.kind == "embedded" else source.location if source.kind == "folder" else source.key
    info = replace(info, source_kind=source.kind, source_where=where)
    return LoadedModel(model=model, tokenizer=tokenizer, info=info, source=source)


def _warm_up(model: torch.nn.Module, device: str) -> None:
    """One 2-token forward so lazy kernel set-up and weight page-in are part of loading, not of the
    first measured prefill."""
    try:
        with torch.inference_mode():
            model(input_ids=torch.zeros((1, 2), dtype=torch.long, device=device), use_cache=False, logits_to_keep=1)
    except Exception as exc:  # noqa: BLE001
        raise ModelLoadError(f"model {type(model).__name__} failed a test forward pass on {device}: {exc}", "warm_up_failed",
                             model=type(model).__name__, device=device, detail=str(exc)) from exc


def _model_info(model: torch.nn.Module, source: ModelSource, description: str, device: str, dtype: str,
                load_s: float, from_cache: bool, backend: str) -> ModelInfo:
    config = model.config.get_text_config(decoder=True) if hasattr(model.config, "get_text_config") else model.config
    num_heads = int(config.num_attention_heads)
    num_kv_heads = int(getattr(config, "num_key_value_heads", None) or num_heads)
    d_model = int(config.hidden_size)
    head_dim = int(getattr(config, "head_dim", None) or d_model // num_heads)
    architectures = getattr(model.config, "architectures", None) or [type(model).__name__]
    return ModelInfo(
        name=source.display_name,
        source=description,
        num_layers=int(config.num_hidden_layers),
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        head_dim=head_dim,
        d_model=d_model,
        vocab_size=int(config.vocab_size),
        num_params=sum(p.numel() for p in model.parameters()),
        device=device,
        dtype=dtype,
        load_s=round(load_s, 3),
        model_id=source.key,
        architecture=str(architectures[0]),
        max_position_embeddings=getattr(config, "max_position_embeddings", None),
        element_size=_TORCH_DTYPES[dtype].itemsize,
        from_cache=from_cache,
        backend=backend,
    )
