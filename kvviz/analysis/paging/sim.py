"""The paging simulation: an FCFS iteration-level scheduler serves the request stream with one allocator.

Every step is recorded (``StepRecord``); a ``Snapshot`` says where every slot is at one step;
``compare_layouts`` runs both allocators on the same seeded stream. Invariant: ``LayoutResult.utilisation``
is ``waste_share["stored"]`` (one definition for the headline, the table and the chart).
"""

from __future__ import annotations

from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

from kvviz.analysis.paging.alloc import (
    ContiguousAllocator,
    PagedAllocator,
    Seq,
    account_slots,
    utilisation_of,
)
from kvviz.analysis.paging.experiment import (
    LAYOUTS,
    PAPER_UTILISATION_BAND,
    WASTE_KINDS,
    PagingConfig,
    make_requests,
)


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
        slots = account_slots(layout, alloc, cfg, running, waiting)
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
