"""PagedAttention: the decoder layers' ``KVAttention`` (``kvviz.model.kv_cache``) over the engine's paged memory.

One is built per step from the scheduled sequences (their block tables), as nano-vllm builds its attention
context per step (nanovllm/utils/context.py) and vLLM 0.33.0 its attention metadata: every layer of the
model then calls ``attend``, which writes the step's new K/V into their slots (``PagedKVMemory.write``)
and attends each query to positions ``0..end-1`` of its own sequence, read through its block table. A
prefix hit is a block table pointing at blocks another request filled, in an earlier step or earlier in
this layer.

Decode tokens (one per request) attend in one batch: their block tables, padded with the null block,
select whole blocks once a layer into one buffer reused by every layer of the step (``index_select``, no
per-token gather), and each K/V head's group of query heads attends as the rows of one query; a lone
decode token with a consecutive table reads its blocks in place. A prefill chunk with nothing before it
attends to its own new K/V (the numbers just written); one after a past reads its blocks: as a view when
its block table is a run of consecutive ids (no copy), else selected.

On a CPU in fp32 every query of the step goes instead through one compiled kernel
(``kvviz.engine.kernels``, vLLM's CPU attention in spirit): it reads each sequence's K/V in place through its
block table, decode tokens and prefill chunks alike, in tiles of ``KERNEL_TILE`` positions per K/V head.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from kvviz.engine.kernels import applies as kernel_applies
from kvviz.engine.kernels import paged_attention_op
from kvviz.engine.kv_memory import PagedKVMemory

#: query positions of one sequence per work item of the compiled kernel (its rows: these x query heads per K/V head)
KERNEL_TILE = 64


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
    alone: _Past | None = None  # one decode token whose table is consecutive: read in place (no select)


@dataclass(frozen=True)
class _Past:
    """Where positions ``0..end-1`` of one sequence are: from flat slot ``first`` on when its block table is
    a run of consecutive block ids (read as a view, no copy), else in ``blocks`` (selected, a copy)."""

    end: int
    first: int | None
    blocks: torch.Tensor | None  # [ceil(end / bs)] block ids, when not consecutive


@dataclass(frozen=True)
class _Prefill:
    """One prefill chunk: rows ``row..row+n`` of the step, positions ``end-n..end-1`` of its sequence."""

    row: int
    n: int
    past: _Past | None  # None: no past, it attends to its own new K/V
    mask: torch.Tensor | None  # [n, end] bool when there is a past (query start+i sees keys 0..start+i)


class PagedAttention:
    """``KVAttention`` of one step over ``memory``: slots to write, decode batch, prefill chunks."""

    def __init__(self, memory: PagedKVMemory, seqs: list[SeqInput], heads: int, kv_heads: int,
                 head_dim: int) -> None:
        self.memory = memory
        self.device = memory.k[0].device
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.group = heads // kv_heads  # query heads per K/V head (repeat_interleave order)
        self.scale = head_dim ** -0.5
        self.gqa = heads != kv_heads
        self.kernel = (paged_attention_op() if kernel_applies(self.device, memory.k[0].dtype, head_dim,
                                                              memory.block_size) else None)
        if self.kernel is not None:
            self._plan_kernel(seqs)
        else:
            self._plan(seqs)

    def _plan_kernel(self, seqs: list[SeqInput]) -> None:
        """Slots to write, and the kernel's work: every sequence's block table (flat) and its query tiles
        (first row, positions, first position, where its table starts)."""
        bs, dev = self.memory.block_size, self.device
        slots: list[int] = []
        tables: list[int] = []
        items: list[tuple[int, int, int, int]] = []
        self._seq_rows: list[tuple[int, int, int]] = []  # (first row, first position, table offset) per sequence
        row = 0
        for s in seqs:
            n = len(s.token_ids)
            slots.extend(s.block_ids[p // bs] * bs + p % bs for p in range(s.start, s.end))
            offset = len(tables)
            tables.extend(s.block_ids[:-(-s.end // bs)])
            items.extend((row + i, min(KERNEL_TILE, n - i), s.start + i, offset) for i in range(0, n, KERNEL_TILE))
            self._seq_rows.append((row, s.start, offset))
            row += n
        self.slots = torch.tensor(slots, dtype=torch.long, device=dev)  # [T]
        self.tables = torch.tensor(tables, dtype=torch.long, device=dev)  # [sum of table lengths]
        self.items = torch.tensor(items, dtype=torch.long, device=dev)  # [tiles, 4]
        self.prefills, self.decode = [], None

    def _row_items(self, rows: list[int]) -> torch.Tensor:
        """The kernel's work for the query rows ``rows`` alone, each a tile of one position: ``[R, 4]``, row i of
        the kernel's queries being step row ``rows[i]``."""
        firsts = [first for first, _, _ in self._seq_rows]
        items = []
        for i, r in enumerate(rows):
            first, start, offset = self._seq_rows[bisect_right(firsts, r) - 1]
            items.append((i, 1, start + r - first, offset))
        return torch.tensor(items, dtype=torch.long, device=self.device)

    def _plan(self, seqs: list[SeqInput]) -> None:
        bs, dev = self.memory.block_size, self.device
        slots: list[int] = []
        decode_rows, decode_tables, decode_lens = [], [], []
        self.prefills: list[_Prefill] = []
        row = 0
        for s in seqs:
            n = len(s.token_ids)
            slots.extend(s.block_ids[p // bs] * bs + p % bs for p in range(s.start, s.end))
            table = s.block_ids[:-(-s.end // bs)]
            if n == 1:
                decode_rows.append(row)
                decode_tables.append(table)
                decode_lens.append(s.end)
            elif not s.start:
                self.prefills.append(_Prefill(row, n, None, None))
            else:
                mask = (torch.arange(s.end)[None, :] <= (s.start + torch.arange(n))[:, None]).to(dev)
                self.prefills.append(_Prefill(row, n, self._past(table, s.end), mask))
            row += n
        self.slots = torch.tensor(slots, dtype=torch.long, device=dev)  # [T] where each new token's K/V go
        self.decode = self._plan_decode(decode_rows, decode_tables, decode_lens, row) if decode_rows else None

    def _past(self, table: list[int], end: int) -> _Past:
        if table == list(range(table[0], table[0] + len(table))):
            return _Past(end, table[0] * self.memory.block_size, None)
        return _Past(end, None, torch.tensor(table, dtype=torch.long, device=self.device))

    def _read(self, layer: int, past: _Past) -> tuple[torch.Tensor, torch.Tensor]:
        """K and V of positions ``0..end-1`` ``[end, kv_heads, d]`` each: views of the blocks or selected copies."""
        k, v = self.memory.k[layer], self.memory.v[layer]  # [num_blocks, bs, kv_heads, d]
        if past.first is not None:
            flat = (-1, self.kv_heads, self.head_dim)
            return (k.view(flat)[past.first:past.first + past.end], v.view(flat)[past.first:past.first + past.end])
        return (k.index_select(0, past.blocks).view(-1, self.kv_heads, self.head_dim)[:past.end],
                v.index_select(0, past.blocks).view(-1, self.kv_heads, self.head_dim)[:past.end])

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
        if len(rows) == 1 and (past := self._past(tables[0], lens[0])).first is not None:
            return _Decode(None if in_order else torch.tensor(rows, device=dev), blocks, nblk, None,
                           blocks.new_empty(0), blocks.new_empty(0), past)
        return _Decode(None if in_order else torch.tensor(rows, device=dev), blocks, nblk, mask,
                       torch.empty(shape, dtype=mem.k[0].dtype, device=dev),
                       torch.empty(shape, dtype=mem.k[0].dtype, device=dev))

    def _attend_decode(self, layer: int, q: torch.Tensor, d: _Decode) -> torch.Tensor:
        """Decode queries ``[Rd, heads, head_dim]`` over their block tables -> ``[Rd, heads, head_dim]``."""
        if d.alone is not None:
            k, v = self._read(layer, d.alone)  # [end, kv_heads, d], views
            qg = q.reshape(1, self.kv_heads, self.group, self.head_dim)  # [1, kv_heads, G, d]
            o = F.scaled_dot_product_attention(qg, k.transpose(0, 1).unsqueeze(0), v.transpose(0, 1).unsqueeze(0),
                                               scale=self.scale)
            return o.reshape(1, self.heads, self.head_dim)
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

    def _attend_prefill(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                        p: _Prefill) -> torch.Tensor:
        """A chunk's queries ``[n, heads, d]`` (its new K/V ``k``, ``v`` ``[n, kv_heads, d]``) -> ``[n, heads, d]``."""
        if p.past is not None:  # a past: the whole sequence's K/V from its blocks
            k, v = self._read(layer, p.past)  # [end, kv_heads, d]
        o = F.scaled_dot_product_attention(q.transpose(0, 1).unsqueeze(0), k.transpose(0, 1).unsqueeze(0),
                                           v.transpose(0, 1).unsqueeze(0), attn_mask=p.mask,
                                           is_causal=p.mask is None, scale=self.scale, enable_gqa=self.gqa)
        return o[0].transpose(0, 1)  # [1, heads, n, d] -> [n, heads, d]

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               rows: torch.Tensor | None = None) -> torch.Tensor:
        """Write ``k``, ``v`` ``[T, kv_heads, d]`` into their slots, then ``q`` ``[T, heads, d]`` -> ``[T, heads, d]``,
        or ``[R, heads, d]`` of the query rows ``rows`` ``[R]`` only (the kernel computes no other row)."""
        self.memory.write(layer, self.slots, k, v)
        if self.kernel is not None:
            items = self.items if rows is None else self._row_items(rows.tolist())
            return self.kernel(q if rows is None else q[rows], self.memory.k[layer], self.memory.v[layer], self.tables,
                               items, self.scale)
        out = self._attend_all(layer, q, k, v)
        return out if rows is None else out[rows]

    def _attend_all(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Without the kernel: ``q`` ``[T, heads, d]`` -> ``[T, heads, d]`` (this step's K/V already written)."""
        d = self.decode
        if d is not None and d.rows is None and not self.prefills:  # a decode-only step: rows in order
            return self._attend_decode(layer, q, d)
        if d is None and len(self.prefills) == 1:  # one prefill chunk: all the rows
            return self._attend_prefill(layer, q, k, v, self.prefills[0])
        out = torch.empty_like(q)
        if d is not None:
            out[d.rows] = self._attend_decode(layer, q[d.rows], d)
        for p in self.prefills:
            rows = slice(p.row, p.row + p.n)
            out[rows] = self._attend_prefill(layer, q[rows], k[rows], v[rows], p)
        return out
