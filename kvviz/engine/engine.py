"""LLMEngine: the synchronous step loop (vLLM v1's ``LLMEngine`` + ``EngineCore`` in one object).

``step`` = schedule (``Scheduler``) -> forward (``ModelRunner`` over ``PagedKVMemory``) -> sample -> detokenize
-> stop checks -> free finished requests -> publish the step's vLLM KV events; ``begin_step``,
``execute_step`` and ``finish_step`` are its three parts (vLLM's schedule, execute_model,
update_from_output), so a serving loop can let readers in during the forward pass. Invariant: the block pool,
free queue, block hashes and events are the mirror's ``KVCacheManager``'s; the K/V live only in the paged memory.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from kvviz.engine.capture import read_request_kv
from kvviz.engine.config import EngineConfig, check_budget_holds_max_model_len
from kvviz.engine.detokenizer import Detokenizer
from kvviz.engine.kv_memory import KVLayout, PagedKVMemory, num_blocks_for
from kvviz.engine.offload import HostTier
from kvviz.engine.request import EngineStats, Request, RequestOutput, RequestStatus
from kvviz.engine.runner import ModelRunner, SeqInput
from kvviz.engine.sampling import Sampler, SamplingParams, make_generator, token_logprob
from kvviz.engine.scheduler import Scheduler, SchedulerOutput
from kvviz.engine.stats import IterationStats
from kvviz.engine.steps import StepItem, StepRecord, StepWork, step_kind
from kvviz.errors import CodedError
from kvviz.mirror.events import EventKind
from kvviz.mirror.hashing import validate_token_ids
from kvviz.mirror.kv_events import KVCacheEvent, KVEventBatch
from kvviz.mirror.manager import KVCacheManager

if TYPE_CHECKING:  # types only: kvviz.model is not imported at run time
    from kvviz.model.loader import LoadedModel

MAX_REQUEST_ID_CHARS = 256
KVEventCallback = Callable[[KVEventBatch], None]
StatsCallback = Callable[[IterationStats], None]


def engine_supports(lm: LoadedModel) -> str | None:
    """None when the engine can run ``lm`` (the native Llama decoder), else why not."""
    if getattr(lm.info, "backend", "") != "native":
        return (f"the engine runs the native Llama decoder; {lm.info.name} is loaded through transformers "
                f"({lm.info.architecture}): load a Llama-family model with backend 'native'")
    return None


class LLMEngine:
    """One model, one paged K/V memory, one mirror block manager, one scheduler."""

    def __init__(self, lm: LoadedModel, config: EngineConfig | None = None) -> None:
        why_not = engine_supports(lm)
        if why_not is not None:
            raise CodedError(why_not, "engine_unsupported_model", model=lm.info.name,
                             architecture=lm.info.architecture or "?")
        self.lm, self.config = lm, config or EngineConfig()
        self.tokenizer = lm.tokenizer
        info = lm.info
        layout = KVLayout(info.num_layers, info.num_kv_heads, info.head_dim, info.element_size)
        bs = self.config.block_size
        num_blocks = num_blocks_for(self.config.kv_cache_bytes, bs, layout)
        self.memory = PagedKVMemory(num_blocks, bs, layout, lm.device, lm.torch_dtype)
        self.manager = KVCacheManager(num_blocks, bs, hash_name=self.config.hash_name, seed=self.config.hash_seed)
        self.pool = self.manager.block_pool
        self.events = self.manager.events
        self.host = self._host_tier(layout, lm.torch_dtype)  # vLLM's CPU offloading tier, or None
        self.scheduler = Scheduler(self.config, self.manager, self.host.pool if self.host is not None else None)
        self.runner = ModelRunner(lm, self.memory)
        self.sampler = Sampler()
        self.detokenizer = Detokenizer(self.tokenizer)
        model_limit = info.max_position_embeddings or 1 << 20
        self.max_model_len = min(self.config.max_model_len or model_limit, model_limit,
                                 (num_blocks - 1) * bs)
        check_budget_holds_max_model_len(self.config, self.max_model_len)
        self.eos_token_id = getattr(self.tokenizer, "eos_token_id", None)
        self.requests: dict[str, Request] = {}
        self.steps: list[StepRecord] = []  # the last MAX_STEP_RECORDS steps
        self._pending: list[RequestOutput] = []  # aborts reported by the next step
        self._subscribers: list[KVEventCallback] = []
        self._stats_subscribers: list[StatsCallback] = []
        self._events_published = 0
        self._block_tokens: dict[int, list[int]] = {}  # cached block id -> its tokens (from BlockStored)
        self._prompt_tokens = self._prompt_cached = self._generation_tokens = self._finished = self._aborted = 0
        self._prompt_cached_host = 0
        self.num_blocks_cached = self.num_blocks_evicted = 0  # device pool: blocks given a hash / evicted, totals
        # (request id, client, prompt tokens, cached from device, cached from host) of the last requests admitted
        self.recent_hits: deque[tuple[str, str, int, int, int]] = deque(maxlen=MAX_RECENT_HITS)
        self.chunk_logits: list[tuple[str, int, torch.Tensor]] | None = None  # tests: every chunk's logits

    def _host_tier(self, layout: KVLayout, dtype: torch.dtype) -> HostTier | None:
        size = self.config.kv_offloading_bytes
        if not size:
            return None
        try:
            return HostTier.sized(size, self.config.block_size, layout.num_layers, layout.num_kv_heads,
                                  layout.head_dim, dtype, self.config.kv_offloading_eviction_policy,
                                  pin_memory=self.memory.k[0].is_cuda)
        except ValueError as exc:
            raise CodedError(str(exc), "bad_engine_setting", name="kv_offloading_size",
                             value=repr(self.config.kv_offloading_size)[:40], high=1024) from None

    # -- sizes ----------------------------------------------------------------------------------------
    @property
    def num_blocks(self) -> int:
        return self.memory.num_blocks

    @property
    def block_size(self) -> int:
        return self.memory.block_size

    @property
    def kv_cache_bytes(self) -> int:
        return self.memory.nbytes

    # -- requests -------------------------------------------------------------------------------------
    def add_request(self, request_id: str, prompt_token_ids: list[int], params: SamplingParams | None = None, *,
                    cache_salt: str | None = None, priority: int = 0, client: str = "",
                    arrival_time: float | None = None, capture_kv: bool = False) -> None:
        """Queue a prompt; CodedError for a bad or duplicate id, bad tokens or a prompt that cannot fit.
        ``arrival_time`` (``time.monotonic``): when a caller received it (default: now). ``capture_kv``: its
        final output carries the K/V of its computed positions, read from its blocks before they are freed."""
        if not isinstance(request_id, str) or not request_id or len(request_id) > MAX_REQUEST_ID_CHARS:
            raise CodedError(f"request id must be a non-empty string of at most {MAX_REQUEST_ID_CHARS} "
                             f"characters, got {request_id!r:.60}", "bad_request_id", got=repr(request_id)[:40])
        if request_id in self.requests:
            raise CodedError(f"request {request_id!r} is already running", "request_running", id=request_id)
        if cache_salt is not None and (not isinstance(cache_salt, str) or not cache_salt):
            raise CodedError("cache_salt must be a non-empty string", "bad_cache_salt")
        if isinstance(priority, bool) or not isinstance(priority, int) or not -2**31 <= priority < 2**31:
            raise CodedError(f"priority must be an integer in -2**31..2**31-1, got {priority!r:.40}", "bad_priority",
                             value=repr(priority)[:40])
        tokens = list(validate_token_ids(prompt_token_ids))
        vocab = self.lm.info.vocab_size
        if max(tokens) >= vocab:
            raise CodedError(f"token id {max(tokens)} is outside the model's vocabulary (0..{vocab - 1})",
                             "token_out_of_vocab", value=max(tokens), high=vocab - 1)
        if len(tokens) >= self.max_model_len:
            raise CodedError(f"the prompt has {len(tokens):,} tokens; this engine holds at most "
                             f"{self.max_model_len - 1:,} (max_model_len {self.max_model_len:,})",
                             "prompt_too_long", tokens=len(tokens), high=self.max_model_len - 1)
        params = params or SamplingParams()
        now = time.monotonic()
        req = Request(request_id, tokens, params, min(now, arrival_time if arrival_time is not None else now),
                      self.manager.request_block_hashes(tokens, cache_salt), cache_salt, priority, client)
        req.metrics.queued_time = now
        req.capture_kv = bool(capture_kv)
        req.generator = make_generator(params)
        self.requests[request_id] = req
        self.scheduler.add_request(req)

    def abort_request(self, request_id: str) -> None:
        """Stop a request now and free its blocks; unknown or finished ids are ignored."""
        req = self.requests.pop(request_id, None)
        if req is None:
            return
        self.scheduler.finish(req, "abort")
        if self.host is not None:
            self.host.finish(request_id)
        req.metrics.finished_time = time.monotonic()
        self._aborted += 1
        self._pending.append(self._output(req, []))

    def has_unfinished_requests(self) -> bool:
        return self.scheduler.has_unfinished_requests() or bool(self._pending)

    # -- the step -------------------------------------------------------------------------------------
    def step(self) -> list[RequestOutput]:
        """One scheduler step; outputs of the requests that produced tokens, finished or were aborted."""
        work = self.begin_step()
        return self.finish_step(work, self.execute_step(work))

    def begin_step(self) -> StepWork:
        """The step's first part: schedule it (block allocation, prefix hits, preemption) and fix what the
        forward pass reads. Changes the engine's state."""
        outputs, self._pending = self._pending, []
        wall, started = time.time(), time.monotonic()
        plan = self.scheduler.schedule()
        seqs = [SeqInput(c.token_ids, c.start, self.manager.block_ids(c.request.request_id), c.samples)
                for c in plan.chunks]
        return StepWork(plan, seqs, outputs, wall, started)

    def execute_step(self, work: StepWork) -> torch.Tensor | None:
        """The forward pass of a begun step: writes the scheduled tokens' K/V into their blocks and returns
        the logits it samples from (every chunk's rows while ``chunk_logits`` records them). Reads only
        ``work`` and the K/V memory, so the engine's state may be read meanwhile (``EngineLoop.read``)."""
        if not work.seqs:
            return None
        if self.host is not None:  # host-tier hits: copy their K/V into the request's device blocks first
            for job in work.plan.loads:
                self.memory.copy_blocks_in(list(job.block_ids), *self.host.read(list(job.slots)))
        return self.runner.execute(work.seqs, all_logits=self.chunk_logits is not None)

    def finish_step(self, work: StepWork, logits: torch.Tensor | None) -> list[RequestOutput]:
        """The step's last part: sample, detokenize, stop checks, free finished requests, record the step
        and publish its KV events. Changes the engine's state."""
        plan, outputs = work.plan, work.outputs
        if self.host is not None and logits is not None:
            self._offload(plan)
        it = IterationStats()
        if plan.chunks and logits is not None:
            outputs.extend(self._sample(plan, logits, it))
        duration = time.monotonic() - work.started
        self._record(plan, duration, work.wall)
        total = plan.num_batched_tokens
        for c in plan.chunks:  # each request's share of the step's time, by its scheduled tokens
            m = c.request.metrics
            m.compute_share_s += duration * c.num_tokens / total
            m.max_step_requests = max(m.max_step_requests, len(plan.chunks))
        self._publish()
        if it.num_generation_tokens:  # vLLM observes a step that gave tokens
            for callback in list(self._stats_subscribers):
                callback(it)
        return outputs

    def _offload(self, plan: SchedulerOutput) -> None:
        """After the forward pass: release the step's loads, then copy each scheduled request's newly
        computed full blocks to the host tier (vLLM's offloading scheduler stores what a step computed)."""
        host = self.host
        assert host is not None
        for job in plan.loads:
            host.pool.complete_load(job.hashes)
        blocks = self.pool.blocks
        for c in plan.chunks:
            rid = c.request.request_id
            ids = self.manager.block_ids(rid)
            host.store(rid, c.start == c.num_cached_tokens, c.end, c.request.all_token_ids, ids,
                       [blocks[b].block_hash for b in ids], self.memory)

    def _sample(self, plan: SchedulerOutput, logits: torch.Tensor, it: IterationStats) -> list[RequestOutput]:
        if self.chunk_logits is not None:  # ``logits`` has a row per scheduled token: record, keep the last rows
            row, ends = 0, []
            for c in plan.chunks:
                self.chunk_logits.append((c.request.request_id, c.start, logits[row:row + c.num_tokens].cpu()))
                row += c.num_tokens
                if c.samples:
                    ends.append(row - 1)
            logits = logits[ends]
        sampling = [c for c in plan.chunks if c.samples]
        reqs = [c.request for c in sampling]
        tokens = self.sampler.sample(logits, [r.sampling_params for r in reqs], [r.generator for r in reqs])
        now = time.monotonic()
        outputs = []
        for row, (req, token) in enumerate(zip(reqs, tokens, strict=True)):
            if req.sampling_params.logprobs is not None:  # of the raw logits, before the output is built
                req.logprobs.append(token_logprob(logits[row], token, req.sampling_params.logprobs))
            previous = req.metrics.last_token_time
            outputs.append(self._append_token(req, token, now))
            self._count_token(it, req, previous, now)
            if req.sampling_params.return_logits:
                outputs[-1].logits = logits[row].detach().float().cpu()
        return outputs

    def _append_token(self, req: Request, token: int, now: float) -> RequestOutput:
        req.output_token_ids.append(token)
        self._generation_tokens += 1
        m = req.metrics
        m.num_output_tokens = len(req.output_token_ids)
        if m.first_token_time is None:
            m.first_token_time = now
        m.last_token_time = now
        p = req.sampling_params
        reason = None
        if token in p.stop_token_ids:  # its text is left out, as vLLM leaves out a stop token's
            new_text, reason, req.stop_reason = self.detokenizer.text(req.output_token_ids[:-1]), "stop", token
        else:
            new_text = self.detokenizer.text(req.output_token_ids)
            stop_at, stop_str = _find_stop(new_text, p.stop, len(req.text))
            if stop_at is not None:
                new_text, reason, req.stop_reason = new_text[:stop_at], "stop", stop_str
        req.text = new_text
        if reason is None and token == self.eos_token_id and not p.ignore_eos:
            reason = "stop"
        elif reason is None and (len(req.output_token_ids) >= p.max_tokens or req.num_tokens >= self.max_model_len):
            reason = "length"
        if reason is not None:
            if req.capture_kv:  # before its blocks are freed: no other request has written into them yet
                req.captured_kv = read_request_kv(self.memory, self.manager.block_ids(req.request_id),
                                                  req.num_computed_tokens)
            self.scheduler.finish(req, reason)
            if self.host is not None:
                self.host.finish(req.request_id)
            m.finished_time = now
            self.requests.pop(req.request_id, None)
            self._finished += 1
        return self._output(req, req.output_token_ids[req.sent_tokens:])

    def _count_token(self, it: IterationStats, req: Request, previous: float | None, now: float) -> None:
        """The step's metrics for one sampled token; the prompt counts at its first token (vLLM's rule)."""
        it.observe_token(req, previous, now)
        if previous is None:
            cached, host = max(req.num_cached_tokens, 0), req.num_cached_tokens_host
            self._prompt_tokens += req.num_prompt_tokens
            self._prompt_cached += cached
            self._prompt_cached_host += host
            self.recent_hits.append((req.request_id, req.client, req.num_prompt_tokens, cached - host, host))
        if req.is_finished:
            it.observe_finished(req, now)

    def _output(self, req: Request, new_ids: list[int]) -> RequestOutput:
        finished = req.is_finished
        text = req.text if finished else self.detokenizer.stable(req.text)
        delta = text[req.sent_text_len:] if len(text) > req.sent_text_len else ""
        req.sent_text_len = max(req.sent_text_len, len(text))
        req.sent_tokens = len(req.output_token_ids)
        return RequestOutput(req.request_id, list(new_ids), list(req.output_token_ids), text, delta, finished,
                             req.finish_reason, req.num_prompt_tokens, max(req.num_cached_tokens, 0),
                             req.num_preemptions, req.metrics,
                             logprobs=list(req.logprobs) if req.sampling_params.logprobs is not None else None,
                             stop_reason=req.stop_reason, num_cached_tokens_host=req.num_cached_tokens_host,
                             kv=req.captured_kv if finished else None)

    def _record(self, plan: SchedulerOutput, duration: float, wall: float) -> None:
        decode = sum(1 for c in plan.chunks if c.is_decode)
        prefill = plan.num_batched_tokens - decode
        items = tuple(StepItem(c.request.request_id, c.request.client, step_kind(c), c.start, c.num_tokens,
                               max(c.request.num_cached_tokens, 0)) for c in plan.chunks)
        self.steps.append(StepRecord(plan.step, prefill, decode, len(plan.chunks), tuple(plan.preempted), duration,
                                     wall, items))
        if len(self.steps) > 2 * MAX_STEP_RECORDS:
            del self.steps[:-MAX_STEP_RECORDS]

    # -- KV events ------------------------------------------------------------------------------------
    def subscribe_kv_events(self, callback: KVEventCallback) -> Callable[[], None]:
        """Call ``callback(KVEventBatch)`` after each step that changed the prefix cache; returns unsubscribe."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)
        return unsubscribe

    def _publish(self) -> None:
        new = self.events[self._events_published:]
        self._events_published = len(self.events)
        self._track_block_tokens(new)
        kv: list[KVCacheEvent] = [k for e in new for k in e.kv_events]
        if self.host is not None:  # the host tier's, after the device's (vLLM appends the connector's events)
            kv.extend(self.host.pool.take_events())
        if kv and self._subscribers:
            batch = KVEventBatch(ts=time.time(), events=kv)
            for callback in list(self._subscribers):
                callback(batch)
        if len(self.events) > MAX_EVENTS:  # published: keep the newest half, so memory stays bounded
            drop = len(self.events) - MAX_EVENTS // 2
            self.pool.drop_oldest_events(drop)
            self._events_published -= drop

    def _track_block_tokens(self, events) -> None:
        bs = self.block_size
        for e in events:
            if e.kind is EventKind.CACHE:
                self.num_blocks_cached += len(e.block_ids)
                for kv in e.kv_events:
                    for j, bid in enumerate(e.block_ids):
                        self._block_tokens[bid] = list(kv.token_ids[j * bs:(j + 1) * bs])
            elif e.kind is EventKind.EVICT:
                self.num_blocks_evicted += len(e.block_ids)
                for bid in e.block_ids:
                    self._block_tokens.pop(bid, None)
            elif e.kind is EventKind.RESET and e.code == "reset":
                self._block_tokens.clear()

    def subscribe_iteration_stats(self, callback: StatsCallback) -> Callable[[], None]:
        """Call ``callback(IterationStats)`` after each step that sampled a token; returns unsubscribe."""
        self._stats_subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._stats_subscribers:
                self._stats_subscribers.remove(callback)
        return unsubscribe

    # -- views ----------------------------------------------------------------------------------------
    def stats(self) -> EngineStats:
        s, pc = self.scheduler, self.scheduler.prefix_cache
        return EngineStats(
            num_running=len(s.running), num_waiting=len(s.waiting), num_preemptions=s.num_preemptions,
            kv_cache_usage=self.pool.get_usage(), prefix_cache_queries=pc.queries, prefix_cache_hits=pc.hits,
            num_blocks=self.num_blocks, block_size=self.block_size, kv_cache_bytes=self.kv_cache_bytes,
            prompt_tokens_total=self._prompt_tokens, generation_tokens_total=self._generation_tokens,
            requests_finished_total=self._finished, preempted_prefix_cache_queries=pc.preempted_queries,
            preempted_prefix_cache_hits=pc.preempted_hits, num_steps=s.num_steps,
            requests_aborted_total=self._aborted, prompt_tokens_cached_total=self._prompt_cached,
            external_prefix_cache_queries=pc.external_queries, external_prefix_cache_hits=pc.external_hits,
            prefix_cache_hits_host=pc.host_hits, prompt_tokens_cached_host_total=self._prompt_cached_host,
            host_kv_blocks=self.host.pool.num_blocks if self.host is not None else 0,
            host_kv_usage=self.host.pool.usage() if self.host is not None else 0.0,
        )

    def reset_prefix_cache(self) -> bool:
        ok = self.manager.reset_prefix_cache()
        if ok and self.host is not None:  # vLLM resets the offloading connector's cache with it
            self.host.pool.reset()
        self._publish()
        return ok

    def block_tables(self) -> dict[str, list[int]]:
        """Running requests' block ids (logical block i -> physical block id)."""
        return {r.request_id: self.manager.block_ids(r.request_id) for r in self.scheduler.running}

    def kv_of_block(self, block_id: int) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
        """The real K and V of one physical block ``[num_layers, block_size, kv_heads, head_dim]`` and the
        tokens it holds: all of them when cached, a running request's written ones, none when free."""
        if isinstance(block_id, bool) or not isinstance(block_id, int) or not 0 < block_id < self.num_blocks:
            raise CodedError(f"block id must be in 1..{self.num_blocks - 1}, got {block_id!r}", "bad_block_id",
                             high=self.num_blocks - 1)
        k, v = self.memory.block(block_id)
        return k, v, self._tokens_of_block(block_id)

    def _tokens_of_block(self, block_id: int) -> list[int]:
        bs = self.block_size
        for req in self.scheduler.running:
            ids = self.manager.block_ids(req.request_id)
            if block_id in ids:
                i = ids.index(block_id)
                return req.all_token_ids[i * bs:min((i + 1) * bs, req.num_computed_tokens)]
        if self.pool.blocks[block_id].block_hash is None:
            return []
        return list(self._block_tokens.get(block_id, []))


MAX_STEP_RECORDS = 512
#: The mirror manager's event log is cut to its newest half beyond this many events (each published once).
MAX_EVENTS = 20000
MAX_RECENT_HITS = 32  # requests kept in ``recent_hits``


def _find_stop(text: str, stops: tuple[str, ...], checked: int) -> tuple[int | None, str | None]:
    """Where the earliest stop string starts in ``text`` and which one it is (searching only where a new
    match can be); ``(None, None)`` when none is there."""
    found = [(i, s) for s in stops if (i := text.find(s, max(0, checked - len(s) + 1))) >= 0]
    return min(found, key=lambda f: f[0]) if found else (None, None)


__all__ = ["LLMEngine", "engine_supports", "RequestStatus"]
