"""Token-slot allocators, not the mirror: they compare memory layouts (contiguous slabs vs blocks), with no hashes
or cache lookups. The two KV allocators of the paging experiment and the per-step split of memory into waste kinds.

``ContiguousAllocator`` places one first-fit slab per request; ``PagedAllocator`` hands out blocks from a
free queue with the shared prefix's full blocks stored once. Invariant: ``account_slots`` splits the
memory into ``WASTE_KINDS`` whose values always sum to ``memory_tokens``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from kvviz.analysis.paging.experiment import WASTE_KINDS, PagingConfig, Request, reservation_tokens


@dataclass(eq=False)
class Seq:
    """A request while it is served: ``length`` tokens are in the KV memory."""

    req: Request
    length: int = 0
    generated: int = 0
    admitted_at: int = -1


# ---------------------------------------------------------------- contiguous allocator


class ContiguousAllocator:
    """First-fit slabs in one linear address space [0, memory_tokens)."""

    def __init__(self, cfg: PagingConfig) -> None:
        self.cfg = cfg
        self.slabs: dict[int, tuple[int, int]] = {}  # rid -> (start, size)

    def need(self, seq: Seq) -> int:
        return reservation_tokens(seq.req, self.cfg)

    def _holes(self) -> list[tuple[int, int]]:
        holes, cursor = [], 0
        for start, size in sorted(self.slabs.values()):
            if start > cursor:
                holes.append((cursor, start - cursor))
            cursor = start + size
        if cursor < self.cfg.memory_tokens:
            holes.append((cursor, self.cfg.memory_tokens - cursor))
        return holes

    def free_slots(self) -> int:
        return self.cfg.memory_tokens - sum(size for _, size in self.slabs.values())

    def try_admit(self, seq: Seq) -> bool:
        need = self.need(seq)
        for start, size in self._holes():
            if size >= need:
                self.slabs[seq.req.rid] = (start, need)
                return True
        return False

    def grow(self, seq: Seq) -> bool:
        return True  # the slab was sized for the final length (or the maximum) up front

    def release(self, seq: Seq) -> None:
        del self.slabs[seq.req.rid]


# ---------------------------------------------------------------- paged allocator


class PagedAllocator:
    """A pool of blocks; a free queue (allocate from the head, freed blocks to the tail)."""

    def __init__(self, cfg: PagingConfig) -> None:
        self.cfg = cfg
        bs = cfg.block_size
        self.num_blocks = cfg.memory_tokens // bs
        self.free_queue: deque[int] = deque(range(self.num_blocks))
        self.shared_tokens = (cfg.shared_prefix // bs) * bs if cfg.share_prefix else 0
        self.shared_blocks: list[int] = []
        self.shared_ref = 0
        self.tables: dict[int, list[int]] = {}  # rid -> own blocks, in logical order

    def _own_blocks(self, length: int) -> int:
        return -(-(length - self.shared_tokens) // self.cfg.block_size)

    def _need_blocks(self, seq: Seq) -> int:
        length = max(seq.length, seq.req.prompt_len)
        extra = self.shared_tokens // self.cfg.block_size if self.shared_ref == 0 else 0
        return self._own_blocks(length) + extra

    def need(self, seq: Seq) -> int:
        return self._need_blocks(seq) * self.cfg.block_size

    def free_slots(self) -> int:
        return len(self.free_queue) * self.cfg.block_size

    def try_admit(self, seq: Seq) -> bool:
        if self._need_blocks(seq) > len(self.free_queue):
            return False
        if self.shared_tokens:
            if self.shared_ref == 0:
                n = self.shared_tokens // self.cfg.block_size
                self.shared_blocks = [self.free_queue.popleft() for _ in range(n)]
            self.shared_ref += 1
        length = max(seq.length, seq.req.prompt_len)
        self.tables[seq.req.rid] = [self.free_queue.popleft() for _ in range(self._own_blocks(length))]
        return True

    def grow(self, seq: Seq) -> bool:
        """Make room for token ``seq.length + 1``: a new block when the last one is full."""
        table = self.tables[seq.req.rid]
        if len(table) * self.cfg.block_size > seq.length - self.shared_tokens:
            return True
        if not self.free_queue:
            return False
        table.append(self.free_queue.popleft())
        return True

    def release(self, seq: Seq) -> None:
        # Tail blocks first, like vLLM, so a request's head blocks stay longest in the queue.
        for block in reversed(self.tables.pop(seq.req.rid)):
            self.free_queue.append(block)
        if self.shared_tokens:
            self.shared_ref -= 1
            if self.shared_ref == 0:
                self.free_queue.extend(reversed(self.shared_blocks))
                self.shared_blocks = []


# ---------------------------------------------------------------- accounting


def account_slots(
    layout: str, alloc: ContiguousAllocator | PagedAllocator, cfg: PagingConfig, running: list[Seq], waiting: deque[Seq]
) -> dict[str, int]:
    """Split the memory into WASTE_KINDS at this instant (the values sum to memory_tokens)."""
    slots = dict.fromkeys(WASTE_KINDS, 0)
    prefix = cfg.shared_prefix
    for i, seq in enumerate(running):
        copies = prefix if i > 0 else 0  # the oldest running request holds the "original" copy
        if layout == "contiguous":
            size = alloc.slabs[seq.req.rid][1]
            slots["duplicate"] += copies
            slots["stored"] += seq.length - copies
            slots["reserved"] += seq.req.final_len - seq.length
            slots["internal"] += size - seq.req.final_len
        else:
            own = seq.length - alloc.shared_tokens
            tail_copies = (prefix - alloc.shared_tokens) if i > 0 else 0
            slots["duplicate"] += tail_copies
            slots["stored"] += own - tail_copies
            slots["internal"] += len(alloc.tables[seq.req.rid]) * cfg.block_size - own
    if layout == "paged" and alloc.shared_ref > 0:
        slots["stored"] += alloc.shared_tokens
    free = alloc.free_slots()
    if waiting and free >= alloc.need(waiting[0]):
        slots["external"] = free  # enough in total, but not in one piece
    else:
        slots["free"] = free
    return slots


def utilisation_of(slots: dict[str, int], waiting: int) -> float:
    """Tokens stored / memory reserved (free slots count as reserved while a request waits)."""
    reserved = sum(slots.values()) - (slots["free"] if waiting == 0 else 0)
    return slots["stored"] / reserved if reserved else 0.0
