"""Prefill with KV capture on the model's own pass, and prefill that continues from the K/V of a prefix.

``prefill`` and ``prefill_continue`` run the model's own forward pass alone over its own cache (a
``CacheAttention`` over a ``KVCache``, or transformers' cache) under the model's lock (``LoadedModel.lock``,
which the engine's steps hold too). The pages prefill through ``kvviz.engine.prefill``, which reads the K/V
out of the engine's blocks when the engine serves the model and falls back to this pass otherwise; both
give the same ``PrefillResult`` (``kv_source`` says which ran). This module knows nothing of the engine.

Invariants: the captured K and V are the ones the model computed (one pair per layer, shaped
``[kv_heads, tokens, head_dim]``, detached, on the CPU, in the compute dtype, K after rotary);
``kv_bytes_measured`` is the sum of numel x element size over exactly those tensors; the caller's prefix
tensors are never modified.
"""

from __future__ import annotations

import inspect
import itertools
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from kvviz.model.loader import LoadedModel
from kvviz.model.settings import MAX_TOKENS_CEILING, InputError
from kvviz.model.tokens import Tokenized, token_pieces, tokenize, tokenize_ids

log = logging.getLogger("kvviz.model")

#: ``PrefillResult.kv_source``: read from the engine's blocks, or the model's own pass over its own cache.
KV_FROM_ENGINE, KV_FROM_MODEL = "engine", "model"


@dataclass
class PrefillResult:
    """What one prefill produced: tokens, every layer's K and V, the last logits, and measurements."""

    token_ids: list[int]
    pieces: list[str]
    keys: list[torch.Tensor]  # per layer [kv_heads, tokens, head_dim]
    values: list[torch.Tensor]
    last_logits: torch.Tensor  # [vocab], float32, CPU
    prefill_ms: float  # compute: the forward pass on the computed tokens
    kv_bytes_measured: int
    kv_bytes_per_token: float
    device: str
    dtype: str
    truncated: bool = False
    notice: str | None = None
    num_tokens_before_truncation: int = 0
    reused_tokens: int = 0  # tokens whose K/V came from a given prefix (prefill_continue)
    model_name: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    wait_ms: float = 0.0  # waiting for the model's lock before the pass
    pass_ms: float = 0.0  # the forward pass(es) (= prefill_ms)
    batch_size: int = 1  # the most requests in one of its passes (1 on the model's own pass)
    kv_source: str = KV_FROM_MODEL  # KV_FROM_ENGINE: read from the engine's blocks

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def computed_tokens(self) -> int:
        """Tokens that went through the model in this call."""
        return self.num_tokens - self.reused_tokens

    @property
    def num_layers(self) -> int:
        return len(self.keys)

    def summary(self) -> dict[str, Any]:
        """Plain-data measurements (no tensors), for JSON and tables."""
        return {
            "model": self.model_name,
            "device": self.device,
            "dtype": self.dtype,
            "num_tokens": self.num_tokens,
            "reused_tokens": self.reused_tokens,
            "computed_tokens": self.computed_tokens,
            "kv_bytes_measured": self.kv_bytes_measured,
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "prefill_ms": self.prefill_ms,
            "truncated": self.truncated,
            "notice": self.notice,
        }


def _cache_kwarg(model: torch.nn.Module) -> str:
    """Name of the forward argument that takes a cache (``cache`` in new transformers)."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


@dataclass(frozen=True)
class ForwardTiming:
    """How one prefill was served: ``compute_ms`` its pass (the model's own, alone under the model's lock; on
    the engine, first scheduled step to first token), ``wait_ms`` before it (that lock, or the engine's queue),
    ``pass_ms`` = compute_ms, ``batch_size`` the most requests in one of its passes, ``pass_id`` a
    process-wide counter."""

    compute_ms: float
    wait_ms: float
    pass_ms: float
    batch_size: int
    pass_id: int


def _one_pass(lm: LoadedModel, new_ids: list[int], cache: Any) -> tuple[Any, torch.Tensor]:
    """One request, one plain forward call (the model's own API); (cache, last logits on the CPU)."""
    input_ids = torch.tensor([new_ids], dtype=torch.long, device=lm.device)
    kwargs = {_cache_kwarg(lm.model): cache, "use_cache": True, "logits_to_keep": 1}
    out = lm.model(input_ids=input_ids, **kwargs)
    result_cache = getattr(out, "cache", None)
    if result_cache is None:
        result_cache = getattr(out, "past_key_values", None)
    if result_cache is None:
        raise RuntimeError("the model returned no KV cache")
    return result_cache, out.logits[0, -1].detach().float().cpu()


_PASSES = itertools.count(1)


def next_pass() -> int:
    """A new pass number (``ForwardTiming.pass_id``), unique in the process."""
    return next(_PASSES)


def forward_request(lm: LoadedModel, new_ids: list[int], cache: Any | None) -> tuple[Any, torch.Tensor, ForwardTiming]:
    """Run ``new_ids`` through the model after ``cache`` (None = empty) in one pass of its own, under the
    model's lock (so an engine step and this pass never overlap); (cache, last logits, timing)."""
    past = cache.get_seq_length() if cache is not None else 0
    max_pos = lm.info.max_position_embeddings
    if max_pos and past + len(new_ids) > max_pos:
        raise InputError(f"{past + len(new_ids):,} tokens exceed the model's {max_pos:,} positions")
    if not new_ids:
        raise InputError("at least one token must be computed", "no_tokens")
    if cache is None:
        cache = lm.new_cache()
    queued = time.perf_counter()
    with lm.lock, torch.inference_mode():
        _sync(lm.device)
        started = time.perf_counter()
        result_cache, logits = _one_pass(lm, list(new_ids), cache)
        _sync(lm.device)
        done = time.perf_counter()
    compute = round((done - started) * 1000.0, 3)
    return result_cache, logits, ForwardTiming(compute, round((started - queued) * 1000.0, 3), compute, 1,
                                               next_pass())


def _capture(cache: Any, num_layers: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Every layer's K and V from a KV cache (transformers' or the native one), as CPU tensors [kv_heads, tokens, head_dim]."""
    layers = getattr(cache, "layers", None)
    # new-style caches have .layers; legacy ones iterate as (key, value) pairs
    pairs = [(k, v) for k, v, *_ in cache] if layers is None else [(la.keys, la.values) for la in layers]
    if len(pairs) != num_layers or any(k is None or v is None or k.dim() != 4 for k, v in pairs):
        raise InputError(
            "this model does not keep per-token K/V in every layer (hybrid, linear-attention or MLA "
            "layers); kvviz captures K/V only for standard attention models"
        )
    keys = [k[0].detach().to("cpu", copy=True) for k, _ in pairs]
    values = [v[0].detach().to("cpu", copy=True) for _, v in pairs]
    return keys, values


def kv_bytes(keys: list[torch.Tensor], values: list[torch.Tensor]) -> int:
    """Bytes held by the given K and V tensors: sum of numel x element size."""
    return sum(t.numel() * t.element_size() for t in (*keys, *values))


def result_from(lm: LoadedModel, tok: Tokenized, keys: list[torch.Tensor], values: list[torch.Tensor],
            logits: torch.Tensor, timing: ForwardTiming, reused: int, source: str = KV_FROM_MODEL) -> PrefillResult:
    measured = kv_bytes(keys, values)
    n = len(tok.ids)
    return PrefillResult(
        token_ids=list(tok.ids),
        pieces=list(tok.pieces),
        keys=keys,
        values=values,
        last_logits=logits,
        prefill_ms=timing.compute_ms,
        kv_bytes_measured=measured,
        kv_bytes_per_token=measured / n,
        device=lm.info.device,
        dtype=str(keys[0].dtype).removeprefix("torch.") if keys else lm.info.dtype,
        truncated=tok.truncated,
        notice=tok.notice,
        num_tokens_before_truncation=tok.num_tokens_before_truncation,
        reused_tokens=reused,
        model_name=lm.info.name,
        wait_ms=timing.wait_ms,
        pass_ms=timing.pass_ms,
        batch_size=timing.batch_size,
        kv_source=source,
    )


def tokens_for(lm: LoadedModel, text: str | None, token_ids: list[int] | None, max_tokens: int | None) -> Tokenized:
    """The prompt as ``lm``'s tokens (exactly one of ``text``, ``token_ids``), cut to ``max_tokens`` with a notice."""
    if (text is None) == (token_ids is None):
        raise InputError("give exactly one of text or token_ids")
    name = lm.source.key
    if text is not None:
        return tokenize(text, model_name=name, max_tokens=max_tokens)
    return tokenize_ids(token_ids, model_name=name, max_tokens=max_tokens)


def prefill(lm: LoadedModel, text: str | None = None, token_ids: list[int] | None = None,
            max_tokens: int | None = None) -> PrefillResult:
    """Run the whole prompt through the model's own pass over its own cache and capture every layer's K and V.
    Text longer than ``max_tokens`` (default 2,048) keeps its first tokens and carries a notice. (The pages
    prefill through ``kvviz.engine.prefill.prefill``, which runs on the engine when it serves ``lm``.)"""
    tok = tokens_for(lm, text, token_ids, max_tokens)
    cache, logits, timing = forward_request(lm, tok.ids, None)
    keys, values = _capture(cache, lm.info.num_layers)
    return result_from(lm, tok, keys, values, logits, timing, reused=0)


def _check_prefix(lm: LoadedModel, keys: list[torch.Tensor], values: list[torch.Tensor]) -> int:
    """Validate prefix K/V against the model; return the prefix length P."""
    info = lm.info
    if not isinstance(keys, (list, tuple)) or not isinstance(values, (list, tuple)):
        raise InputError("prefix_keys and prefix_values must be lists of tensors, one per layer")
    if len(keys) != info.num_layers or len(values) != info.num_layers:
        raise InputError(f"prefix K/V must have one tensor per layer ({info.num_layers}), got {len(keys)} and {len(values)}")
    lengths = set()
    for i, (k, v) in enumerate(zip(keys, values, strict=True)):
        if not isinstance(k, torch.Tensor) or not isinstance(v, torch.Tensor):
            raise InputError(f"prefix K/V of layer {i} are not tensors")
        if k.dim() != 3 or k.shape != v.shape or k.shape[0] != info.num_kv_heads or k.shape[2] != info.head_dim:
            raise InputError(
                f"prefix K/V of layer {i} have shapes {tuple(k.shape)} / {tuple(v.shape)}, expected "
                f"[{info.num_kv_heads}, P, {info.head_dim}]"
            )
        lengths.add(int(k.shape[1]))
    if len(lengths) != 1:
        raise InputError(f"prefix K/V layers disagree on the prefix length: {sorted(lengths)}")
    return lengths.pop()


def prefill_continue(lm: LoadedModel, prefix_keys: list[torch.Tensor], prefix_values: list[torch.Tensor],
                     token_ids: list[int]) -> PrefillResult:
    """Prefill ``token_ids[P:]`` on top of the given K/V for the first P positions (the model's own pass).

    The prefix K/V are used as they are, even if they came from a different prompt (that is how a
    wrong reuse is demonstrated). At least one token must be computed (P < len(token_ids)), as an
    engine always recomputes the last prompt token. ``prefill_ms`` times only the continuation; the
    returned K/V cover all tokens (prefix copy + new).
    """
    if not isinstance(token_ids, (list, tuple)):
        raise InputError("token_ids must be a list of integers")
    if len(token_ids) > MAX_TOKENS_CEILING:
        raise InputError(f"{len(token_ids):,} tokens exceed the ceiling of {MAX_TOKENS_CEILING:,}")
    tok = tokenize_ids(token_ids, model_name=lm.source.key, max_tokens=max(1, len(token_ids)))
    p = _check_prefix(lm, prefix_keys, prefix_values)
    if p >= len(tok.ids):
        raise InputError(
            f"the prefix covers {p} of {len(tok.ids)} tokens: at least the last token must be computed "
            "(give a shorter prefix or more tokens)"
        )
    if p == 0:
        cache = None
    else:
        device, dtype = lm.device, lm.torch_dtype
        # Fresh copies on the model's device: the cache grows by concatenation and must never
        # alias the caller's tensors.
        data = [
            (k.detach().to(device=device, dtype=dtype, copy=True).unsqueeze(0),
             v.detach().to(device=device, dtype=dtype, copy=True).unsqueeze(0))
            for k, v in zip(prefix_keys, prefix_values, strict=True)
        ]
        cache = lm.new_cache(data)
    out_cache, logits, timing = forward_request(lm, tok.ids[p:], cache)
    keys, values = _capture(out_cache, lm.info.num_layers)
    return result_from(lm, tok, keys, values, logits, timing, reused=p)


__all__ = ["KV_FROM_ENGINE", "KV_FROM_MODEL", "ForwardTiming", "PrefillResult", "forward_request", "kv_bytes",
           "next_pass", "prefill", "prefill_continue", "result_from", "token_pieces", "tokens_for"]
