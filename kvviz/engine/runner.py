"""ModelRunner: one forward pass per step over the scheduled tokens of every request, with paged attention.

In each layer the new tokens' K/V are written into their slots first (``PagedKVMemory.write``), then each
request attends to positions ``0..end-1`` read through its block table: a prefix hit is simply a block
table pointing at blocks another request filled, in an earlier step or earlier in this layer. Decode
tokens (one per request) attend in one batch: their block tables, padded with the null block, select
whole blocks once a layer into one buffer reused by every layer of the step (``index_select``, no per-token
gather), and each K/V head's group of query heads attends as the rows of one query. Each prefill chunk
attends alone. The weights are the native Llama decoder's (``kvviz.model.llama``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from kvviz.engine.kv_memory import PagedKVMemory
from kvviz.engine.weights import StepWeights, packed_for


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
class _Decode:
    """The step's decode tokens: which rows, the blocks they read, the padding mask and reused buffers."""

    rows: torch.Tensor | None  # [Rd] token rows of the decode tokens (None: every row, in order)
    blocks: torch.Tensor  # [Rd * nblk] block ids, each table padded with the null block
    nblk: int
    mask: torch.Tensor | None  # [Rd, 1, 1, nblk * bs] additive (0 or -inf); None when nothing is padded
    k_buf: torch.Tensor  # [Rd * nblk, bs, kv_heads, d], refilled each layer
    v_buf: torch.Tensor


@dataclass
class _Plan:
    """Per-step index tensors shared by every layer."""

    slots: torch.Tensor  # [T] where each new token's K/V go
    decode: _Decode | None
    prefills: list[tuple[int, int, torch.Tensor, int, torch.Tensor | None]]  # (row, n, block ids, end, mask)


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
        self.group = self.heads // self.kv_heads  # query heads per K/V head (repeat_interleave order)
        self.scale = self.head_dim ** -0.5
        self.gqa = self.heads != self.kv_heads
        self._packed: StepWeights | None = None  # the weights of the last step (``_weights``)

    def _plan(self, seqs: list[SeqInput]) -> _Plan:
        bs, dev = self.memory.block_size, self.device
        slots: list[int] = []
        decode_rows, decode_tables, decode_lens, prefills = [], [], [], []
        row = 0
        for s in seqs:
            n = len(s.token_ids)
            slots.extend(s.block_ids[p // bs] * bs + p % bs for p in range(s.start, s.end))
            table = s.block_ids[:-(-s.end // bs)]
            if n == 1:
                decode_rows.append(row)
                decode_tables.append(table)
                decode_lens.append(s.end)
            else:
                mask = None
                if s.start:  # query start+i sees keys 0..start+i
                    mask = (torch.arange(s.end)[None, :] <= (s.start + torch.arange(n))[:, None]).to(dev)
                prefills.append((row, n, torch.tensor(table, dtype=torch.long, device=dev), s.end, mask))
            row += n
        decode = self._plan_decode(decode_rows, decode_tables, decode_lens, row) if decode_rows else None
        return _Plan(torch.tensor(slots, dtype=torch.long, device=dev), decode, prefills)

    def _plan_decode(self, rows: list[int], tables: list[list[int]], lens: list[int], num_rows: int) -> _Decode:
        bs, dev, mem = self.memory.block_size, self.device, self.memory
        nblk = max(len(t) for t in tables)
        blocks = torch.tensor([b for t in tables for b in (*t, *(0,) * (nblk - len(t)))], dtype=torch.long,
                              device=dev)  # the null block (0) pads the shorter tables
        mask = None
        if any(n != nblk * bs for n in lens):  # padded keys: masked out (-inf), never attended
            keep = torch.arange(nblk * bs)[None, :] < torch.tensor(lens)[:, None]  # [Rd, nblk * bs]
            mask = torch.zeros(keep.shape, dtype=mem.k[0].dtype).masked_fill_(~keep, float("-inf"))
            mask = mask[:, None, None, :].to(dev)
        shape = (len(rows) * nblk, bs, mem.layout.num_kv_heads, mem.layout.head_dim)
        in_order = rows == list(range(num_rows))
        return _Decode(None if in_order else torch.tensor(rows, device=dev), blocks, nblk, mask,
                       torch.empty(shape, dtype=mem.k[0].dtype, device=dev),
                       torch.empty(shape, dtype=mem.k[0].dtype, device=dev))

    def _attend_decode(self, layer: int, q: torch.Tensor, d: _Decode) -> torch.Tensor:
        """Decode queries ``[Rd, heads, head_dim]`` over their block tables -> ``[Rd, heads, head_dim]``."""
        rd = q.shape[0]
        torch.index_select(self.memory.k[layer], 0, d.blocks, out=d.k_buf)
        torch.index_select(self.memory.v[layer], 0, d.blocks, out=d.v_buf)
        length = d.nblk * self.memory.block_size
        k = d.k_buf.view(rd, length, self.kv_heads, self.head_dim).transpose(1, 2)  # [Rd, kv_heads, L, d]
        v = d.v_buf.view(rd, length, self.kv_heads, self.head_dim).transpose(1, 2)
        # the group of query heads of K/V head j (heads j*G .. j*G+G-1) are G query rows for that head
        qg = q.reshape(rd, self.kv_heads, self.group, self.head_dim)  # [Rd, kv_heads, G, d]
        o = F.scaled_dot_product_attention(qg, k, v, attn_mask=d.mask, scale=self.scale)
        return o.reshape(rd, self.heads, self.head_dim)

    def _attend(self, layer: int, q: torch.Tensor, plan: _Plan) -> torch.Tensor:
        """q ``[T, heads, head_dim]`` -> attention output ``[T, heads, head_dim]``."""
        d = plan.decode
        if d is not None and d.rows is None and not plan.prefills:  # a decode-only step: rows in order
            return self._attend_decode(layer, q, d)
        out = torch.empty_like(q)
        if d is not None:
            out[d.rows] = self._attend_decode(layer, q[d.rows], d)
        kv_heads, hd = self.kv_heads, self.head_dim
        for row, n, blocks, end, mask in plan.prefills:
            k = self.memory.k[layer].index_select(0, blocks).view(-1, kv_heads, hd)[:end]  # [end, kv_heads, d]
            v = self.memory.v[layer].index_select(0, blocks).view(-1, kv_heads, hd)[:end]
            qp = q[row:row + n].transpose(0, 1).unsqueeze(0)  # [1, heads, n, d]
            o = F.scaled_dot_product_attention(qp, k.transpose(0, 1).unsqueeze(0), v.transpose(0, 1).unsqueeze(0),
                                               attn_mask=mask, is_causal=mask is None, scale=self.scale,
                                               enable_gqa=self.gqa)
            out[row:row + n] = o[0].transpose(0, 1)
        return out

    def _weights(self) -> StepWeights:
        """The step's projection weights (the model's, shared by its engines), repacked when they changed."""
        self._packed = packed_for(self.model)
        return self._packed

    def _rope(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """Rotary positions on ``x`` ``[T, n, head_dim]`` with ``cos``/``sin`` ``[T, 1, head_dim]``."""
        half = self.head_dim // 2
        return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin

    @torch.inference_mode()
    def execute(self, seqs: list[SeqInput], all_logits: bool = False) -> torch.Tensor:
        """Compute the step; logits ``[R', vocab]`` of the last token of each sequence that wants them
        (``all_logits``: ``[T, vocab]`` of every scheduled token, for tests)."""
        dev = self.device
        ids = torch.tensor([t for s in seqs for t in s.token_ids], dtype=torch.long, device=dev)  # [T]
        positions = torch.tensor([p for s in seqs for p in range(s.start, s.end)], dtype=torch.long, device=dev)
        h, kvh, hd = self.heads, self.kv_heads, self.head_dim
        with self.lm.lock:
            weights = self._weights()
            plan = self._plan(seqs)
            x = self.body.embed_tokens(ids)  # [T, hidden]
            cos, sin = self.body.rotary_emb(positions, x.dtype)  # [T, d] each
            cos, sin = cos[:, None, :], sin[:, None, :]
            t = ids.shape[0]
            for i, layer in enumerate(self.body.layers):
                w = weights.layers[i]
                qkv = w.qkv(layer.input_layernorm(x))  # [T, (h + 2 kvh) * d]
                qk = self._rope(qkv[:, :(h + kvh) * hd].view(t, h + kvh, hd), cos, sin)  # [T, h + kvh, d]
                v = qkv[:, (h + kvh) * hd:].view(t, kvh, hd)
                self.memory.write(i, plan.slots, qk[:, h:], v)
                o = self._attend(i, qk[:, :h], plan)  # [T, heads, d]
                x = x + w.o(o.reshape(t, h * hd))
                gate_up = w.gate_up(layer.post_attention_layernorm(x))  # [T, 2 * intermediate]
                gate, up = gate_up.chunk(2, dim=-1)
                x = x + w.down(F.silu(gate) * up)
            if not all_logits:
                ends, row = [], 0
                for s in seqs:
                    row += len(s.token_ids)
                    if s.wants_logits:
                        ends.append(row - 1)
                if ends != list(range(t)):
                    x = x[torch.tensor(ends, dtype=torch.long, device=dev)]
            return weights.lm_head(self.body.norm(x))
