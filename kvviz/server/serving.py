"""The bridge from HTTP requests to kvviz's one engine loop: admission (503), engine inputs, the stream
of outputs, and aborts when a client goes away.

``EngineLoop.submit`` returns a blocking iterator; one small thread per request moves its outputs onto
the event loop. Invariants: a request that leaves this module unfinished (client gone, error, server
shutting down) is aborted in the engine, which frees its blocks; ``pending`` counts the API requests
submitted that have not produced an output yet (the waiting queue a 503 protects).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.requests import Request

from kvviz.errors import CodedError
from kvviz.server.config import ServerConfig
from kvviz.server.openai_errors import APIError, bad_request, from_coded

if TYPE_CHECKING:  # types only: the engine (torch) is imported when the first request needs it
    from transformers import PreTrainedTokenizerBase

    from kvviz.engine import EngineLoop, LLMEngine, RequestOutput, SamplingParams

_END = object()


RECENT = 200  # finished API requests kept for the pages


@dataclass(frozen=True)
class ApiRequest:
    """One finished API request as the pages show it: who sent it and what the cache gave it."""

    request_id: str
    client: str
    prompt_tokens: int
    cached_tokens: int
    output_tokens: int
    finish_reason: str | None
    ttft_s: float | None
    finished_at: float  # wall clock, seconds since the epoch


@dataclass(frozen=True)
class Job:
    """One generation the server asks the engine for."""

    request_id: str
    prompt_ids: list[int]
    params: SamplingParams
    cache_salt: str | None = None
    priority: int = 0
    client: str = ""


def new_request_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


class Serving:
    """The server's view of the engine loop (created on first use, so the app's process does not load
    the model before an API request needs it)."""

    def __init__(self, get_loop: Callable[[], EngineLoop], config: ServerConfig) -> None:
        self._get_loop = get_loop
        self._loop: EngineLoop | None = None
        self._lock = threading.Lock()
        self.config = config
        self.pending = 0
        self.recent: deque[ApiRequest] = deque(maxlen=RECENT)  # newest last
        self.on_finished: list[Callable[[RequestOutput], None]] = []  # called with each finished output
        # called once an API request's every job finished (stop or length): (job id, generated tokens) each
        self.on_request_finished: list[Callable[[list[tuple[str, int]]], None]] = []
        self.on_rejected: list[Callable[[], None]] = []  # called for each 503 (queue full)
        self.on_started: list[Callable[[EngineLoop], None]] = []  # called once with the loop, when it exists

    # ------------------------------------------------------------------ the engine
    @property
    def loop(self) -> EngineLoop:
        with self._lock:
            if self._loop is None:
                loop = self._get_loop()
                for hook in self.on_started:
                    hook(loop)
                self._loop = loop
            return self._loop

    @property
    def started(self) -> bool:
        return self._loop is not None

    @property
    def engine(self) -> LLMEngine:
        return self.loop.engine

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        return self.engine.tokenizer

    @property
    def max_model_len(self) -> int:
        return int(self.engine.max_model_len)

    # ------------------------------------------------------------------ checks at the edge
    def check_tokens(self, prompt_ids: list[int], max_tokens: int, param: str) -> None:
        """400 for a prompt + max_tokens over the context length (the engine checks the token ids)."""
        limit = self.max_model_len
        if len(prompt_ids) >= limit:
            raise bad_request(f"{param}: the prompt has {len(prompt_ids):,} tokens; the model's context is "
                              f"{limit:,} tokens, and at least one must be left for the answer", param)
        if len(prompt_ids) + max_tokens > limit:
            raise bad_request(f"max_tokens: {max_tokens:,} new tokens after a {len(prompt_ids):,}-token prompt "
                              f"exceed the model's context of {limit:,} tokens (at most {limit - len(prompt_ids):,})",
                              "max_tokens")

    def default_max_tokens(self, prompt_ids: list[int], cap: int) -> int:
        return max(1, min(cap, self.max_model_len - len(prompt_ids)))

    def admit(self, count: int = 1) -> None:
        """503 with Retry-After when ``count`` more would make over ``max_waiting`` API requests that wait
        for their first token (a request with n choices or several prompts counts each), as vLLM 0.33.0's
        ``--max-num-queued-reqs`` answers (``QueueOverflowError``: 503, type "Service Unavailable")."""
        if count > self.config.max_waiting:
            raise bad_request(f"n: this request asks for {count} sequences (n x prompts); this server lets at "
                              f"most {self.config.max_waiting} wait at once (--max-waiting)", "n")
        if self.pending + count > self.config.max_waiting:
            for hook in self.on_rejected:
                hook()
            raise APIError(503, f"the engine is busy: {self.pending} requests already wait for it; retry "
                           f"later or on another instance", err_type="Service Unavailable",
                           headers={"Retry-After": str(self.config.retry_after_s)})

    def reset_prefix_cache(self) -> bool:
        """Drop every cached block the engine does not use (through the loop, so between steps)."""
        return bool(self.loop.call(lambda engine: engine.reset_prefix_cache()))

    # ------------------------------------------------------------------ running
    async def stream(self, job: Job, request: Request | None = None, admitted: bool = False) -> AsyncIterator[Any]:
        """The engine's outputs for ``job`` (cumulative RequestOutput deltas, the last one finished).
        Aborts the request in the engine if this generator is left early or the client disconnects."""
        if not admitted:
            self.admit()
        aloop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        self.pending += 1
        waiting = True
        cancel = threading.Event()
        engine_loop = self.loop
        try:
            # submit and read in a thread: the engine loop's calls may wait for a running step
            threading.Thread(target=_pump, args=(engine_loop, job, cancel, aloop, queue), daemon=True,
                             name=f"kvviz-api {job.request_id[:20]}").start()
            watcher = asyncio.ensure_future(_abort_on_disconnect(request, engine_loop, job.request_id, cancel)) \
                if request else None
            finished = False
            try:
                while True:
                    item = await queue.get()
                    if item is _END:
                        break
                    if isinstance(item, BaseException):
                        if isinstance(item, CodedError) and waiting:
                            raise from_coded(item, "prompt")
                        if isinstance(item, RuntimeError) and waiting:  # the engine loop closed
                            raise APIError(503, f"the engine is not serving: {str(item)[:200]}")
                        raise item
                    if waiting:
                        waiting = False
                        self.pending -= 1
                    if item.finished:
                        finished = True
                        self.recent.append(ApiRequest(job.request_id, job.client, item.num_prompt_tokens,
                                                      item.num_cached_tokens, len(item.token_ids), item.finish_reason,
                                                      item.metrics.ttft_s, time.time()))
                        for hook in self.on_finished:
                            hook(item)
                    yield item
                    if finished:
                        break
            finally:
                if watcher is not None:
                    watcher.cancel()
                if not finished:
                    _abort_soon(engine_loop, job.request_id, cancel)
        finally:
            if waiting:
                self.pending -= 1

    async def stream_many(self, jobs: list[Job], request: Request | None = None) -> AsyncIterator[tuple[int, Any]]:
        """``(job index, output)`` of several jobs as they come (vLLM's n child requests and prompts of one
        API request): admitted together; all are aborted when the client leaves or this is left early."""
        done: dict[int, Any] = {}
        inner = self._stream_jobs(jobs, request)
        try:
            async for index, out in inner:
                if out.finished:
                    done[index] = out
                yield index, out
        finally:
            await inner.aclose()  # now, not at garbage collection: its cleanup aborts the engine requests
        if len(done) == len(jobs) and all(o.finish_reason != "abort" for o in done.values()):
            for hook in self.on_request_finished:
                hook([(job.request_id, len(done[i].token_ids)) for i, job in enumerate(jobs)])

    async def _stream_jobs(self, jobs: list[Job], request: Request | None) -> AsyncIterator[tuple[int, Any]]:
        self.admit(len(jobs))
        if len(jobs) == 1:
            async for out in self.stream(jobs[0], request, admitted=True):
                yield 0, out
            return
        queue: asyncio.Queue[tuple[int, Any]] = asyncio.Queue()

        async def pump(index: int, job: Job) -> None:
            try:
                async for out in self.stream(job, None, admitted=True):
                    queue.put_nowait((index, out))
            except Exception as exc:  # noqa: BLE001 - raised where the outputs are read
                queue.put_nowait((index, exc))
            finally:
                queue.put_nowait((index, _END))

        tasks = [asyncio.ensure_future(pump(i, job)) for i, job in enumerate(jobs)]
        gone = asyncio.ensure_future(_wait_disconnect(request)) if request else None
        left = len(jobs)
        try:
            while left:
                getter = asyncio.ensure_future(queue.get())
                waits = {getter} if gone is None else {getter, gone}
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                if not getter.done():  # the client left: every child is aborted below
                    getter.cancel()
                    return
                index, item = getter.result()
                if item is _END:
                    left -= 1
                elif isinstance(item, BaseException):
                    raise item
                else:
                    yield index, item
        finally:
            if gone is not None:
                gone.cancel()
            for task in tasks:  # a child still running is aborted by its own stream's cleanup
                task.cancel()

    async def complete_many(self, jobs: list[Job], request: Request | None = None) -> list[Any]:
        """The finished RequestOutput of each job, in the jobs' order (non-streaming)."""
        last: dict[int, Any] = {}
        async for index, out in self.stream_many(jobs, request):
            last[index] = out
        if len(last) != len(jobs) or not all(o.finished for o in last.values()):
            raise APIError(503, "the engine stopped before the request finished")
        return [last[i] for i in range(len(jobs))]

    async def complete(self, job: Job, request: Request | None = None) -> RequestOutput:
        """The finished RequestOutput of ``job`` (non-streaming)."""
        last = None
        async for out in self.stream(job, request):
            last = out
        if last is None or not last.finished:
            raise APIError(503, "the engine stopped before the request finished")
        return last


def _abort_soon(loop: EngineLoop, request_id: str, cancel: threading.Event) -> None:
    """Abort in a thread (the call may wait for a running step); the pump aborts again if its submit was
    still waiting (``cancel`` tells it the client is gone)."""
    cancel.set()
    threading.Thread(target=loop.abort, args=(request_id,), daemon=True, name="kvviz-api abort").start()


def _pump(loop: EngineLoop, job: Job, cancel: threading.Event, aloop: asyncio.AbstractEventLoop,
          queue: asyncio.Queue[Any]) -> None:
    """Submit one request (the call waits for the loop to admit it); its outputs then go from the engine loop's
    thread onto the event loop, ``_END`` after the last."""
    def put(item: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the event loop is gone: nobody is listening
            aloop.call_soon_threadsafe(queue.put_nowait, item)

    def sink(item: Any) -> None:  # in the engine loop's thread, once per output: no thread woken per token
        put(item)
        if isinstance(item, BaseException) or item.finished:
            put(_END)

    try:
        loop.submit(job.request_id, job.prompt_ids, job.params, cache_salt=job.cache_salt, priority=job.priority,
                    client=job.client, sink=sink)
    except BaseException as exc:  # noqa: BLE001 - handed to the request's coroutine, which decides
        put(exc)
        put(_END)
        return
    if cancel.is_set():  # the client left while the submit waited: the earlier abort found nothing
        loop.abort(job.request_id)


async def _wait_disconnect(request: Request) -> None:
    """Return when the client's ``http.disconnect`` arrives."""
    while (await request.receive()).get("type") != "http.disconnect":
        pass


async def _abort_on_disconnect(request: Request, loop: EngineLoop, request_id: str, cancel: threading.Event) -> None:
    """Wait for the client's ``http.disconnect`` and abort its request (frees its blocks at once)."""
    while True:
        message = await request.receive()
        if message.get("type") == "http.disconnect":
            _abort_soon(loop, request_id, cancel)
            return
