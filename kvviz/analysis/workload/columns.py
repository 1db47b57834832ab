"""A trace as columns: flat numpy arrays instead of one Python object per request.

``blocks`` holds every request's interned block ids back to back in prompt order; request ``r`` owns
``blocks[offsets[r]:offsets[r + 1]]``. Per-request fields are arrays of length R, per-block fields
arrays of length U. Memory is 4 bytes per block access plus about 12 bytes per distinct block and
40 bytes per request, so a trace of billions of accesses fits where a list of tuples would not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain

import numpy as np

from kvviz.analysis.workload.trace import WorkloadTrace


@dataclass
class TraceColumns:
    """The columns of a trace (same meaning as ``WorkloadRequest``'s fields); ``timestamps`` is NaN where
    a line had none. ``labels`` are the original block ids (Mooncake ints) or their hex labels (hashed
    token lines); ``parent`` is the block before each block in its first request (-1 for a first block)."""

    block_size: int
    blocks: np.ndarray  # int32 (A,)
    offsets: np.ndarray  # int64 (R + 1,)
    input_tokens: np.ndarray  # int64 (R,)
    lookup_blocks: np.ndarray  # int64 (R,)
    full_blocks: np.ndarray  # int64 (R,)
    output_tokens: np.ndarray  # int64 (R,)
    timestamps: np.ndarray  # float64 (R,)
    parent: np.ndarray  # int32 (U,)
    labels: np.ndarray | list[str]  # int64 (U,) or U strings
    kinds: set[str] = field(default_factory=set)

    @property
    def num_requests(self) -> int:
        return len(self.input_tokens)

    @property
    def num_blocks(self) -> int:
        """Distinct blocks."""
        return len(self.parent)

    @property
    def num_accesses(self) -> int:
        return len(self.blocks)

    @property
    def has_timestamps(self) -> bool:
        return self.num_requests > 0 and not bool(np.isnan(self.timestamps).any())

    def label(self, block: int) -> str:
        return str(self.labels[block]) if isinstance(self.labels, list) else str(int(self.labels[block]))

    def nbytes(self) -> int:
        """Bytes held by the arrays (labels as strings are not counted)."""
        arrays = (self.blocks, self.offsets, self.input_tokens, self.lookup_blocks, self.full_blocks,
                  self.output_tokens, self.timestamps, self.parent)
        extra = self.labels.nbytes if isinstance(self.labels, np.ndarray) else 0
        return sum(a.nbytes for a in arrays) + extra


def from_trace(trace: WorkloadTrace) -> TraceColumns:
    """The columns of a parsed ``WorkloadTrace`` (same block ids, same order)."""
    reqs = trace.requests
    sizes = np.fromiter((len(r.blocks) for r in reqs), np.int64, len(reqs))
    offsets = np.zeros(len(reqs) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    blocks = np.fromiter(chain.from_iterable(r.blocks for r in reqs), np.int32, int(offsets[-1]))

    def column(values, dtype) -> np.ndarray:
        return np.fromiter(values, dtype, len(reqs))

    return TraceColumns(
        block_size=trace.block_size, blocks=blocks, offsets=offsets,
        input_tokens=column((r.input_tokens for r in reqs), np.int64),
        lookup_blocks=column((r.lookup_blocks for r in reqs), np.int64),
        full_blocks=column((r.full_blocks for r in reqs), np.int64),
        output_tokens=column((r.output_tokens for r in reqs), np.int64),
        timestamps=column((np.nan if r.timestamp_ms is None else r.timestamp_ms for r in reqs), np.float64),
        parent=np.asarray(trace.block_parent, np.int32), labels=list(trace.block_labels), kinds=set(trace.kinds),
    )


def as_columns(trace: WorkloadTrace | TraceColumns) -> TraceColumns:
    """``trace`` as columns, converted once per parsed trace (the result is kept on the trace)."""
    if isinstance(trace, TraceColumns):
        return trace
    cached = trace._columns
    if cached is None or cached.num_requests != trace.num_requests or cached.num_blocks != trace.num_blocks:
        cached = trace._columns = from_trace(trace)
    return cached


def tile(cols: TraceColumns, times: int) -> TraceColumns:
    """``cols`` played ``times`` times in a row, each copy with fresh block ids (and timestamps shifted past
    the previous copy): the same traffic shape at ``times`` x the size, as the issue measured Mooncake."""
    u, r = cols.num_blocks, cols.num_requests
    if u * times >= 2**31:
        raise ValueError("more than 2**31 distinct blocks")
    blocks = (cols.blocks[None, :] + (np.arange(times, dtype=np.int32) * u)[:, None]).ravel()
    sizes = np.diff(cols.offsets)
    offsets = np.zeros(r * times + 1, np.int64)
    np.cumsum(np.tile(sizes, times), out=offsets[1:])
    span = float(np.nanmax(cols.timestamps) - np.nanmin(cols.timestamps)) + 1.0 if r else 0.0
    stamps = (cols.timestamps[None, :] + (np.arange(times) * span)[:, None]).ravel()
    parent = np.where(cols.parent[None, :] < 0, -1, cols.parent[None, :] + (np.arange(times) * u)[:, None])
    return TraceColumns(
        block_size=cols.block_size, blocks=blocks, offsets=offsets,
        input_tokens=np.tile(cols.input_tokens, times), lookup_blocks=np.tile(cols.lookup_blocks, times),
        full_blocks=np.tile(cols.full_blocks, times), output_tokens=np.tile(cols.output_tokens, times),
        timestamps=stamps, parent=parent.astype(np.int32).ravel(),
        labels=np.arange(u * times, dtype=np.int64), kinds=set(cols.kinds),
    )
