"""The layout of a packed forward pass: several requests' new tokens in one sequence, each attending over
its own cached prefix and its own new tokens, with one attention call per layer for all of them.

Per layer, every request's K (and V) is written once into one buffer (heads outermost, then tokens):
request i's cached prefix, then its new tokens (``offsets``, ``lengths``); each request's cache then
holds a view of its own tokens. Attention runs once for the whole batch: the requests' queries and keys
are laid out as a padded batch (``[requests, heads, longest new, longest total, head_dim]``, gathered
from the packed tensors, or plain views when every request has the same shape) with a mask that lets
query j of request i see its keys 0..past_i+j and nothing else. When padding would more than double the attention work (one long
prompt among short ones), attention runs per request over the same buffers instead.

Invariants: no request sees another's keys (the mask is block diagonal); a request's result is its
unbatched result up to fp32 rounding (tests compare both); tensors that were in a cache before the pass
are only read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

#: Padded attention may compute at most this many times the real (query, key) pairs, else per request.
MAX_PADDING_FACTOR = 2.0


@dataclass(frozen=True)
class Padded:
    """Index tensors of one padded attention call (None: every request has the same shape, plain views)."""

    rows: int  # requests
    queries: int  # longest new-token count
    keys: int  # longest prefix + new
    q_index: torch.Tensor | None  # [rows * queries] packed token of each padded query (padding: 0)
    kv_index: torch.Tensor | None  # [rows * keys] buffer token of each padded key (padding: 0)
    unpad: torch.Tensor | None  # [tokens] padded query row of each packed token
    mask: torch.Tensor | None  # additive, [rows or 1, 1, queries, keys]; None: plain causal (no prefix)


@dataclass(frozen=True)
class PackPlan:
    """One packed pass: request i's new tokens are packed tokens ``starts[i]:starts[i] + news[i]`` at
    positions ``pasts[i]..``; its K/V are tokens ``offsets[i]:offsets[i] + pasts[i] + news[i]`` of each
    layer's buffer. ``padded`` is None when attention runs per request (``masks`` then). A request in
    ``loans`` holds no prefix yet: its first ``tokens`` positions are its lender's, in this same pass
    (the lender's cached prefix and new K/V of each layer, copied into the borrower's rows)."""

    pasts: tuple[int, ...]
    news: tuple[int, ...]
    starts: tuple[int, ...]
    offsets: tuple[int, ...]
    padded: Padded | None
    masks: tuple[torch.Tensor | None, ...]
    loans: dict[int, tuple[int, int]] = field(default_factory=dict)  # borrower -> (lender, tokens)

    @property
    def lengths(self) -> tuple[int, ...]:
        return tuple(p + n for p, n in zip(self.pasts, self.news, strict=True))


def _allowed(past: int, n: int, keys: int, device: torch.device) -> torch.Tensor:
    """[n, keys] bool: query j (position past + j) sees keys 0..past + j."""
    return torch.arange(keys, device=device)[None, :] <= torch.arange(past, past + n, device=device)[:, None]


def causal_mask(past: int, n: int, device: torch.device) -> torch.Tensor | None:
    """``n`` new queries after ``past`` cached positions: [n, past + n] bool, query past+i sees keys
    0..past+i. With no past, SDPA's is_causal is that mask (None here); with a past, its top-left
    alignment is not, so the mask is given explicitly; one query sees everything (None)."""
    return _allowed(past, n, past + n, device) if past and n > 1 else None


def _additive(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill_(~allowed, float("-inf"))


def _request_mask(past: int, n: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor | None:
    """``causal_mask`` as an additive mask (0 / -inf) in ``dtype``, built once a pass for every layer."""
    mask = causal_mask(past, n, device)
    return None if mask is None else _additive(mask, dtype)


def plan_pass(pasts: list[int], news: list[int], device: torch.device, dtype: torch.dtype,
              max_padding: float | None = None, loans: dict[int, tuple[int, int]] | None = None) -> PackPlan:
    """The layout of a pass over requests with these cached and new token counts (each new count >= 1);
    ``max_padding`` defaults to ``MAX_PADDING_FACTOR`` (read at call time)."""
    max_padding = MAX_PADDING_FACTOR if max_padding is None else max_padding
    starts, offsets, s, o = [], [], 0, 0
    for p, n in zip(pasts, news, strict=True):
        starts.append(s)
        offsets.append(o)
        s += n
        o += p + n
    lengths = [p + n for p, n in zip(pasts, news, strict=True)]
    rows, nq, nk = len(news), max(news), max(lengths)
    real = sum(n * ln for n, ln in zip(news, lengths, strict=True))
    masks: tuple[torch.Tensor | None, ...] = ()
    padded: Padded | None = None
    if len(set(zip(pasts, news, strict=True))) == 1:
        p, n = pasts[0], news[0]
        mask = _request_mask(p, n, device, dtype)
        padded = Padded(rows, n, p + n, None, None, None, None if mask is None else mask[None, None])
    elif rows * nq * nk <= max_padding * real:
        padded = _padded(pasts, news, starts, offsets, nq, nk, device, dtype)
    else:
        masks = tuple(_request_mask(p, n, device, dtype) for p, n in zip(pasts, news, strict=True))
    return PackPlan(tuple(pasts), tuple(news), tuple(starts), tuple(offsets), padded, masks, dict(loans or {}))


def _padded(pasts: list[int], news: list[int], starts: list[int], offsets: list[int], nq: int, nk: int,
            device: torch.device, dtype: torch.dtype) -> Padded:
    rows = len(news)
    q_index = torch.zeros(rows, nq, dtype=torch.long)
    kv_index = torch.zeros(rows, nk, dtype=torch.long)
    allowed = torch.zeros(rows, nq, nk, dtype=torch.bool)
    unpad = []
    for i, (p, n, s, o) in enumerate(zip(pasts, news, starts, offsets, strict=True)):
        q_index[i, :n] = torch.arange(s, s + n)
        kv_index[i, : p + n] = torch.arange(o, o + p + n)
        allowed[i, :n] = _allowed(p, n, nk, torch.device("cpu"))
        allowed[i, n:, 0] = True  # padding queries see one key (no all -inf row); their output is dropped
        unpad.extend(range(i * nq, i * nq + n))
    mask = _additive(allowed.to(device), dtype)[:, None]
    return Padded(rows, nq, nk, q_index.view(-1).to(device), kv_index.view(-1).to(device),
                  torch.tensor(unpad, dtype=torch.long, device=device), mask)


def gather_kv(plan: PackPlan, caches: list, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """This layer's K/V buffers ``[kv_heads, rows, head_dim]`` (request by request: cached prefix, then
    the new ``k``/``v`` ``[1, kv_heads, tokens, head_dim]``); each cache layer then views its own rows.
    Heads outermost, so a cached prefix is copied in one run per head."""
    pieces_k, pieces_v = [], []
    for i, (layer_cache, s, n) in enumerate(zip(caches, plan.starts, plan.news, strict=True)):
        loan = plan.loans.get(i)
        if loan is not None:  # the lender's first positions of this layer: its cached prefix, then its new K/V
            j, tokens = loan
            lent, past = caches[j], plan.pasts[j]
            if past:
                pieces_k.append(lent.keys[0, :, : min(tokens, past)])
                pieces_v.append(lent.values[0, :, : min(tokens, past)])
            if tokens > past:
                pieces_k.append(k[0, :, plan.starts[j] : plan.starts[j] + tokens - past])
                pieces_v.append(v[0, :, plan.starts[j] : plan.starts[j] + tokens - past])
        elif layer_cache.keys is not None:
            pieces_k.append(layer_cache.keys[0])
            pieces_v.append(layer_cache.values[0])
        pieces_k.append(k[0, :, s : s + n])
        pieces_v.append(v[0, :, s : s + n])
    flat_k, flat_v = torch.cat(pieces_k, dim=1), torch.cat(pieces_v, dim=1)
    for layer_cache, o, length in zip(caches, plan.offsets, plan.lengths, strict=True):
        layer_cache.keys = flat_k[None, :, o : o + length]
        layer_cache.values = flat_v[None, :, o : o + length]
    return flat_k, flat_v


def attend(plan: PackPlan, q: torch.Tensor, flat_k: torch.Tensor, flat_v: torch.Tensor, caches: list,
           scale: float, gqa: bool) -> torch.Tensor:
    """softmax(q k^T * scale + mask) v for every request of the pass; q ``[1, heads, tokens, d]`` in, the
    output ``[heads, tokens, d]`` in packed order out."""
    heads, d = q.shape[1], q.shape[3]
    pad = plan.padded
    if pad is None:
        outs = []
        for layer_cache, s, n, mask in zip(caches, plan.starts, plan.news, plan.masks, strict=True):
            outs.append(F.scaled_dot_product_attention(
                q[:, :, s : s + n], layer_cache.keys, layer_cache.values, attn_mask=mask,
                is_causal=mask is None and n > 1, scale=scale, enable_gqa=gqa))
        return torch.cat(outs, dim=2)[0]
    kv_heads = flat_k.shape[0]
    if pad.q_index is None:  # one shape: views, no copies
        qb = q[0].view(heads, pad.rows, pad.queries, d).transpose(0, 1)
        kb = flat_k.view(kv_heads, pad.rows, pad.keys, d).transpose(0, 1)
        vb = flat_v.view(kv_heads, pad.rows, pad.keys, d).transpose(0, 1)
    else:
        qb = q[0].index_select(1, pad.q_index).view(heads, pad.rows, pad.queries, d).transpose(0, 1)
        kb = flat_k.index_select(1, pad.kv_index).view(kv_heads, pad.rows, pad.keys, d).transpose(0, 1)
        vb = flat_v.index_select(1, pad.kv_index).view(kv_heads, pad.rows, pad.keys, d).transpose(0, 1)
    causal = pad.mask is None and pad.queries > 1
    out = F.scaled_dot_product_attention(qb, kb, vb, attn_mask=pad.mask, is_causal=causal, scale=scale,
                                         enable_gqa=gqa)  # [rows, heads, queries, d]
    out = out.transpose(0, 1).reshape(heads, pad.rows * pad.queries, d)
    return out if pad.unpad is None else out.index_select(1, pad.unpad)


__all__ = ["MAX_PADDING_FACTOR", "PackPlan", "Padded", "attend", "causal_mask", "gather_kv", "plan_pass"]
