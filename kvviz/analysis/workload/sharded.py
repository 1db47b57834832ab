"""A trace in many files (a directory of shards) analysed on a Dask cluster, one spatial sample per partition.

- map: a worker reads one file (kvviz.analysis.workload.stream, the same checks as one process), keeps the accesses
  whose block hashes under the rate (kvviz.analysis.workload.sample.keep) and splits them by other bits of the same
  hash into ``GROUPS`` partitions, so a block always lands in the same partition;
- shuffle: partition p gets its piece of every file, in file (= trace) order, with requests renumbered by
  the files before, so the access order is kept;
- reduce: each partition's curve, a spatial sample at rate / ``GROUPS`` (its own stack distances);
- driver: pools the partitions (their hit tokens over their kept tokens) into one estimate; the error is
  twice the spread of the partitions' estimates over sqrt(partitions) plus the distances' blur.

Single process, ``partition_profile`` computes the same partitions from the same accesses: the cluster's
result equals it (tests/workload/test_workload_sharded.py).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kvviz.analysis.workload.columns import TraceColumns
from kvviz.analysis.workload.sample import (
    GROUPS,
    Kept,
    SampleCurve,
    SampledProfile,
    Totals,
    concat,
    curve_of,
    keep,
)
from kvviz.analysis.workload.stream import BadLines, read_trace, trace_files
from kvviz.analysis.workload.trace import WorkloadError

ENGINES = ("dask", "ray")
LOCAL_HOST = "127.0.0.1"
CONNECT_TIMEOUT_S = 20


@dataclass
class Shard:
    """What a worker learns from one file: the totals, the block size and line kinds, the first and last
    timestamps (NaN when none), its bad lines, and its kept accesses split into partitions."""

    name: str
    totals: Totals
    block_size: int
    hash_ids: bool
    first_ts: float
    last_ts: float
    bad: BadLines
    pieces: list[Kept]
    error: tuple[str, str, dict[str, Any]] | None = None
    """A file that could not be read: its WorkloadError as data (message, code, params), raised by the
    driver, so a worker never logs a failed task."""

    def meta(self) -> Shard:
        """The same without the pieces (what the driver gathers)."""
        return Shard(self.name, self.totals, self.block_size, self.hash_ids, self.first_ts, self.last_ts,
                     self.bad, [], self.error)


def split(cols: TraceColumns, rate: float, salt: int = 0) -> list[Kept]:
    """The kept accesses of ``cols`` by partition (0..GROUPS-1), each in trace order."""
    kept = keep(cols, rate, salt)
    return [kept.select(kept.group == p) for p in range(GROUPS)]


def read_shard(path: str, block_size: int | None, rate: float, salt: int, skip_bad: bool,
               tokenize: bool) -> Shard:
    """The map step: one file read, sampled and split (runs on a worker)."""
    encode = None
    if tokenize:
        from kvviz.analysis.workload.load import lazy_encoder

        encode = lazy_encoder()
    name = Path(path).name
    try:
        cols, bad = read_trace(path, block_size, encode, skip_bad)
    except WorkloadError as exc:
        return Shard(name, Totals(), 0, False, math.nan, math.nan, BadLines(), [],
                     (f"{name}: {exc}", exc.code, dict(exc.params)))
    totals = Totals()
    totals.add(cols)
    stamps = cols.timestamps[~np.isnan(cols.timestamps)]
    bad.first = [(name, line, error) for _, line, error in bad.first]
    return Shard(name, totals, cols.block_size, "hash_ids" in cols.kinds,
                 float(stamps[0]) if len(stamps) else math.nan, float(stamps[-1]) if len(stamps) else math.nan,
                 bad, split(cols, rate, salt))


def _piece(shard: Shard, p: int) -> Kept:
    return shard.pieces[p]


def _meta(shard: Shard) -> Shard:
    return shard.meta()


def partition_curve(pieces: Sequence[Kept], bases: Sequence[int], rate: float) -> SampleCurve:
    """The reduce step: one partition's pieces (file order), requests renumbered from ``bases``."""
    kept = concat([p.shifted(b) for p, b in zip(pieces, bases, strict=True)])
    return curve_of(kept, rate / GROUPS, replicates=0)[0]  # the pooled bar reads no replicates


def combine(metas: Sequence[Shard]) -> tuple[Totals, list[int], BadLines]:
    """The driver's checks across files (no Mooncake lines mixed with token lines, so one default block
    size; time never going back from one file to the next), the totals, each file's first request, the bad lines."""
    totals, bases, bad = Totals(), [], BadLines()
    previous: Shard | None = None
    last_ts = math.nan
    for m in metas:
        if m.error is not None:
            message, code, params = m.error
            raise WorkloadError(message, code, **params)
        if previous is not None:
            if m.hash_ids != previous.hash_ids:
                first, kind = ("hash_ids", "token_ids") if previous.hash_ids else ("token_ids", "hash_ids")
                raise WorkloadError(f"{m.name}: line 1: a {kind!r} line in a trace that began with {first!r} "
                                    "lines (Mooncake hash_ids cannot be mixed with token lines)", "mixed_kinds",
                                    line=1, kind=kind, first=first)
            if m.block_size != previous.block_size:
                raise WorkloadError(f"{m.name}: block size {m.block_size} after {previous.block_size} in "
                                    f"{previous.name} (give --block-size)", "bad_block_size",
                                    high=m.block_size, got=repr(m.block_size))
            if m.first_ts < last_ts:  # False when either is NaN
                raise WorkloadError(f"{m.name}: line 1: timestamp {m.first_ts:g} ms is before the previous "
                                    f"line's {last_ts:g} ms (lines must be in arrival order)",
                                    "out_of_order", line=1, ts=m.first_ts, previous=last_ts)
        bases.append(totals.requests)
        totals.merge(m.totals)
        bad.count += m.bad.count
        bad.first.extend(m.bad.first[: max(0, 5 - len(bad.first))])
        previous = m
        last_ts = m.last_ts if not math.isnan(m.last_ts) else last_ts
    return totals, bases, bad


def partition_profile(cols: TraceColumns, rate: float, salt: int = 0) -> SampledProfile:
    """In one process, the estimate a cluster gives: the same partitions, each its own curve, pooled."""
    totals = Totals()
    totals.add(cols)
    curves = [partition_curve([piece], [0], rate) for piece in split(cols, rate, salt)]
    return totals.profile(rate, None, curves)


@dataclass
class ShardedResult:
    """A cluster's analysis: the pooled profile, the bad lines, files read, workers that ran it."""

    profile: SampledProfile
    bad: BadLines
    files: int
    workers: int


def analyze_sharded(path: str | Path, rate: float, address: str | None = None, block_size: int | None = None,
                    skip_bad: bool = True, tokenize: bool = False, salt: int = 0,
                    local_workers: int = 2) -> ShardedResult:
    """Analyse the files at ``path`` on the Dask scheduler at ``address`` (or on a local cluster of
    ``local_workers`` processes on 127.0.0.1, started and stopped here)."""
    from dask.distributed import Client, LocalCluster

    files = [str(f) for f in trace_files(path)]
    cluster = None
    if address is None:
        cluster = LocalCluster(n_workers=local_workers, threads_per_worker=1, host=LOCAL_HOST,
                               dashboard_address=f"{LOCAL_HOST}:0", processes=True,
                               silence_logs=logging.CRITICAL)  # the CLI's stderr: its own lines only
    try:
        with Client(address if address is not None else cluster, timeout=CONNECT_TIMEOUT_S) as client:
            return _run(client, files, rate, block_size, skip_bad, tokenize, salt)
    finally:
        if cluster is not None:
            cluster.close()


def _run(client: Any, files: list[str], rate: float, block_size: int | None, skip_bad: bool, tokenize: bool,
         salt: int) -> ShardedResult:
    shards = client.map(read_shard, files, block_size=block_size, rate=rate, salt=salt, skip_bad=skip_bad,
                        tokenize=tokenize, pure=False)
    metas = client.gather(client.map(_meta, shards))
    totals, bases, bad = combine(metas)
    if totals.requests == 0:
        raise WorkloadError("the trace is empty: expected JSON Lines, one request a line", "empty")
    reduces = [client.submit(partition_curve, [client.submit(_piece, s, p, pure=False) for s in shards], bases,
                             rate, pure=False) for p in range(GROUPS)]
    curves = client.gather(reduces)
    workers = len(client.scheduler_info().get("workers", {}))
    return ShardedResult(totals.profile(rate, None, curves), bad, len(files), workers)
