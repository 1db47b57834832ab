"""The scheduler, as vLLM v1's (``vllm/v1/core/sched/scheduler.py``): a waiting queue and a running list,
a token budget per step, running requests first (decode tokens and unfinished prefill chunks), then
waiting ones (chunked prefill), preemption by recompute of the newest running request (FCFS) or of the
lowest-priority, latest one (the priority policy, which also admits waiting requests by priority).

Every block id and hash comes from the mirror's ``KVCacheManager``: a request enters it with the tokens of its
first chunk (``add_request``, which reuses the longest cached prefix) and grows by each later chunk or
decode token (``append_tokens``), so a block is cached once its K/V are computed in this step or before.
Invariant: for a running request, the manager holds exactly ``num_computed_tokens`` tokens after a step.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from kvviz.engine.config import EngineConfig
from kvviz.engine.offload import HostBlockPool, LoadJob
from kvviz.engine.request import Request, RequestStatus
from kvviz.mirror.host_pool import load_span
from kvviz.mirror.manager import KVCacheManager


@dataclass(frozen=True)
class ScheduledChunk:
    """``num_tokens`` tokens of one request computed in this step, from position ``start``."""

    request: Request
    start: int
    token_ids: list[int]
    num_cached_tokens: int = 0  # prefix hit at admission in this step (0 for a running request)

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def end(self) -> int:
        return self.start + len(self.token_ids)

    @property
    def is_decode(self) -> bool:
        """One token after the whole prompt: a decode step."""
        return self.start >= self.request.num_prompt_tokens

    @property
    def samples(self) -> bool:
        """True when the chunk reaches the last known token, so the step samples the next one."""
        return self.end == self.request.num_tokens


@dataclass
class SchedulerOutput:
    """One step's plan: the chunks to compute and the requests preempted to make room."""

    step: int
    chunks: list[ScheduledChunk] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    loads: list[LoadJob] = field(default_factory=list)  # host-tier hits to copy back before the forward pass

    @property
    def num_batched_tokens(self) -> int:
        return sum(c.num_tokens for c in self.chunks)


@dataclass
class PrefixCacheCounters:
    """vLLM's ``PrefixCacheStats`` totals: tokens looked up and hit at admission, preempted apart."""

    requests: int = 0
    queries: int = 0
    hits: int = 0
    preempted_requests: int = 0
    preempted_queries: int = 0
    preempted_hits: int = 0
    # the host tier, as vLLM's connector_prefix_cache_stats: tokens looked up past the device hit, and hit
    external_queries: int = 0
    external_hits: int = 0
    host_hits: int = 0  # hits_by_source["host"] (the host tier is kvviz's one connector tier)

    def record_external(self, num_tokens: int, num_hits: int, preempted: bool) -> None:
        """vLLM's ``connector_prefix_cache_stats.record``: a re-admission after preemption is not counted."""
        if preempted:
            return
        self.external_queries += num_tokens
        self.external_hits += num_hits
        self.host_hits += num_hits

    def record(self, num_tokens: int, num_hits: int, preempted: bool) -> None:
        if preempted:
            self.preempted_requests += 1
            self.preempted_queries += num_tokens
            self.preempted_hits += num_hits
        else:
            self.requests += 1
            self.queries += num_tokens
            self.hits += num_hits


class Scheduler:
    """Waiting (FCFS, preempted requests at the front) and running queues over one ``KVCacheManager``."""

    def __init__(self, config: EngineConfig, manager: KVCacheManager, host: HostBlockPool | None = None) -> None:
        self.config = config
        self.manager = manager
        self.host = host  # the host tier's bookkeeping (--kv-offloading-size), or None
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.prefix_cache = PrefixCacheCounters()
        self.num_preemptions = 0
        self.num_steps = 0
        self.priority = config.scheduling_policy == "priority"

    def add_request(self, request: Request) -> None:
        self.waiting.append(request)

    def has_unfinished_requests(self) -> bool:
        return bool(self.waiting or self.running)

    # -- one step -------------------------------------------------------------------------------------
    def schedule(self) -> SchedulerOutput:
        """Plan one step; requests' ``num_computed_tokens`` already count what it schedules."""
        out = SchedulerOutput(self.num_steps)
        self.num_steps += 1
        budget = self.config.max_num_batched_tokens
        budget = self._schedule_running(out, budget)
        if not out.preempted:
            self._schedule_waiting(out, budget)
        now = time.monotonic()
        for chunk in out.chunks:
            req = chunk.request
            req.num_computed_tokens = chunk.end
            if req.metrics.first_scheduled_time is None:
                req.metrics.first_scheduled_time = now
        return out

    def _victim(self) -> Request:
        """The running request to preempt: the newest (FCFS), or the lowest priority, latest arrival."""
        if self.priority:
            return max(self.running, key=lambda r: (r.priority, r.arrival_time))
        return self.running[-1]

    def _schedule_running(self, out: SchedulerOutput, budget: int) -> int:
        i = 0
        while i < len(self.running) and budget > 0:
            req = self.running[i]
            start = req.num_computed_tokens
            tokens = req.all_token_ids[start:start + budget]
            if not tokens:  # nothing new (cannot happen after a sampled step); skip
                i += 1
                continue
            scheduled = True
            while not self.manager.append_tokens(req.request_id, tokens).ok:
                victim = self._victim()
                at = self.running.index(victim)
                del self.running[at]
                if at < i:
                    i -= 1
                # under the priority policy the victim may already be scheduled in this step: unschedule it
                chunk = next((c for c in out.chunks if c.request is victim), None)
                if chunk is not None:
                    out.chunks.remove(chunk)
                    budget += chunk.num_tokens
                self._preempt(victim)
                out.preempted.append(victim.request_id)
                if victim is req:
                    scheduled = False
                    break
            if not scheduled:
                if self.priority:  # the requests after it rank higher and may still fit; i is the next one
                    continue
                return budget
            out.chunks.append(ScheduledChunk(req, start, tokens))
            budget -= len(tokens)
            i += 1
        return budget

    def _schedule_waiting(self, out: SchedulerOutput, budget: int) -> None:
        manager = self.manager
        while self.waiting and budget > 0 and len(self.running) < self.config.max_num_seqs:
            # vLLM's priority heap orders by (priority, arrival_time, request_id) (``Request.__lt__``)
            req = min(self.waiting, key=lambda r: (r.priority, r.arrival_time, r.request_id)) if self.priority \
                else self.waiting[0]
            tokens = req.all_token_ids
            hashes = req.block_hashes if not req.output_token_ids else manager.request_block_hashes(
                tokens, req.cache_salt)  # a resumed request also hits its own decoded blocks
            skip = req.sampling_params.skip_reading_prefix_cache  # vLLM 0.33.0: no lookup, no stats
            num_local = 0 if skip else manager.peek_cache_hit(tokens, req.cache_salt,
                                                              block_hashes=hashes).num_computed_tokens
            host_hashes = [] if skip else self._host_hit(hashes, num_local, len(tokens))
            num_computed = num_local + len(host_hashes) * manager.block_size
            num_new = len(tokens) - num_computed
            if not self.config.enable_chunked_prefill and num_new > budget:
                break
            num_new = min(num_new, budget)
            # vLLM 0.33.0 (scheduler_reserve_full_isl): the whole sequence, outputs of a resumed request included,
            # must fit, not just this chunk (it never passes max_model_len: the engine stops a request there)
            whole = len(tokens) if self.config.scheduler_reserve_full_isl else None
            result = manager.add_request(req.request_id, tokens[:num_computed + num_new], req.cache_salt,
                                         block_hashes=hashes, full_num_tokens=whole, skip_reading_prefix_cache=skip)
            if not result.ok:
                break
            self.waiting.remove(req)
            preempted = req.num_preemptions > 0
            if not skip:
                self.prefix_cache.record(len(tokens), num_local, preempted)
            if self.host is not None and not skip:
                self.prefix_cache.record_external(len(tokens) - num_local, num_computed - num_local, preempted)
            if host_hashes:
                self._plan_load(out, req, host_hashes, num_local)
            if req.num_cached_tokens < 0:
                req.num_cached_tokens = num_computed
                req.num_cached_tokens_host = num_computed - num_local
            req.status = RequestStatus.RUNNING
            req.num_computed_tokens = num_computed
            self.running.append(req)
            out.chunks.append(ScheduledChunk(req, num_computed, tokens[num_computed:num_computed + num_new],
                                             num_computed))
            budget -= num_new

    def _host_hit(self, hashes: list, num_local: int, num_tokens: int) -> list:
        """The full blocks right after the device hit that the host tier holds, leaving at least one token
        to compute (vLLM's connector lookup of ``get_num_new_matched_tokens``)."""
        if self.host is None:
            return []
        first, last = load_span(num_local, num_tokens, len(hashes), self.manager.block_size)
        if first >= last:
            return []
        return list(hashes[first:first + self.host.lookup(hashes[first:last])])

    def _plan_load(self, out: SchedulerOutput, req: Request, host_hashes: list, num_local: int) -> None:
        """Pin the host blocks and name the device blocks of the request's table they are copied into."""
        assert self.host is not None
        first = num_local // self.manager.block_size
        block_ids = self.manager.block_ids(req.request_id)[first:first + len(host_hashes)]
        slots = self.host.prepare_load(host_hashes, req.request_id, first)
        out.loads.append(LoadJob(req.request_id, tuple(host_hashes), tuple(slots), tuple(block_ids)))

    def _preempt(self, req: Request) -> None:
        """Free the request's blocks (its computed full blocks stay cached) and queue it first to recompute."""
        self.manager.free_request(req.request_id)
        req.status = RequestStatus.PREEMPTED
        req.num_computed_tokens = 0
        req.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(req)

    # -- leaving --------------------------------------------------------------------------------------
    def finish(self, req: Request, reason: str) -> None:
        """The request is done (stop, length, abort): free its blocks now and drop it from the queues."""
        if req.status is RequestStatus.RUNNING:
            self.running.remove(req)
            self.manager.free_request(req.request_id)
        elif req in self.waiting:
            self.waiting.remove(req)
        req.status = RequestStatus.FINISHED
        req.finish_reason = reason
