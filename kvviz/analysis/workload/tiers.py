"""A second tier under the block pool: what a host (CPU) tier of H blocks adds, by source, on a trace.

The policy is vLLM 0.33.0's native KV offloading (``vllm/v1/kv_offload/cpu/manager.py`` and
``cpu/policies/lru.py``, driven by ``distributed/kv_transfer/kv_connector/v1/offloading/scheduler.py``),
with one offloaded chunk per device block and the defaults (``offload_prompt_only``, store threshold 1),
one request at a time:

- **device tier**: kvviz's LRU rule (``reuse_distance``): the run of leading blocks present, then every
  block touched tail first. It does not depend on the host tier: loaded blocks are touched like hits.
- **lookup**: after the device run of ``d`` blocks, the connector asks the host for the blocks from ``d``
  on, up to the prompt's last *full* block, and loads back the longest run of consecutive host hits. A
  run that reaches the prompt's end loads it whole and vLLM recomputes the last token (one token less).
- **store**: every full prompt block is offered to the host tier (device hits too: the connector's
  store index starts at block 0). Offered blocks already there are kept (protected); the new ones are
  stored when the free plus evictable slots outside the offer hold them all, else none is
  (``prepare_store`` returns None). Evictions take the least recently used blocks.
- **recency** (``LRUCachePolicy.on_request_finished``): the request's offered blocks present in the
  host are refreshed tail first, so its first block is the most recent. The host tier therefore never
  depends on the device tier, and the device tier never on the host tier.

- **ARC** (``policy="arc"``, vLLM's ``eviction_policy: "arc"``, ``cpu/policies/arc.py``): the host tier is
  the shared ``kvviz.mirror.host_pool.HostBlockPool`` with ARC, driven per request as the connector drives
  its manager: the offer is stored (blocks already held count as reused, new ones enter T1, a store miss
  found in a ghost list moves T1's target) and the request's accesses are applied at its finish (reused
  blocks to T2). The loaded run is not passed on its own: it is a run of the offer's held blocks, which
  count as reused anyway, and its pins are released before the store; so the host tier does not depend on
  the device tier either.

``two_tier_grid`` computes it exactly: the device runs at every device capacity come from the one-pass
stack kernel, the host tier is replayed once per host capacity (LRU: a compiled linked-list; ARC: the
pool above, in Python) and read at every device capacity. ``replay_two_tier`` is the plain step-by-step
reference (OrderedDicts for LRU; for ARC the device OrderedDict and one pool per pair).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
from numba import njit

from kvviz.analysis.workload.columns import TraceColumns, as_columns
from kvviz.analysis.workload.reuse_distance import touch_lru
from kvviz.analysis.workload.stack import stack_pass
from kvviz.analysis.workload.trace import WorkloadTrace
from kvviz.mirror.host_arc import EVICTION_POLICIES
from kvviz.mirror.host_pool import HostBlockPool, StoreMeta

MAX_HOST_BLOCKS = 1 << 30
MAX_GRID_POINTS = 64


@dataclass
class TwoTierStep:
    """One request through both tiers: tokens hit in the device tier, tokens loaded from the host tier
    (less the recomputed last token), blocks loaded, blocks newly stored, whether the store was refused."""

    device_tokens: int
    host_tokens: int
    host_blocks: int
    stored: int
    refused: bool


def _check_policy(policy: str) -> str:
    if policy not in EVICTION_POLICIES:
        raise ValueError(f"eviction policy must be one of {', '.join(EVICTION_POLICIES)}, got {policy!r}")
    return policy


def _arc_store(pool: HostBlockPool, rid: str, offered: list[int]) -> int | None:
    """One request's offer (its full prompt blocks) to an ARC host tier, then its finish. Returns the blocks
    stored, or None when the store was refused."""
    unique = list(dict.fromkeys(offered))
    planned = pool.prepare_store(unique, [StoreMeta(None, ())] * len(unique), rid, 0)  # type: ignore[arg-type]
    if planned:
        pool.complete_store([h for h, _ in planned])
    pool.finish_request(rid)
    pool.take_events()
    return None if planned is None else len(planned)


def replay_two_tier(trace: WorkloadTrace, device_blocks: int, host_blocks: int,
                    policy: str = "lru") -> list[TwoTierStep]:
    """The plain reference: both tiers as OrderedDicts (ARC: the host tier a shared pool), one request at a
    time, by the rules above."""
    if _check_policy(policy) == "arc":
        return _replay_arc(trace, device_blocks, host_blocks)
    bs = trace.block_size
    device: OrderedDict[int, None] = OrderedDict()
    host: OrderedDict[int, None] = OrderedDict()
    out: list[TwoTierStep] = []
    for req in trace.requests:
        blocks, length = req.blocks, req.input_tokens
        run = 0
        for b in blocks[: req.lookup_blocks]:
            if b not in device:
                break
            run += 1
        device_tokens = min(run * bs, length)
        end = run
        while end < req.full_blocks and blocks[end] in host:
            end += 1
        loaded = end - run
        host_tokens = loaded * bs - (1 if loaded and end * bs == length else 0)
        touch_lru(device, blocks, device_blocks)
        offered = blocks[: req.full_blocks]
        new = [b for b in offered if b not in host]
        room = host_blocks - (len(offered) - len(new))
        refused = bool(new) and len(new) > room
        if not refused:
            while len(host) + len(new) > host_blocks:
                victim = next(b for b in host if b not in offered)
                del host[victim]
        for b in reversed(offered):
            if b in host or not refused:
                host[b] = None
                host.move_to_end(b)
        out.append(TwoTierStep(device_tokens, host_tokens, loaded, 0 if refused else len(new), refused))
    return out


def _replay_arc(trace: WorkloadTrace, device_blocks: int, host_blocks: int) -> list[TwoTierStep]:
    bs = trace.block_size
    device: OrderedDict[int, None] = OrderedDict()
    host = HostBlockPool(host_blocks, bs, "arc") if host_blocks else None
    out: list[TwoTierStep] = []
    for n, req in enumerate(trace.requests):
        blocks, length = req.blocks, req.input_tokens
        run = 0
        for b in blocks[: req.lookup_blocks]:
            if b not in device:
                break
            run += 1
        offered = list(blocks[: req.full_blocks])
        loaded = host.lookup(offered[run:]) if host else 0  # type: ignore[arg-type]
        stored = _arc_store(host, str(n), offered) if host else 0
        end = run + loaded
        host_tokens = loaded * bs - (1 if loaded and end * bs == length else 0)
        touch_lru(device, blocks, device_blocks)
        out.append(TwoTierStep(min(run * bs, length), host_tokens, loaded, stored or 0, stored is None))
    return out


def _arc_pass(cols: TraceColumns, capacity: int, dev_run: np.ndarray, host_tok: np.ndarray,
              host_blk: np.ndarray) -> tuple[int, int]:
    """The ARC host tier at ``capacity`` blocks, once for every device capacity (as ``_host_pass``)."""
    pool = HostBlockPool(capacity, cols.block_size, "arc")
    bs = cols.block_size
    stored = refused = 0
    for r in range(cols.num_requests):
        s, f, length = int(cols.offsets[r]), int(cols.full_blocks[r]), int(cols.input_tokens[r])
        offered = cols.blocks[s:s + f].tolist()
        for k in range(dev_run.shape[0]):  # before the request changes the tier
            d = int(dev_run[k, r])
            j = d + pool.lookup(offered[d:])
            if j > d:
                host_blk[k] += j - d
                host_tok[k] += (j - d) * bs - (1 if j * bs == length else 0)
        n = _arc_store(pool, str(r), offered)
        if n is None:
            refused += 1
        else:
            stored += n
    return stored, refused


@njit(cache=True, nogil=True)
def _unlink(prev, nxt, b):  # pragma: no cover - compiled
    nxt[prev[b]] = nxt[b]
    prev[nxt[b]] = prev[b]


@njit(cache=True, nogil=True)
def _push_front(prev, nxt, head, b):  # pragma: no cover - compiled
    """Make ``b`` the most recent: right after the sentinel ``head`` (the list runs MRU -> LRU)."""
    first = nxt[head]
    nxt[head] = b
    prev[b] = head
    nxt[b] = first
    prev[first] = b


@njit(cache=True, nogil=True)
def _host_pass(blocks, offsets, lengths, full, bs, capacity, dev_run, host_tok, host_blk,
               present, prev, nxt):  # pragma: no cover - compiled
    """Replay the host tier at ``capacity`` blocks; for every device capacity k, add the host run after
    ``dev_run[k, r]`` to ``host_tok[k]`` and ``host_blk[k]``. Returns ``(blocks stored, stores refused)``."""
    head = len(present)  # sentinel: prev/nxt have one more entry
    nxt[head] = head
    prev[head] = head
    size = 0
    stored = 0
    refused = 0
    for r in range(len(lengths)):
        s = offsets[r]
        f = full[r]
        length = lengths[r]
        for k in range(dev_run.shape[0]):
            d = dev_run[k, r]
            j = d
            while j < f and present[blocks[s + j]]:
                j += 1
            if j > d:
                host_blk[k] += j - d
                host_tok[k] += (j - d) * bs - (1 if j * bs == length else 0)
        have = 0
        for i in range(f):
            if present[blocks[s + i]]:
                have += 1
        new = f - have
        ok = new == 0 or new <= capacity - have
        if ok and new > 0:
            for i in range(f):  # protect the offer: move its present blocks out of the eviction's way
                b = blocks[s + i]
                if present[b]:
                    _unlink(prev, nxt, b)
                    _push_front(prev, nxt, head, b)
            while size + new > capacity:
                victim = prev[head]
                _unlink(prev, nxt, victim)
                present[victim] = 0
                size -= 1
            stored += new
        elif not ok:
            refused += 1
        for i in range(f - 1, -1, -1):  # recency: tail first, the first block most recent
            b = blocks[s + i]
            if present[b]:
                _unlink(prev, nxt, b)
            elif ok:
                present[b] = 1
                size += 1
            else:
                continue
            _push_front(prev, nxt, head, b)
    return stored, refused


@dataclass
class TwoTierGrid:
    """Hit tokens by source over device x host capacities. ``device_tokens[k]`` at device capacity k (the
    host tier does not change it), ``host_tokens[h, k]`` and ``host_loaded[h, k]`` (blocks loaded) at host
    capacity h, ``host_stored[h]`` and ``host_refused[h]``; ``duration_s`` is the trace's time span."""

    block_size: int
    input_tokens: int
    device_capacities: list[int]
    host_capacities: list[int]
    device_tokens: np.ndarray  # int64 (nD,)
    host_tokens: np.ndarray  # int64 (nH, nD)
    host_loaded: np.ndarray  # int64 (nH, nD)
    host_stored: np.ndarray  # int64 (nH,)
    host_refused: np.ndarray  # int64 (nH,)
    duration_s: float | None

    def rows(self, bytes_per_block: float | None = None) -> list[dict[str, float | int | None]]:
        """One row per (host, device) capacity pair: hit rates by source, blocks loaded and stored, and with
        ``bytes_per_block`` the bytes a second of trace time the host tier loads and stores."""
        total = self.input_tokens or 1
        out: list[dict[str, float | int | None]] = []
        for h, host in enumerate(self.host_capacities):
            for k, dev in enumerate(self.device_capacities):
                row: dict[str, float | int | None] = {
                    "device_blocks": dev, "host_blocks": host,
                    "device_hit_rate": int(self.device_tokens[k]) / total,
                    "host_hit_rate": int(self.host_tokens[h, k]) / total,
                    "hit_rate": (int(self.device_tokens[k]) + int(self.host_tokens[h, k])) / total,
                    "host_blocks_loaded": int(self.host_loaded[h, k]),
                    "host_blocks_stored": int(self.host_stored[h]),
                    "host_stores_refused": int(self.host_refused[h]),
                }
                if bytes_per_block is not None:
                    row["load_bytes_per_s"] = self._per_s(int(self.host_loaded[h, k]) * bytes_per_block)
                    row["store_bytes_per_s"] = self._per_s(int(self.host_stored[h]) * bytes_per_block)
                out.append(row)
        return out

    def _per_s(self, amount: float) -> float | None:
        return amount / self.duration_s if self.duration_s else None


def _check(name: str, values: list[int], low: int) -> list[int]:
    if not values or len(values) > MAX_GRID_POINTS:
        raise ValueError(f"{name}: give 1..{MAX_GRID_POINTS} capacities")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= MAX_HOST_BLOCKS:
            raise ValueError(f"{name}: capacities are integers in {low}..{MAX_HOST_BLOCKS:,} blocks, got {v!r}")
    return sorted(set(values))


def two_tier_grid(trace: WorkloadTrace | TraceColumns, device_capacities: list[int],
                  host_capacities: list[int], policy: str = "lru") -> TwoTierGrid:
    """The exact two-tier hit tokens at every (device, host) pair (host 0 = no host tier), the host tier
    evicting by ``policy`` ("lru" or "arc")."""
    _check_policy(policy)
    cols = as_columns(trace)
    devs = _check("device capacities", device_capacities, 1)
    hosts = _check("host capacities", host_capacities, 0)
    bs = cols.block_size
    tracked = stack_pass(cols, None, tuple(devs)).tracked  # int64 (nD, R): min(run x bs, length)
    dev_run = ((tracked + bs - 1) // bs).astype(np.int64)  # the device run in blocks
    n_dev, n_host, u = len(devs), len(hosts), cols.num_blocks
    host_tok = np.zeros((n_host, n_dev), np.int64)
    host_blk = np.zeros((n_host, n_dev), np.int64)
    stored = np.zeros(n_host, np.int64)
    refused = np.zeros(n_host, np.int64)
    lengths = cols.input_tokens.astype(np.int64)
    full = cols.full_blocks.astype(np.int64)
    for h, cap in enumerate(hosts):
        if cap == 0:  # no host tier
            continue
        if policy == "arc":
            stored[h], refused[h] = _arc_pass(cols, cap, dev_run, host_tok[h], host_blk[h])
            continue
        present = np.zeros(u, np.uint8)
        prev = np.zeros(u + 1, np.int64)
        nxt = np.zeros(u + 1, np.int64)
        stored[h], refused[h] = _host_pass(cols.blocks, cols.offsets, lengths, full, bs, cap, dev_run,
                                           host_tok[h], host_blk[h], present, prev, nxt)
    stamps = cols.timestamps
    duration = None
    if cols.has_timestamps and cols.num_requests > 1:
        span = float(np.nanmax(stamps) - np.nanmin(stamps)) / 1000.0
        duration = span if span > 0 else None
    return TwoTierGrid(bs, int(lengths.sum()), devs, hosts, tracked.sum(axis=1).astype(np.int64), host_tok,
                       host_blk, stored, refused, duration)


DEFAULT_DEVICE_POINTS = 8


def parse_host_blocks(text: str) -> list[int]:
    """``"0,1000,..."`` as sorted distinct host capacities in blocks (0 = no host tier); ValueError naming
    the bad entry."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise ValueError("give host capacities in blocks, e.g. 0,10000,100000")
    for p in parts:
        if not p.isdigit() or len(p) > 10 or int(p) > MAX_HOST_BLOCKS:
            raise ValueError(f"host capacity {p!r} is not an integer in 0..{MAX_HOST_BLOCKS:,} (blocks)")
    out = sorted({int(p) for p in parts})
    if len(out) > MAX_GRID_POINTS:
        raise ValueError(f"at most {MAX_GRID_POINTS} host capacities")
    return out


def two_tier_report(cols: TraceColumns, host_capacities: list[int], device_capacities: list[int] | None = None,
                    bytes_per_block: float | None = None, policy: str = "lru") -> dict[str, object]:
    """The CLI's ``two_tier`` section: the grid's rows (device capacities default to a log-spaced grid of
    ``DEFAULT_DEVICE_POINTS`` up to the trace's distinct blocks) and what the bandwidths are per."""
    from kvviz.analysis.workload.reuse_distance import log_grid

    devs = device_capacities or log_grid(max(cols.num_blocks, 1), DEFAULT_DEVICE_POINTS)
    grid = two_tier_grid(cols, devs, host_capacities, policy)
    return {"policy": f"vllm-0.33.0-offloading-{policy}", "device_blocks": grid.device_capacities,
            "host_blocks": grid.host_capacities, "duration_s": grid.duration_s,
            "bytes_per_block": bytes_per_block, "rows": grid.rows(bytes_per_block)}
