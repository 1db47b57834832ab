"""kvviz's compiled CPU kernels, built from source on this machine on first use (torch's C++ extension
loader, gcc), in one module: ``paged_attention`` (``paged_attention.cpp``), fp32 or bf16 attention that reads
each sequence's K/V in place from the engine's blocks through its block table, as vLLM's CPU attention does
(bf16 prefill tiles with AVX512-BF16 dot products where the CPU has them); and the decoder layer's SiLU-gated
product, RMSNorm and rotary (``layer_ops.cpp``).

Invariant: a kernel is used only where it applies (CPU, fp32 or bf16, head_dim 64 or 128, block size 16, 32 or 64)
and only once it built and loaded; otherwise ``paged_attention_op`` returns None and the engine uses torch's
SDPA (the same numbers to ~1e-6). ``KVVIZ_ATTENTION_KERNEL=0`` turns it off. Built once per source version
into torch's extensions folder (``TORCH_EXTENSIONS_DIR``), about a minute on two cores; ``make install``
builds it ahead (``python -m kvviz.engine.kernels``).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path

import torch

log = logging.getLogger("kvviz.engine")

HERE = Path(__file__).parent
# the attention kernel, the layer's element-wise ops and the few-row products of decode steps
SOURCES = (HERE / "paged_attention.cpp", HERE / "layer_ops.cpp", HERE / "gemv.cpp")
HEADERS = (HERE / "vec.h", HERE / "tiles.h")  # included: their digest is a build flag, so a change rebuilds
HEAD_DIMS = (64, 128)
BLOCK_SIZES = (16, 32, 64)

PagedAttentionOp = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, float],
                            torch.Tensor]

_lock = threading.Lock()
_state: dict[str, object] = {}  # "module": the loaded extension, or "error": why there is none


def applies(device: torch.device, dtype: torch.dtype, head_dim: int, block_size: int) -> bool:
    """Whether the compiled kernel computes this engine's attention (else SDPA does)."""
    return (device.type == "cpu" and dtype in (torch.float32, torch.bfloat16) and head_dim in HEAD_DIMS
            and block_size in BLOCK_SIZES)


def _build() -> object:
    from torch.utils.cpp_extension import is_ninja_available, load

    if not is_ninja_available():  # the Makefile puts the venv's bin (with the pinned ninja) on PATH
        raise RuntimeError("no ninja on PATH (the venv's bin has it: run through make, or activate the venv)")

    headers = hashlib.sha256(b"".join(h.read_bytes() for h in HEADERS)).hexdigest()[:16]
    module = load(name="kvviz_paged_attention", sources=[str(s) for s in SOURCES],
                  extra_cflags=["-O3", "-march=native", "-fopenmp", "-ffp-contract=fast", f"-DKVVIZ_HEADERS={headers}"],
                  extra_ldflags=["-fopenmp"], verbose=False)
    return module


def paged_attention_op() -> PagedAttentionOp | None:
    """The compiled kernel, built and loaded on the first call (None when turned off or it cannot build:
    no compiler, an unsupported CPU; the reason is logged once and kept in ``unavailable_reason``)."""
    from kvviz.settings import settings

    if not settings().attention_kernel:
        return None
    with _lock:
        if "module" not in _state and "error" not in _state:
            try:
                _state["module"] = _build()
            except Exception as exc:  # noqa: BLE001 - any build failure means: use SDPA
                _state["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
                log.warning("paged attention kernel unavailable, using torch SDPA (%s)", _state["error"])
        module = _state.get("module")
        return None if module is None else module.paged_attention  # type: ignore[attr-defined]


def compiled_op(name: str) -> Callable[..., torch.Tensor] | None:
    """Another op of the same extension (CPU, fp32 or bf16): ``silu_and_mul`` (``[T, 2I]`` -> ``[T, I]``),
    ``rms_norm`` (x, weight, eps), ``rms_norm_given`` (bf16 x, each row's fp32 inverse root mean square,
    weight), ``rotary`` (x, cos, signed sin); None as for ``paged_attention_op``."""
    if paged_attention_op() is None:
        return None
    return getattr(_state["module"], name)


def unavailable_reason() -> str | None:
    """Why the kernel is not in use (None when it is, or has not been asked for yet)."""
    return _state.get("error")  # type: ignore[return-value]

