"""Paged vs contiguous KV memory: one stream of requests, one fixed memory, two allocators.

Pure maths, no model. A seeded stream of requests (a shared system prompt, a prompt of random
length, an output of random length) is served by an iteration-level scheduler (FCFS, one decode
token per running request per step) over a KV memory of ``memory_tokens`` token slots, where one
slot holds one token's K and V for every layer.

* **Contiguous** (the pre-vLLM systems): every request gets one contiguous slab, placed first-fit in
  a linear address space, sized by a reservation policy (``max``: the model's maximum length,
  ``pow2``: the final length rounded up to a power of two, ``oracle``: exactly the final length).
  Waste: slots reserved for tokens not yet written, slots that will never be written (internal
  fragmentation), free holes too small for the next request although the free total would do
  (external fragmentation), and one private copy of the shared prefix per request.
* **Paged** (PagedAttention): fixed blocks of ``block_size`` slots from a pool, handed out one at a
  time as a sequence grows, with the full blocks of the shared prefix stored once (ref_cnt = number
  of holders). Waste is bounded by one partly filled block per request. When a growing request finds
  no free block, the most recently admitted request is preempted (its blocks freed, it goes back to
  the head of the queue and is recomputed later), as vLLM does.

Every step's memory is split into the categories of :data:`WASTE_KINDS`, which always sum to
``memory_tokens``. Utilisation is tokens stored / memory reserved, where memory reserved is every
allocated slot plus, while a request is waiting for memory, the free slots too (they are then
taken out of use, not idle).
"""

from __future__ import annotations

import math
import random
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

from kvviz.core.limits import MAX_BLOCK_SIZE, MIN_BLOCK_SIZE

LAYOUTS = ("contiguous", "paged")
RESERVATION_POLICIES = ("max", "pow2", "oracle")
RESERVATION_LABELS = {
    "max": "reserve the maximum length",
    "pow2": "reserve the final length rounded up to a power of two",
    "oracle": "reserve exactly the final length (knows the output length in advance)",
}

# The categories one token slot can be in at one step; they partition the memory.
WASTE_KINDS = ("stored", "duplicate", "reserved", "internal", "external", "free")
WASTE_LABELS = {
    "stored": "token states (useful)",
    "duplicate": "duplicate copies of the shared prefix",
    "reserved": "reserved for tokens not written yet",
    "internal": "internal fragmentation (never written)",
    "external": "external fragmentation (free, but no hole is big enough)",
    "free": "free",
}

# The PagedAttention paper's measurement of earlier systems (Kwon et al., SOSP 2023, figure 2).
PAPER_UTILISATION_BAND = (0.204, 0.382)
PAPER_SOURCE = (
    "Kwon et al., 'Efficient Memory Management for Large Language Model Serving with PagedAttention' "
    "(SOSP 2023): earlier systems kept 20.4%-38.2% of KV memory for actual token states"
)

# Bounds that keep one simulation well under a second and reject absurd input.
MAX_MEMORY_TOKENS = 1 << 20
MAX_REQUESTS = 2000
MAX_TOTAL_OUTPUT = 250_000


@dataclass(frozen=True)
class PagingConfig:
    """One experiment: the memory, the block size, and how the request stream is drawn."""

    memory_tokens: int = 8192
    block_size: int = 16
    num_requests: int = 40
    shared_prefix: int = 200
    prompt_min: int = 16
    prompt_max: int = 600
    output_min: int = 8
    output_max: int = 600
    max_model_len: int = 2048
    reservation: str = "max"
    share_prefix: bool = True
    seed: int = 0

    def validate(self) -> None:
        """Raise ValueError with a one-line message when the experiment makes no sense."""
        ints = {k: v for k, v in asdict(self).items() if k not in ("reservation", "share_prefix")}
        for name, value in ints.items():
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be an integer, got {value!r}")
        if self.reservation not in RESERVATION_POLICIES:
            raise ValueError(f"reservation must be one of {', '.join(RESERVATION_POLICIES)}")
        if not MIN_BLOCK_SIZE <= self.block_size <= MAX_BLOCK_SIZE:
            raise ValueError(f"block_size must be between {MIN_BLOCK_SIZE} and {MAX_BLOCK_SIZE} tokens")
        if not self.block_size <= self.memory_tokens <= MAX_MEMORY_TOKENS:
            raise ValueError(f"memory_tokens must be between block_size and {MAX_MEMORY_TOKENS:,}")
        if self.memory_tokens % self.block_size:
            raise ValueError("memory_tokens must be a multiple of block_size")
        if not 1 <= self.num_requests <= MAX_REQUESTS:
            raise ValueError(f"num_requests must be between 1 and {MAX_REQUESTS:,}")
        if self.shared_prefix < 0:
            raise ValueError("shared_prefix must be >= 0")
        if not 1 <= self.prompt_min <= self.prompt_max:
            raise ValueError("need 1 <= prompt_min <= prompt_max")
        if not 1 <= self.output_min <= self.output_max:
            raise ValueError("need 1 <= output_min <= output_max")
        longest = self.shared_prefix + self.prompt_max + self.output_max
        if longest > self.max_model_len:
            raise ValueError(
                f"shared_prefix + prompt_max + output_max = {longest:,} tokens exceeds "
                f"max_model_len = {self.max_model_len:,}"
            )
        if self.max_model_len > self.memory_tokens:
            raise ValueError(
                f"max_model_len = {self.max_model_len:,} does not fit in memory_tokens = {self.memory_tokens:,}"
            )
        if self.num_requests * self.output_max > MAX_TOTAL_OUTPUT:
            raise ValueError(
                f"num_requests x output_max must be at most {MAX_TOTAL_OUTPUT:,} tokens (keeps it interactive)"
            )


@dataclass(frozen=True)
class Request:
    """One request of the stream: its prompt (shared prefix included) and its true output length."""

    rid: int
    prompt_len: int
    output_len: int

    @property
    def final_len(self) -> int:
        return self.prompt_len + self.output_len


def make_requests(cfg: PagingConfig) -> list[Request]:
    """The seeded request stream: prompt = shared prefix + uniform[prompt_min, prompt_max] tokens."""
    rng = random.Random(cfg.seed)
    return [
        Request(
            rid=i,
            prompt_len=cfg.shared_prefix + rng.randint(cfg.prompt_min, cfg.prompt_max),
            output_len=rng.randint(cfg.output_min, cfg.output_max),
        )
        for i in range(cfg.num_requests)
    ]


def reservation_tokens(req: Request, cfg: PagingConfig) -> int:
    """Slab size a contiguous allocator reserves for ``req`` under ``cfg.reservation``."""
    if cfg.reservation == "max":
        return cfg.max_model_len
    if cfg.reservation == "pow2":
        return min(cfg.max_model_len, 1 << max(0, math.ceil(math.log2(req.final_len))))
    return req.final_len


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


def _account(
    layout: str, alloc: Any, cfg: PagingConfig, running: list[Seq], waiting: deque[Seq]
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


# ---------------------------------------------------------------- the simulation


@dataclass(frozen=True)
class StepRecord:
    """The state after one scheduler step."""

    step: int
    running: int
    waiting: int
    finished: int
    slots: dict[str, int]
    utilisation: float  # of the memory reserved at this step (one request's view; the page shows LayoutResult.utilisation)


@dataclass(frozen=True)
class Span:
    """A contiguous region of the linear address space at the snapshot step."""

    start: int
    length: int
    kind: str
    request: int | None


@dataclass(frozen=True)
class BlockCell:
    """One physical block of the paged pool at the snapshot step."""

    block_id: int
    kind: str  # "shared", "full", "partial", "free"
    used: int  # token slots written in this block
    ref_cnt: int
    request: int | None  # the owner of a private block; None for shared and free blocks


@dataclass(frozen=True)
class Snapshot:
    """Where every slot is at one step: spans (contiguous) or blocks (paged), plus block tables."""

    step: int
    spans: list[Span] = field(default_factory=list)
    blocks: list[BlockCell] = field(default_factory=list)
    block_tables: dict[int, list[int]] = field(default_factory=dict)
    lengths: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class LayoutResult:
    """One allocator's run over the whole request stream."""

    layout: str
    steps: int  # the step at which the last request finished (makespan)
    records: list[StepRecord]
    utilisation: float  # waste_share["stored"]: share of all KV memory holding token states (one definition)
    waste_share: dict[str, float]
    requests_fit_at_start: int
    max_running: int
    mean_running: float
    preemptions: int
    tokens_generated: int
    snapshot: Snapshot | None

    @property
    def throughput(self) -> float:
        """Output tokens per scheduler step."""
        return self.tokens_generated / self.steps if self.steps else 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "layout": self.layout,
            "utilisation": round(self.utilisation, 4),
            "waste_share": {k: round(v, 4) for k, v in self.waste_share.items()},
            "requests_fit_at_start": self.requests_fit_at_start,
            "max_running": self.max_running,
            "mean_running": round(self.mean_running, 2),
            "steps": self.steps,
            "preemptions": self.preemptions,
            "tokens_generated": self.tokens_generated,
            "tokens_per_step": round(self.throughput, 3),
        }


def _snapshot_contiguous(alloc: ContiguousAllocator, cfg: PagingConfig, step: int, running: list[Seq],
                         external: bool) -> Snapshot:
    spans: list[Span] = []
    order = {seq.req.rid: i for i, seq in enumerate(running)}
    by_rid = {seq.req.rid: seq for seq in running}
    cursor = 0
    hole_kind = "external" if external else "free"
    for rid, (start, size) in sorted(alloc.slabs.items(), key=lambda kv: kv[1][0]):
        if start > cursor:
            spans.append(Span(cursor, start - cursor, hole_kind, None))
        seq = by_rid[rid]
        pos = start
        copies = cfg.shared_prefix if order[rid] > 0 else 0
        parts = (
            ("duplicate", copies),
            ("stored", seq.length - copies),
            ("reserved", seq.req.final_len - seq.length),
            ("internal", size - seq.req.final_len),
        )
        for kind, length in parts:
            if length > 0:
                spans.append(Span(pos, length, kind, rid))
                pos += length
        cursor = start + size
    if cursor < cfg.memory_tokens:
        spans.append(Span(cursor, cfg.memory_tokens - cursor, hole_kind, None))
    return Snapshot(step=step, spans=spans, lengths={s.req.rid: s.length for s in running})


def _snapshot_paged(alloc: PagedAllocator, cfg: PagingConfig, step: int, running: list[Seq]) -> Snapshot:
    bs = cfg.block_size
    cells: dict[int, BlockCell] = {}
    for b in alloc.shared_blocks:
        cells[b] = BlockCell(b, "shared", bs, alloc.shared_ref, None)
    tables: dict[int, list[int]] = {}
    for seq in running:
        own = alloc.tables[seq.req.rid]
        tables[seq.req.rid] = list(alloc.shared_blocks) + own
        remaining = seq.length - alloc.shared_tokens
        for b in own:
            used = min(bs, remaining)
            remaining -= used
            cells[b] = BlockCell(b, "full" if used == bs else "partial", used, 1, seq.req.rid)
    blocks = [cells.get(b, BlockCell(b, "free", 0, 0, None)) for b in range(alloc.num_blocks)]
    return Snapshot(step=step, blocks=blocks, block_tables=tables,
                    lengths={s.req.rid: s.length for s in running})


def simulate_layout(cfg: PagingConfig, layout: str, snapshot_step: int | None = None) -> LayoutResult:
    """Serve the whole request stream with one allocator; record every step."""
    return _simulate(cfg, layout, snapshot_step, stop_at_snapshot=False)


def snapshot_at(cfg: PagingConfig, layout: str, step: int) -> tuple[Snapshot, StepRecord]:
    """The memory layout and the state record at ``step`` (runs only that far; after the last step,
    the empty memory and the final record)."""
    res = _simulate(cfg, layout, step, stop_at_snapshot=True)
    assert res.snapshot is not None
    return res.snapshot, res.records[min(step, len(res.records) - 1)]


def _simulate(cfg: PagingConfig, layout: str, snapshot_step: int | None, stop_at_snapshot: bool) -> LayoutResult:
    cfg.validate()
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}")
    alloc: ContiguousAllocator | PagedAllocator = ContiguousAllocator(cfg) if layout == "contiguous" else PagedAllocator(cfg)
    waiting: deque[Seq] = deque(Seq(r) for r in make_requests(cfg))
    running: list[Seq] = []
    records: list[StepRecord] = []
    snapshot: Snapshot | None = None
    finished = preemptions = 0
    step = 0
    while waiting or running:
        if step > 0:
            preempted: set[int] = set()
            for seq in list(running):
                if seq.req.rid in preempted:
                    continue  # preempted earlier in this step
                while not alloc.grow(seq):
                    victim = running.pop()  # the most recently admitted request
                    alloc.release(victim)
                    waiting.appendleft(victim)
                    preempted.add(victim.req.rid)
                    preemptions += 1
                    if victim is seq:
                        break
                else:
                    seq.length += 1
                    seq.generated += 1
            done = [s for s in running if s.generated >= s.req.output_len]
            if done:
                running = [s for s in running if s.generated < s.req.output_len]
                for seq in done:
                    alloc.release(seq)
                    finished += 1
        while waiting:
            seq = waiting[0]
            if seq.length == 0:
                seq.length = seq.req.prompt_len
            if not alloc.try_admit(seq):
                break
            waiting.popleft()
            seq.admitted_at = step
            running.append(seq)
        if not running and waiting:
            raise ValueError("a single request does not fit in memory")  # validate() prevents this
        slots = _account(layout, alloc, cfg, running, waiting)
        records.append(StepRecord(step, len(running), len(waiting), finished, slots,
                                  utilisation_of(slots, len(waiting))))
        if snapshot_step is not None and step == snapshot_step:
            if isinstance(alloc, ContiguousAllocator):
                snapshot = _snapshot_contiguous(alloc, cfg, step, running, slots["external"] > 0)
            else:
                snapshot = _snapshot_paged(alloc, cfg, step, running)
            if stop_at_snapshot:
                break
        step += 1
    if snapshot_step is not None and snapshot is None:
        snapshot = Snapshot(step=snapshot_step, spans=[Span(0, cfg.memory_tokens, "free", None)]
                            if layout == "contiguous" else [],
                            blocks=[BlockCell(b, "free", 0, 0, None) for b in range(alloc.num_blocks)]
                            if isinstance(alloc, PagedAllocator) else [])
    return _summarise(layout, cfg, records, preemptions, snapshot)


def _summarise(layout: str, cfg: PagingConfig, records: list[StepRecord], preemptions: int,
               snapshot: Snapshot | None) -> LayoutResult:
    busy = [r for r in records if r.running > 0]
    loaded = [r for r in busy if r.waiting > 0] or busy
    # One definition of utilisation for the headline, the table and the chart: the share of the whole
    # KV memory holding token states, averaged over the steps when requests wait (all running steps
    # if none wait) - the "stored" share of ``waste_share``.
    share = {k: sum(r.slots[k] for r in loaded) / (len(loaded) * cfg.memory_tokens) if loaded else 0.0
             for k in WASTE_KINDS}
    return LayoutResult(
        layout=layout,
        steps=records[-1].step if records else 0,
        records=records,
        utilisation=share["stored"],
        waste_share=share,
        requests_fit_at_start=records[0].running if records else 0,
        max_running=max((r.running for r in records), default=0),
        mean_running=sum(r.running for r in busy) / len(busy) if busy else 0.0,
        preemptions=preemptions,
        tokens_generated=sum(r.output_len for r in make_requests(cfg)),
        snapshot=snapshot,
    )


@dataclass(frozen=True)
class PagingComparison:
    """Both allocators on the same request stream."""

    config: PagingConfig
    contiguous: LayoutResult
    paged: LayoutResult

    @property
    def fit_ratio(self) -> float:
        """How many times more requests fit at once when paged (at the start of the stream)."""
        return self.paged.requests_fit_at_start / max(1, self.contiguous.requests_fit_at_start)

    @property
    def speedup_steps(self) -> float:
        """Steps the contiguous layout needs to serve the stream, per step the paged one needs."""
        return self.contiguous.steps / max(1, self.paged.steps)

    def to_dict(self, records: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "config": asdict(self.config),
            "contiguous": self.contiguous.summary(),
            "paged": self.paged.summary(),
            "paper_band": list(PAPER_UTILISATION_BAND),
            "fit_ratio": round(self.fit_ratio, 3),
            "speedup_steps": round(self.speedup_steps, 3),
        }
        if records:
            for name in LAYOUTS:
                res: LayoutResult = getattr(self, name)
                out[name]["records"] = [
                    {"step": r.step, "running": r.running, "waiting": r.waiting, **r.slots} for r in res.records
                ]
        return out


def compare_layouts(cfg: PagingConfig, snapshot_step: int | None = None) -> PagingComparison:
    """Run both allocators on the same seeded stream (optionally snapshotting one step)."""
    return PagingComparison(
        config=cfg,
        contiguous=simulate_layout(cfg, "contiguous", snapshot_step),
        paged=simulate_layout(cfg, "paged", snapshot_step),
    )
