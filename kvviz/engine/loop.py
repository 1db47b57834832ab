"""EngineLoop: a thread-safe serving wrapper (vLLM's AsyncLLM in spirit): one background thread steps the
engine while requests are unfinished; each submitted request gets a stream of its output deltas.

Invariant: only the loop thread steps the engine and calls ``add_request`` (submissions wait in an intake
list, admitted between steps). Two locks, always taken in this order: the step lock, held by the loop
thread for a whole step and by ``call`` and ``abort`` (they run between steps); the state lock, held for
every change of the engine's state and by ``read`` and ``stats``, but not during the forward pass, so a
reader waits at most for a schedule or a sampling, never for the model. Every stream ends with a finished
output.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from kvviz.engine.engine import LLMEngine
from kvviz.engine.request import EngineStats, RequestOutput
from kvviz.engine.sampling import SamplingParams
from kvviz.engine.threads import StepThreads, default_policy

#: Python's GIL switch interval (s) once an engine loop runs in the process. A step makes hundreds of short
#: torch calls and gives the GIL up in each; at Python's default of 5 ms, any thread running Python beside
#: it (a page script, the web server) makes each call wait up to 5 ms to get it back: a 263-token prefill
#: took 11 s instead of 0.6 s beside one busy thread. vLLM runs its engine core in a process of its own.
ENGINE_SWITCH_INTERVAL_S = 1e-4
#: The client name of K/V captures (the pages' prefills) in the engine's step records and recent hits.
CAPTURE_CLIENT = "kv capture"


def shorten_gil_switch() -> None:
    """Lower the process's GIL switch interval to ``ENGINE_SWITCH_INTERVAL_S`` (never raise it)."""
    if sys.getswitchinterval() > ENGINE_SWITCH_INTERVAL_S:
        sys.setswitchinterval(ENGINE_SWITCH_INTERVAL_S)


#: Receives a request's outputs (or the error that ended it) in the loop thread, instead of its stream's queue
OutputSink = Callable[[RequestOutput | BaseException], None]


class RequestStream:
    """Iterate to receive a request's ``RequestOutput`` deltas; the last one has ``finished``. With a ``sink``
    every output goes to it instead (called in the loop thread; it must not block) and the stream is not
    iterated: a server hands outputs to its event loop without a thread woken per token."""

    def __init__(self, loop: EngineLoop, request_id: str, sink: OutputSink | None = None) -> None:
        self.request_id = request_id
        self._loop = loop
        self._queue: queue.Queue[RequestOutput | BaseException] = queue.Queue()
        self._sink = sink
        self.finished = False

    def _put(self, item: RequestOutput | BaseException) -> None:
        if self._sink is not None:
            self._sink(item)
        else:
            self._queue.put(item)

    def __iter__(self) -> Iterator[RequestOutput]:
        while not self.finished:
            item = self._queue.get()
            if isinstance(item, BaseException):
                self.finished = True
                raise item
            self.finished = item.finished
            yield item

    def result(self) -> RequestOutput:
        """Wait for the end; the final output (all tokens and text)."""
        outputs = list(self)
        return outputs[-1]

    def abort(self) -> None:
        self._loop.abort(self.request_id)


@dataclass
class _Intake:
    """A submitted request waiting for the loop thread to add it between two steps."""

    request_id: str
    prompt_token_ids: list[int]
    params: SamplingParams | None
    kwargs: dict
    stream: RequestStream
    done: threading.Event = field(default_factory=threading.Event)
    arrival_time: float = field(default_factory=time.monotonic)  # when submitted (vLLM's arrival_time)
    error: BaseException | None = None


class EngineLoop:
    """Owns an engine and the one thread that steps it. Submissions wait in an intake list (never behind a
    running step's lock) and are all added between two steps, so requests that arrive during a step share
    the next one."""

    def __init__(self, engine: LLMEngine, threads: StepThreads | None = None, *, own_thread: bool = True) -> None:
        self.engine = engine
        self.threads = threads or StepThreads(default_policy())  # torch threads per step, by its size
        self._step_lock = threading.Lock()  # a whole step; ``call`` and ``abort`` take it (between steps)
        self._lock = threading.Lock()  # the engine's state: every change, and ``read`` (not the forward pass)
        self._idle = threading.Condition(self._lock)  # notified when no request is left unfinished
        self._intake_lock = threading.Lock()  # held for an append or a drain only
        self._intake: list[_Intake] = []
        self._work = threading.Event()  # set when there is something to admit, abort or step
        self._streams: dict[str, RequestStream] = {}
        self._closed = False
        shorten_gil_switch()
        self._thread: threading.Thread | None = None  # None: the owner steps it (``run_here``)
        if own_thread:
            self._thread = threading.Thread(target=self._run, name="kvviz-engine", daemon=True)
            self._thread.start()

    def submit(self, request_id: str, prompt_token_ids: list[int], params: SamplingParams | None = None, *,
               cache_salt: str | None = None, priority: int = 0, client: str = "",
               capture_kv: bool = False, sink: OutputSink | None = None) -> RequestStream:
        """Queue a request (CodedError for bad input, once the loop thread tried to add it) and return its
        stream; waits at most until the running step ends. ``capture_kv`` as in ``LLMEngine.add_request``;
        ``sink`` as in ``RequestStream``."""
        item = _Intake(request_id, prompt_token_ids, params,
                       {"cache_salt": cache_salt, "priority": priority, "client": client, "capture_kv": capture_kv},
                       RequestStream(self, request_id, sink))
        with self._intake_lock:
            if self._closed:
                raise RuntimeError("the engine loop is closed")
            self._intake.append(item)
        self._work.set()
        item.done.wait()
        if item.error is not None:
            raise item.error
        return item.stream

    def submit_many(self, requests: Sequence[tuple[str, list[int], SamplingParams | None]], *,
                    client: str = "") -> list[RequestStream]:
        """Queue several (request id, prompt token ids, params) at once: the loop thread adds them all
        between the same two steps, so they start in the same step. On a CodedError for one of them the
        others are aborted and the error is raised."""
        items = [_Intake(rid, ids, params, {"cache_salt": None, "priority": 0, "client": client},
                         RequestStream(self, rid)) for rid, ids, params in requests]
        with self._intake_lock:
            if self._closed:
                raise RuntimeError("the engine loop is closed")
            self._intake.extend(items)
        self._work.set()
        for item in items:
            item.done.wait()
        failed = [item.error for item in items if item.error is not None]
        if failed:
            for item in items:
                if item.error is None:
                    self.abort(item.request_id)
            raise failed[0]
        return [item.stream for item in items]

    def capture_kv(self, prompt_token_ids: list[int], *, skip_reading_prefix_cache: bool = True,
                   cache_salt: str | None = None, client: str = CAPTURE_CLIENT) -> RequestOutput:
        """Prefill ``prompt_token_ids`` as one request (``max_tokens=1``) and wait for its final output: its
        K/V read from its blocks (``kv``, ``kvviz.engine.capture``) and the last position's logits
        (``logits``). ``skip_reading_prefix_cache`` (default): every position is computed in this request,
        none read from the prefix cache. Batched with whatever else the engine runs meanwhile."""
        params = SamplingParams(max_tokens=1, return_logits=True, skip_reading_prefix_cache=skip_reading_prefix_cache)
        request_id = f"capture-{uuid.uuid4().hex[:12]}"
        out = self.submit(request_id, list(prompt_token_ids), params, cache_salt=cache_salt, client=client,
                          capture_kv=True).result()
        if out.kv is None or out.logits is None:  # aborted (the loop closed, a failed step)
            raise RuntimeError(f"the engine finished {request_id} without its K/V ({out.finish_reason})")
        return out

    def capture_kv_alone(self, prompts: Sequence[list[int]], *, timeout_s: float) -> list[RequestOutput] | None:
        """``capture_kv`` of each prompt in turn, each in steps with no other request (between two steps of the
        loop, once no request is unfinished, holding its locks, as the timing probe runs): equal prompts give
        bit-equal K/V, whatever else the engine serves. None when the engine is never quiet within
        ``timeout_s`` (nothing was added)."""
        deadline = time.monotonic() + timeout_s
        while True:
            outs = self.call(lambda engine: _captures_alone(engine, prompts))
            left = deadline - time.monotonic()
            if outs is not None or left <= 0:
                return outs
            self.wait_idle(min(left, 1.0))

    def abort(self, request_id: str) -> None:
        with self._step_lock, self._lock:
            self.engine.abort_request(request_id)
        self._work.set()

    def stats(self) -> EngineStats:
        return self.read(lambda e: e.stats())

    def call(self, fn):
        """Run ``fn(engine)`` between two steps, alone: it may change the engine or read its K/V memory."""
        with self._step_lock, self._lock:
            return fn(self.engine)

    def read(self, fn):
        """Run ``fn(engine)``, which only reads the engine's state (not its K/V), without waiting for a
        forward pass: during one it sees the state as the step was scheduled."""
        with self._lock:
            return fn(self.engine)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no request is unfinished; False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._intake and not self.engine.has_unfinished_requests(),
                                       timeout)

    def close(self) -> None:
        with self._intake_lock:
            self._closed = True
        with self._step_lock, self._lock:
            for rid in list(self._streams):
                self.engine.abort_request(rid)
        self._work.set()
        if self._thread is None:  # stepped by its owner, who called this after ``run_here``: drain the aborts here
            with self._step_lock:
                while self._step():
                    pass
            self.threads.restore()
            return
        self._thread.join(timeout=30)
        if not self._thread.is_alive():
            self.threads.restore()

    def run_here(self, until: Callable[[], bool], poll_s: float = 0.1) -> None:
        """Step the engine in the calling thread (a loop built with ``own_thread=False``) until ``until()`` is
        true, checked between steps and every ``poll_s`` when idle. For a serving process's main thread:
        libgomp lets a team's idle threads spin only while the process counts no more OpenMP threads than
        CPUs, and the first thread always counts, so a team of all cores led by another thread never spins
        (a 1,024-token prefill on two threads took 0.71 s there, 0.60 s in the main thread)."""
        if self._thread is not None:
            raise RuntimeError("this engine loop steps in its own thread")
        self._run(until, poll_s)

    def _admit(self) -> None:
        """Add every waiting submission (under ``_lock``, between steps) and release its caller."""
        with self._intake_lock:
            items, self._intake = self._intake, []
        for item in items:
            try:
                self.engine.add_request(item.request_id, item.prompt_token_ids, item.params,
                                        arrival_time=item.arrival_time, **item.kwargs)
                self._streams[item.request_id] = item.stream
            except BaseException as exc:  # noqa: BLE001 - raised in the submitting thread
                item.error = exc
            item.done.set()

    def _run(self, until: Callable[[], bool] = lambda: False, poll_s: float | None = None) -> None:
        """Step while there is work, until the loop is closed and drained or ``until()`` (checked between
        steps, and every ``poll_s`` while idle; None: only when work comes)."""
        while not until():
            if not self._work.wait(poll_s):
                continue
            with self._step_lock:
                if not self._step():
                    return
            time.sleep(0)  # between steps, let a thread waiting for a lock (abort, stats, a view) take it

    def _step(self) -> bool:
        """Admit, then one engine step in its three parts, the forward pass outside the state lock; False
        once the loop is closed and nothing is left."""
        with self._lock:
            self._work.clear()  # before the drain: a later submission sets it again
            self._admit()
            if not self.engine.has_unfinished_requests():
                self._idle.notify_all()
                with self._intake_lock:
                    return not (self._closed and not self._intake)
            try:
                work = self.engine.begin_step()
            except BaseException as exc:  # noqa: BLE001 - every waiting stream learns of the failure
                self._fail(exc)
                return True
        self.threads.before_step(work.plan.num_batched_tokens)
        try:
            logits = self.engine.execute_step(work)  # readers (``read``, ``stats``) may run meanwhile
        except BaseException as exc:  # noqa: BLE001
            with self._lock:
                self._fail(exc)
            return True
        with self._lock:
            try:
                self._deliver(self.engine.finish_step(work, logits))
            except BaseException as exc:  # noqa: BLE001
                self._fail(exc)
                return True
            self._after_step()
        return True

    def _fail(self, exc: BaseException) -> None:
        """Under the state lock: every waiting stream gets ``exc`` and its request is aborted."""
        for rid, stream in list(self._streams.items()):
            stream._put(exc)
            self.engine.abort_request(rid)
        self._streams.clear()
        self.engine.step()  # drains the abort outputs
        self._after_step()

    def _deliver(self, outputs: list[RequestOutput]) -> None:
        for out in outputs:
            stream = self._streams.get(out.request_id)
            if stream is not None:
                stream._put(out)
                if out.finished:
                    del self._streams[out.request_id]

    def _after_step(self) -> None:
        if self.engine.has_unfinished_requests():
            self._work.set()  # keep stepping
        else:
            self._idle.notify_all()


def _captures_alone(engine: LLMEngine, prompts: Sequence[list[int]]) -> list[RequestOutput] | None:
    """Under the loop's locks: None when a request is unfinished; else each prompt's capture, stepped alone."""
    if engine.has_unfinished_requests():
        return None
    params = SamplingParams(max_tokens=1, return_logits=True, skip_reading_prefix_cache=True)
    outs = []
    for ids in prompts:
        request_id = f"capture-{uuid.uuid4().hex[:12]}"
        engine.add_request(request_id, list(ids), params, client=CAPTURE_CLIENT, capture_kv=True)
        out: RequestOutput | None = None
        try:
            while out is None:
                out = next((o for o in engine.step() if o.request_id == request_id and o.finished), None)
        finally:
            if out is None:  # a failed step: free its blocks, drain the abort's output
                engine.abort_request(request_id)
                engine.step()
        outs.append(out)
    return outs


_LOOP: EngineLoop | None = None
_LOOP_LOCK = threading.Lock()


def get_engine_loop() -> EngineLoop:
    """The process-wide engine loop over the default model (loaded once), created on first use; its host tier
    is ``KVVIZ_KV_OFFLOADING_SIZE`` GiB (off by default), evicting by ``KVVIZ_KV_OFFLOADING_EVICTION_POLICY``."""
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None:
            from kvviz.engine.config import EngineConfig
            from kvviz.model import load_model
            from kvviz.settings import kv_offloading_eviction_policy_default, kv_offloading_size_default

            config = EngineConfig(kv_offloading_size=kv_offloading_size_default(),  # the host tier: off unless set
                                  kv_offloading_eviction_policy=kv_offloading_eviction_policy_default())
            _LOOP = EngineLoop(LLMEngine(load_model(), config))
        return _LOOP


def started_engine_loop() -> EngineLoop | None:
    """The process-wide engine loop if something already created it, else None (creates nothing)."""
    return _LOOP
