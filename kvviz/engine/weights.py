"""StepWeights: the decoder's projection weights as the engine's forward pass multiplies them.

On a CPU with oneDNN each projection (fused Q/K/V, O, fused gate/up, down, the LM head) is packed once
into oneDNN's blocked layout for its matrix products (``torch.ops.mkldnn._reorder_linear_weight``, as
inductor's weight prepacking does): the same products as ``F.linear`` on the model's weights to about
1e-6 relative, 1.7x faster for one token and about 3x for 16 or 1,024 rows than MKL's sgemm on these
CPUs. A single row (a decode step of one sequence, the LM head after one prefill) goes through the
compiled one-pass product over the model's own weight instead (``kernels/gemv.cpp``): such a step only
has to read each weight once, and that pass reads it about a quarter faster than oneDNN's GEMV. Elsewhere
(CUDA, other dtypes) the model's own weights are used as they are.

Invariant: a packed weight is a copy of the model's weight at packing time; ``current`` says whether every
source weight is still the same tensor, unmodified (identity and version counter), and the runner
repacks when it is not. Packing costs a second copy of the weights in memory (about 540 MB in fp32 for
SmolLM2-135M), once per model: every engine over the same model shares it (``packed_for``).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from kvviz.engine.kernels import compiled_op
from kvviz.model.llama import RMSNorm, apply_rotary, own_norm, silu_and_mul

#: rows the packed layout is tuned for (oneDNN's batch-size hint; any number of rows works)
PACK_HINT_ROWS = 16


def can_pack(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether oneDNN packing applies: CPU, oneDNN built in, fp32 or bf16."""
    return (device.type == "cpu" and torch.backends.mkldnn.is_available()
            and dtype in (torch.float32, torch.bfloat16))


OneRow = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (x [1, in], W [out, in]) -> [1, out]


class Proj:
    """One projection ``y = x W^T`` (``W`` ``[out, in]``, the model's own tensor where it can be: no copy):
    one row through ``one_row`` (the compiled one-pass product, when given), more through W packed for
    oneDNN (when ``pack``), else ``F.linear``."""

    def __init__(self, weight: torch.Tensor, pack: bool, one_row: OneRow | None = None) -> None:
        self.out_features = weight.shape[0]
        self.weight = weight.detach()
        self.packed = (torch.ops.mkldnn._reorder_linear_weight(self.weight, PACK_HINT_ROWS) if pack else None)
        self.one_row = one_row

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``[T, in]`` -> ``[T, out]``."""
        if self.one_row is not None and x.shape[0] == 1:
            return self.one_row(x, self.weight)
        if self.packed is not None:
            return torch.ops.mkldnn._linear_pointwise(x, self.packed, None, "none", [], "")
        return F.linear(x, self.weight)


@dataclass
class LayerWeights:
    """One decoder layer's projections: Q/K/V as one, O, gate/up as one, down; and the MLP's gated product."""

    qkv: Proj  # [T, hidden] -> [T, (heads + 2 kv_heads) * head_dim]
    o: Proj
    gate_up: Proj  # [T, hidden] -> [T, 2 * intermediate]
    down: Proj
    act: Callable[[torch.Tensor], torch.Tensor] = silu_and_mul  # [T, 2 * intermediate] -> [T, intermediate]
    norm: Callable[[torch.Tensor, RMSNorm], torch.Tensor] = own_norm  # [T, hidden] through an RMSNorm
    rotate: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor] = apply_rotary  # Q and K rotated


def _compiled_layer_ops(dtype: torch.dtype) -> dict[str, Callable]:
    """The compiled kernels' SiLU-gated product and rotary (fp32, bf16; rotary rounds as torch does, bit for
    bit) and RMSNorm for ``LayerWeights`` (none when unbuilt). In bf16 torch still sums each row's squares (the
    kernel's other summation order flipped bf16 roundings enough to part greedy tokens from transformers' away
    from a near tie) and the kernel does the rest in one pass: the module's numbers, bit for bit."""
    act, norm, rotary = compiled_op("silu_and_mul"), compiled_op("rms_norm"), compiled_op("rotary")
    given = compiled_op("rms_norm_given")
    if act is None or norm is None or rotary is None or given is None:
        return {}
    if dtype != torch.float32:
        return {"act": act, "norm": lambda x, module: given(x, _inv_rms(x, module.eps), module.weight),
                "rotate": rotary}
    return {"act": act, "norm": lambda x, module: norm(x, module.weight, module.eps), "rotate": rotary}


def _inv_rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    """``[T, D]`` -> ``[T]`` fp32: 1 / sqrt(mean(x^2) + eps) of each row, by RMSNorm's own ops (``kvviz.model.llama``)."""
    return x.to(torch.float32, copy=True).pow_(2).mean(-1).add_(eps).rsqrt_()


def _joined(fused, parts: list) -> torch.Tensor:
    """The parts' weights stacked by rows: the model's fused weight itself while it still applies (no copy),
    else a new tensor."""
    if fused is not None and fused.applies():
        return fused.weight
    return torch.cat([p.weight for p in parts])


def _watched(model) -> list[tuple[object, torch.Tensor, int]]:
    """(module, weight, version) of every projection and the LM head: what the packed copies are made of."""
    mods: list = []
    for layer in model.model.layers:
        a, m = layer.self_attn, layer.mlp
        mods += [a.q_proj, a.k_proj, a.v_proj, a.o_proj, m.gate_proj, m.up_proj, m.down_proj]
    return [(mod, mod.weight, mod.weight._version) for mod in (*mods, model.lm_head)]


class StepWeights:
    """Every layer's projections and the LM head of a native Llama ``model``, packed when ``can_pack``."""

    def __init__(self, model) -> None:
        first = model.lm_head.weight
        self.pack = can_pack(first.device, first.dtype)
        ops = _compiled_layer_ops(first.dtype) if self.pack else {}  # the kernels' one-pass ops (same CPU, fp32/bf16 cases)
        one_row = compiled_op("gemv") if self.pack else None
        self.layers: list[LayerWeights] = []
        with torch.no_grad():
            for layer in model.model.layers:
                a, m = layer.self_attn, layer.mlp
                qkv = _joined(a.qkv, [a.q_proj, a.k_proj, a.v_proj])  # [q + 2 kv, hidden]
                gate_up = _joined(m.gate_up, [m.gate_proj, m.up_proj])  # [2 * inter, hidden]
                projs = (Proj(w, self.pack, one_row) for w in (qkv, a.o_proj.weight, gate_up, m.down_proj.weight))
                self.layers.append(LayerWeights(*projs, **ops))
            self.lm_head = Proj(model.lm_head.weight, self.pack, one_row)
        self._watched = _watched(model)

    def current(self) -> bool:
        """True while every source weight is the tensor it was packed from, unmodified (no new tensor
        assigned, no in-place change: a view shares its base's version counter)."""
        return all(mod._parameters["weight"] is w and w._version == v for mod, w, v in self._watched)


_PACKED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> its StepWeights


def packed_for(model) -> StepWeights:
    """The model's packed weights, shared by every engine over it; packed again when a source weight changed.
    Callers hold the model's lock (``LoadedModel.lock``), so two engines never pack the same model at once."""
    weights = _PACKED.get(model)
    if weights is None or not weights.current():
        weights = _PACKED[model] = StepWeights(model)
    return weights
