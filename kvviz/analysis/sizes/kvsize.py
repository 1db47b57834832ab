"""What one model's KV cache is made of: KV dtypes (bytes per value) and the attention geometry
(``ModelShape``: layers, heads, KV heads, head size, layer kinds, sliding window, MLA).

The formula and the calculator's report are ``kvviz.analysis.sizes.kv_formula``, capacity and paging
``kvviz.analysis.sizes.kv_capacity``, number formatting ``kvviz.util.units``. Invariant: a ``ModelShape`` is
checked on construction (every count a positive int within the bounds below), so the formula trusts it;
bad input is one ``KVSizeError`` line.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from typing import Any

from kvviz.errors import CodedError


class KVSizeError(CodedError):
    """A user-facing error about a model description or a size request; its message is one line.

    ``code`` and ``params`` say the same for a view to word in its language (``code`` is "" for an
    error that has only its English line); the view's words are in kvviz_app.calculator.text_config.
    """


# ---------------------------------------------------------------------------------------------
# dtypes
# ---------------------------------------------------------------------------------------------

DTYPE_BYTES: dict[str, Fraction] = {
    "fp32": Fraction(4),
    "fp16": Fraction(2),
    "bf16": Fraction(2),
    "fp8": Fraction(1),
    "int8": Fraction(1),
    "int4": Fraction(1, 2),
}
"""Bytes per stored value for each KV-cache dtype kvviz knows (int4 packs two values per byte)."""

DTYPES: tuple[str, ...] = tuple(DTYPE_BYTES)

_DTYPE_ALIASES: dict[str, str] = {
    "float32": "fp32", "float": "fp32", "f32": "fp32", "torch.float32": "fp32",
    "float16": "fp16", "half": "fp16", "f16": "fp16", "torch.float16": "fp16",
    "bfloat16": "bf16", "torch.bfloat16": "bf16",
    "float8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8", "torch.float8_e4m3fn": "fp8", "torch.float8_e5m2": "fp8", "e4m3": "fp8",
    "uint8": "int8", "q8": "int8", "q8_0": "int8",
    "uint4": "int4", "q4": "int4", "q4_0": "int4", "nf4": "int4", "fp4": "int4",
}


def normalize_dtype(name: str) -> str:
    """The canonical dtype name (``fp16``...) for ``name`` or an alias (``bfloat16``, ``torch.float32``)."""
    key = str(name).strip().lower()
    key = _DTYPE_ALIASES.get(key, key)
    if key not in DTYPE_BYTES:
        raise KVSizeError(f"unknown dtype {name!r}; use one of {', '.join(DTYPES)}", "unknown_dtype",
                          name=repr(name), choices=", ".join(DTYPES))
    return key


def dtype_bytes(name: str) -> Fraction:
    """Bytes per value for a dtype name or alias: fp32 4, fp16/bf16 2, fp8/int8 1, int4 1/2."""
    return DTYPE_BYTES[normalize_dtype(name)]


# ---------------------------------------------------------------------------------------------
# Model shape
# ---------------------------------------------------------------------------------------------


class LayerKind(StrEnum):
    """What one decoder layer keeps per token."""

    FULL = "full_attention"
    """Full attention: K and V of every token."""
    SLIDING = "sliding_attention"
    """Sliding-window attention: K and V of at most the last ``window`` tokens."""
    STATE = "linear_attention"
    """No per-token KV (linear attention, Mamba, Gated DeltaNet): a fixed-size state instead."""


@dataclass(frozen=True)
class MLA:
    """Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2): one compressed latent per layer per token."""

    kv_lora_rank: int
    qk_rope_head_dim: int

    @property
    def latent_dim(self) -> int:
        """Values cached per layer per token: the compressed KV plus the shared RoPE key."""
        return self.kv_lora_rank + self.qk_rope_head_dim


# Upper bounds that separate real models from typos; far above any published model.
MAX_LAYERS = 10_000
MAX_HEADS = 65_536
MAX_HEAD_DIM = 65_536
MAX_D_MODEL = 10_000_000
MAX_WINDOW = 1 << 40
MAX_TOKENS = 10**12
MAX_BATCH = 10**9


def check_count(name: str, value: Any, *, low: int = 1, high: int) -> int:
    """``value`` as an int in ``[low, high]``, or a one-line KVSizeError naming ``name``."""
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise KVSizeError(f"{name} must be a whole number, got {value!r}", "not_whole", name=name, value=repr(value))
    if value < low:
        word = "positive" if low == 1 else f"at least {low}"
        code = "not_positive" if low == 1 else "too_small"
        raise KVSizeError(f"{name} must be {word}, got {value:,}", code, name=name, value=value, low=low)
    if value > high:
        raise KVSizeError(f"{name} = {value:,} is absurd (the limit is {high:,})", "absurd", name=name, value=value,
                          high=high)
    return value


@dataclass(frozen=True)
class ModelShape:
    """The attention geometry of one model, as the KV cache sees it.

    Invariants (checked on construction): every count is a positive int; ``num_kv_heads <= num_heads``
    unless the model is MLA; ``layer_kinds`` has one entry per layer; sliding layers need a window.
    ``d_model`` defaults to ``num_heads x head_dim``; ``layer_kinds`` defaults to all full attention.
    """

    name: str
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    d_model: int | None = None
    layer_kinds: tuple[LayerKind, ...] | None = None
    sliding_window: int | None = None
    mla: MLA | None = None
    notes: tuple[Any, ...] = field(default=(), compare=False)
    """What the config reader assumed (kvviz.analysis.sizes.hf_config.ConfigNote records, codes for the view)."""

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "num_layers", check_count("layers", self.num_layers, high=MAX_LAYERS))
        set_(self, "num_heads", check_count("heads", self.num_heads, high=MAX_HEADS))
        set_(self, "num_kv_heads", check_count("kv_heads", self.num_kv_heads, high=MAX_HEADS))
        set_(self, "head_dim", check_count("head_dim", self.head_dim, high=MAX_HEAD_DIM))
        if self.d_model is None:
            set_(self, "d_model", self.num_heads * self.head_dim)
        set_(self, "d_model", check_count("d_model", self.d_model, high=MAX_D_MODEL))
        if self.mla is None and self.num_kv_heads > self.num_heads:
            raise KVSizeError(
                f"kv_heads ({self.num_kv_heads}) cannot exceed heads ({self.num_heads}): "
                "each KV head serves at least one query head", "kv_exceeds_heads",
                kv_heads=self.num_kv_heads, heads=self.num_heads,
            )
        if self.mla is not None:
            check_count("kv_lora_rank", self.mla.kv_lora_rank, high=MAX_HEAD_DIM)
            check_count("qk_rope_head_dim", self.mla.qk_rope_head_dim, low=0, high=MAX_HEAD_DIM)
        kinds = self.layer_kinds
        if kinds is None:
            kinds = (LayerKind.FULL,) * self.num_layers
        try:
            kinds = tuple(LayerKind(k) for k in kinds)
        except ValueError as exc:
            raise KVSizeError(f"unknown layer kind: {exc}", "unknown_layer_kind", detail=str(exc)) from None
        if len(kinds) != self.num_layers:
            raise KVSizeError(f"layer kinds list has {len(kinds)} entries for {self.num_layers} layers",
                              "layer_kinds_length", entries=len(kinds), layers=self.num_layers)
        set_(self, "layer_kinds", kinds)
        if LayerKind.SLIDING in kinds:
            if self.sliding_window is None:
                raise KVSizeError("sliding-window layers need a window size (sliding_window)", "window_missing")
            set_(self, "sliding_window", check_count("sliding_window", self.sliding_window, high=MAX_WINDOW))
        elif self.sliding_window is not None:
            set_(self, "sliding_window", check_count("sliding_window", self.sliding_window, high=MAX_WINDOW))

    # -- what kind of attention ----------------------------------------------------------------

    @property
    def attention(self) -> str:
        """``MLA`` (latent cache), ``MHA`` (kv = heads), ``MQA`` (one KV head) or ``GQA`` (between)."""
        if self.mla is not None:
            return "MLA"
        if self.num_kv_heads == self.num_heads:
            return "MHA"
        if self.num_kv_heads == 1:
            return "MQA"
        return "GQA"

    @property
    def group_size(self) -> Fraction:
        """Query heads served by one KV head (all of them for MLA's single latent)."""
        if self.mla is not None:
            return Fraction(self.num_heads)
        return Fraction(self.num_heads, self.num_kv_heads)

    @property
    def warning_codes(self) -> tuple[tuple[str, dict[str, int]], ...]:
        """Suspicious but legal shapes as (code, params); reported beside the result, never fatal."""
        out: list[tuple[str, dict[str, int]]] = []
        if self.mla is None and self.num_heads % self.num_kv_heads:
            out.append(("uneven_groups", {"heads": self.num_heads, "kv_heads": self.num_kv_heads}))
        return tuple(out)

    @property
    def warnings(self) -> tuple[str, ...]:
        """``warning_codes`` in English, for the CLI and its JSON (the UI renders the codes itself)."""
        english = {"uneven_groups": "heads ({heads}) is not a multiple of kv_heads ({kv_heads}): query groups are "
                                    "uneven, which real GQA models avoid; the byte count does not depend on it"}
        return tuple(english[code].format(**params) for code, params in self.warning_codes)

    # -- layer counts --------------------------------------------------------------------------

    def count(self, kind: LayerKind) -> int:
        """How many layers are of ``kind``."""
        assert self.layer_kinds is not None
        return sum(1 for k in self.layer_kinds if k == kind)

    @property
    def num_full_layers(self) -> int:
        return self.count(LayerKind.FULL)

    @property
    def num_sliding_layers(self) -> int:
        return self.count(LayerKind.SLIDING)

    @property
    def num_state_layers(self) -> int:
        return self.count(LayerKind.STATE)

    @property
    def num_kv_layers(self) -> int:
        """Layers that keep per-token K/V (full and sliding attention)."""
        return self.num_full_layers + self.num_sliding_layers

    @property
    def is_hybrid(self) -> bool:
        """True when some layers keep no per-token KV or keep only a window."""
        return self.num_full_layers != self.num_layers

    @property
    def values_per_layer(self) -> int:
        """Values one KV layer stores per token: ``2 x kv_heads x head_dim``, or MLA's latent."""
        if self.mla is not None:
            return self.mla.latent_dim
        return 2 * self.num_kv_heads * self.head_dim

    @property
    def mha_equivalent_d_model(self) -> bool:
        """True when ``d_model == heads x head_dim``: only then is the short formula right for MHA."""
        return self.d_model == self.num_heads * self.head_dim


def shape_from_counts(
    name: str,
    layers: int,
    kv_heads: int,
    head_dim: int,
    heads: int | None = None,
    d_model: int | None = None,
    window: int | None = None,
    kv_lora_rank: int | None = None,
    qk_rope_head_dim: int | None = None,
) -> ModelShape:
    """A shape from typed numbers: heads default to kv_heads (MHA); ``window`` makes every layer sliding;
    ``kv_lora_rank`` (with ``qk_rope_head_dim``) makes it MLA."""
    layers = check_count("layers", layers, high=MAX_LAYERS)
    kv_heads = check_count("kv_heads", kv_heads, high=MAX_HEADS)
    head_dim = check_count("head_dim", head_dim, high=MAX_HEAD_DIM)
    mla = None
    if kv_lora_rank is not None:
        mla = MLA(
            check_count("kv_lora_rank", kv_lora_rank, high=MAX_HEAD_DIM),
            check_count("qk_rope_head_dim", qk_rope_head_dim or 0, low=0, high=MAX_HEAD_DIM),
        )
    kinds: Sequence[LayerKind] | None = None
    if window is not None:
        kinds = (LayerKind.SLIDING,) * layers
    return ModelShape(
        name=name,
        num_layers=layers,
        num_heads=heads if heads is not None else kv_heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        d_model=d_model,
        layer_kinds=tuple(kinds) if kinds else None,
        sliding_window=window,
        mla=mla,
    )
