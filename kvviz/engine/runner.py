"""ModelRunner: one forward pass per step over the scheduled tokens of every request, with paged attention.

In each layer the new tokens' K/V are written into their slots first (``PagedKVMemory.write``), then each
request attends to positions ``0..end-1`` read through its block table: a prefix hit is simply a block
table pointing at blocks another request filled, in an earlier step or earlier in this layer. Decode
tokens (one per request) attend in one padded batch; each prefill chunk attends alone. The weights are
the native Llama decoder's (``kvviz.model.llama``); the layer math is its own modules'.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from kvviz.engine.kv_memory import PagedKVMemory, slots_for


@dataclass(frozen=True)
class SeqInput:
    """One request's part of a step: ``token_ids`` at positions ``start..``, its block ids (covering them)."""

    token_ids: list[int]
    start: int
    block_ids: list[int]
    wants_logits: bool

    @property
    def end(self) -> int:
        return self.start + len(self.token_ids)


@dataclass
class _Plan:
    """Per-step index tensors shared by every layer."""

    slots: torch.Tensor  # [T] where each new token's K/V go
    decode_rows: torch.Tensor | None  # [Rd] token indices of decode tokens
    decode_slots: torch.Tensor | None  # [Rd, Lmax] context slots (padded with the null block)
    decode_mask: torch.Tensor | None  # [Rd, 1, 1, Lmax] True = attend (None: no padding)
    prefills: list[tuple[int, int, torch.Tensor, torch.Tensor | None]]  # (row start, n, context slots, mask)


class ModelRunner:
    """Runs the native Llama layers of ``lm`` over a step's tokens against ``memory``."""

    def __init__(self, lm, memory: PagedKVMemory) -> None:
        self.lm = lm
        self.model = lm.model
        self.body = lm.model.model
        self.memory = memory
        self.device = memory.k[0].device
        cfg = lm.model.config
        self.heads, self.kv_heads, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        self.scale = self.head_dim ** -0.5
        self.gqa = self.heads != self.kv_heads

    def _plan(self, seqs: list[SeqInput]) -> _Plan:
        bs, dev = self.memory.block_size, self.device
        slots = torch.cat([slots_for(s.block_ids, s.start, s.end, bs) for s in seqs]).to(dev)
        row, decode_rows, decode_ctx, prefills = 0, [], [], []
        for s in seqs:
            n = len(s.token_ids)
            ctx = slots_for(s.block_ids, 0, s.end, bs)
            if n == 1:
                decode_rows.append(row)
                decode_ctx.append(ctx)
            else:
                mask = None
                if s.start:  # query start+i sees keys 0..start+i
                    mask = (torch.arange(s.end)[None, :] <= (s.start + torch.arange(n))[:, None]).to(dev)
                prefills.append((row, n, ctx.to(dev), mask))
            row += n
        d_rows = d_slots = d_mask = None
        if decode_rows:
            lmax = max(len(c) for c in decode_ctx)
            d_slots = torch.zeros((len(decode_ctx), lmax), dtype=torch.long)  # slot 0: the null block
            d_mask = torch.zeros((len(decode_ctx), 1, 1, lmax), dtype=torch.bool)
            for i, c in enumerate(decode_ctx):
                d_slots[i, : len(c)] = c
                d_mask[i, 0, 0, : len(c)] = True
            same = all(len(c) == lmax for c in decode_ctx)  # no padding: every key is attended, no mask
            d_rows, d_slots = torch.tensor(decode_rows).to(dev), d_slots.to(dev)
            d_mask = None if same else d_mask.to(dev)
        return _Plan(slots, d_rows, d_slots, d_mask, prefills)

    def _attend(self, layer: int, q: torch.Tensor, plan: _Plan) -> torch.Tensor:
        """q ``[T, heads, head_dim]`` -> attention output ``[T, heads, head_dim]``."""
        out = torch.empty_like(q)
        if plan.decode_rows is not None:
            k, v = self.memory.gather(layer, plan.decode_slots)  # [Rd, Lmax, kv_heads, d]
            qd = q[plan.decode_rows].unsqueeze(2)  # [Rd, heads, 1, d]
            o = F.scaled_dot_product_attention(qd, k.transpose(1, 2), v.transpose(1, 2), attn_mask=plan.decode_mask,
                                               scale=self.scale, enable_gqa=self.gqa)
            if not plan.prefills:  # a decode-only step: the rows are the tokens, in order
                return o.squeeze(2)
            out[plan.decode_rows] = o.squeeze(2)
        for row, n, ctx, mask in plan.prefills:
            k, v = self.memory.gather(layer, ctx)  # [L, kv_heads, d]
            qp = q[row:row + n].transpose(0, 1).unsqueeze(0)  # [1, heads, n, d]
            o = F.scaled_dot_product_attention(qp, k.transpose(0, 1).unsqueeze(0), v.transpose(0, 1).unsqueeze(0),
                                               attn_mask=mask, is_causal=mask is None, scale=self.scale,
                                               enable_gqa=self.gqa)
            out[row:row + n] = o[0].transpose(0, 1)
        return out

    @torch.inference_mode()
    def execute(self, seqs: list[SeqInput], all_logits: bool = False) -> torch.Tensor:
        """Compute the step; logits ``[R', vocab]`` of the last token of each sequence that wants them
        (``all_logits``: ``[T, vocab]`` of every scheduled token, for tests)."""
        dev = self.device
        ids = torch.tensor([t for s in seqs for t in s.token_ids], dtype=torch.long, device=dev)  # [T]
        positions = torch.cat([torch.arange(s.start, s.end) for s in seqs]).to(dev)  # [T]
        with self.lm.lock:
            plan = self._plan(seqs)
            x = self.body.embed_tokens(ids)[None]  # [1, T, hidden]
            cos, sin = self.body.rotary_emb(positions, x.dtype)
            t = ids.shape[0]
            for i, layer in enumerate(self.body.layers):
                attn = layer.self_attn
                q, k, v = attn._qkv(layer.input_layernorm(x), cos, sin)  # [1, h, T, d], [1, kvh, T, d] x2
                self.memory.write(i, plan.slots, k[0].transpose(0, 1), v[0].transpose(0, 1))
                o = self._attend(i, q[0].transpose(0, 1), plan)  # [T, heads, d]
                x = x + attn.o_proj(o.reshape(1, t, self.heads * self.head_dim))
                x = x + layer.mlp(layer.post_attention_layernorm(x))
            if not all_logits:
                ends, row = [], 0
                for s in seqs:
                    row += len(s.token_ids)
                    if s.wants_logits:
                        ends.append(row - 1)
                x = x[:, torch.tensor(ends, dtype=torch.long, device=dev)]
            return self.model.lm_head(self.body.norm(x))[0]
