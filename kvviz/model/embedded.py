"""The embedded model's cache: its GGUF de-quantised once into a safetensors model and a tokenizer folder.

Invariant: a cache unit is used only when its manifest says it is complete (``kvviz.model.cache``);
a missing or damaged unit is rebuilt from the GGUF, and ``trust_remote_code`` is never enabled.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from kvviz.model import cache as unit_cache
from kvviz.model.resolve import embedded_gguf_path
from kvviz.model.settings import cache_dir


@dataclass(frozen=True)
class LoadStep:
    """A stage of loading, as a code and its params (the view words it: kvviz_app.shell.text.LOAD_STEPS)."""

    code: str
    params: dict[str, Any] = field(default_factory=dict)


Progress = Callable[[LoadStep, float], None]
"""``progress(step, fraction)``: called at each stage of a load; fraction goes from 0 to 1."""

_TOKENIZER_FILES_REQUIRED = ("tokenizer_config.json",)
_MODEL_FILES_REQUIRED = ("config.json", "model.safetensors")


def _embedded_cache_root(gguf: Path) -> Path:
    """Cache folder for one GGUF file (keyed by its name and size, so an upgrade gets a new folder)."""
    stem = gguf.name.removesuffix(".gguf").lower().replace(".", "-")
    return cache_dir() / f"{stem}-{gguf.stat().st_size}"


def embedded_cache_paths() -> tuple[Path, Path]:
    """(tokenizer folder, model folder) of the embedded model's cache."""
    root = _embedded_cache_root(embedded_gguf_path())
    return root / "tokenizer", root / "model"


def silence_transformers() -> None:
    """Quiet transformers' logging and progress bars (kvviz reports its own progress)."""
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
        config = folder_config(model.config.to_dict())
        (tmp / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        del model, state
        return {"source": str(gguf), "kind": "model", "dequantised_from": "Q4_1"}

    return build


def folder_config(config: dict[str, Any]) -> dict[str, Any]:
    """The model folder's config.json from the loaded model's: fp32, no GGUF quantisation entry, and
    ``architectures`` named (a GGUF load leaves it null; vLLM picks its model class from it)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    out = {k: v for k, v in config.items() if k not in ("quantization_config", "_model_name_or_path")}
    out["dtype"] = "float32"
    if not out.get("architectures"):
        name = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(str(out.get("model_type")))
        out["architectures"] = [name] if name else None
    return out


def repair_model_config(folder: Path) -> bool:
    """Name the architecture of a model folder written before ``folder_config`` did (in place, under the
    build lock, manifest rewritten, so the unit stays valid and is not rebuilt); True if it changed."""
    path = folder / "config.json"

    def named() -> bool:
        try:
            return bool(json.loads(path.read_text(encoding="utf-8")).get("architectures"))
        except (OSError, ValueError, AttributeError):
            return True  # unreadable: the unit check rebuilds it, nothing to repair here
    if named():
        return False
    with unit_cache.build_lock(folder.parent):
        if named():  # another process repaired it while we waited
            return False
        config = folder_config(json.loads(path.read_text(encoding="utf-8")))
        if not config.get("architectures"):
            return False
        manifest = json.loads((folder / unit_cache.MANIFEST).read_text(encoding="utf-8"))
        tmp = folder.parent / f".{folder.name}-config.json.part"
        tmp.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)
        unit_cache.write_manifest(folder, {k: v for k, v in manifest.items() if k not in ("format", "files", "created")})
    return True


def ensure_embedded_cache(progress: Progress | None = None) -> tuple[Path, Path, bool]:
    """Build the embedded tokenizer and model cache if missing or damaged; (tok dir, model dir, built)."""
    gguf = embedded_gguf_path()
    tok_dir, model_dir = embedded_cache_paths()
    silence_transformers()
    report = progress or (lambda _m, _f: None)
    built_tok = unit_cache.ensure_unit(
        tok_dir, _build_tokenizer_unit(gguf), _TOKENIZER_FILES_REQUIRED,
        on_rebuild=lambda why: report(LoadStep("reading_tokenizer", {"why": why}), 0.05),
    )
    built_model = unit_cache.ensure_unit(
        model_dir, _build_model_unit(gguf, report), _MODEL_FILES_REQUIRED,
        on_rebuild=lambda why: report(LoadStep("first_run", {"why": why}), 0.12),
    )
    repair_model_config(model_dir)
    return tok_dir, model_dir, built_tok or built_model


def ensure_embedded_tokenizer() -> Path:
    """Build only the embedded tokenizer cache if needed; its folder."""
    gguf = embedded_gguf_path()
    tok_dir, _ = embedded_cache_paths()
    silence_transformers()
    unit_cache.ensure_unit(tok_dir, _build_tokenizer_unit(gguf), _TOKENIZER_FILES_REQUIRED)
    return tok_dir


def invalidate_unit(folder: Path) -> None:
    """Mark a cache unit as damaged so the next ensure rebuilds it."""
    with contextlib.suppress(OSError):
        (folder / unit_cache.MANIFEST).unlink()
