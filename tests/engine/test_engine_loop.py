"""EngineLoop: streams from several threads get every delta and one finished output; abort ends a stream."""

from __future__ import annotations

import threading
import time

import pytest
from tiny_llm import greedy_reference, tiny_lm

from kvviz.engine import EngineConfig, EngineLoop, LLMEngine, SamplingParams
from kvviz.engine.scheduler import SchedulerOutput
from kvviz.engine.steps import StepWork
from kvviz.errors import CodedError


def test_streams_from_threads_and_abort():
    lm = tiny_lm(seed=3)
    loop = EngineLoop(LLMEngine(lm, EngineConfig(block_size=4, kv_cache_bytes=64 * 4 * 256)))
    try:
        prompts = [[1 + i, 2, 3, 4, 5, 6 + i] for i in range(4)]
        results: dict[int, list] = {}

        def client(i: int) -> None:
            results[i] = list(loop.submit(f"t{i}", prompts[i], SamplingParams(max_tokens=12, ignore_eos=True)))

        threads = [threading.Thread(target=client, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=240)  # ends a hang only; every client must have finished before anything is checked
        assert not any(t.is_alive() for t in threads) and sorted(results) == [0, 1, 2, 3]
        for i, outs in results.items():
            assert outs[-1].finished and sum(len(o.new_token_ids) for o in outs) == 12
            assert outs[-1].token_ids == greedy_reference(lm, prompts[i], 12)
            assert "".join(o.delta_text for o in outs) == outs[-1].text
        # Once "long" has produced a token the engine stands still (steps compute nothing) until the test has
        # aborted it: the abort, not the machine's speed, decides how the stream ends.
        engine, emitted = loop.engine, set()
        real_begin, real_finish = engine.begin_step, engine.finish_step

        def begin_until_aborted():
            if "long" in emitted and "long" in engine.requests:
                return StepWork(SchedulerOutput(step=-1), [], [], time.time(), time.monotonic())
            return real_begin()

        def finish_noting(work, logits):
            outputs = real_finish(work, logits)
            emitted.update(o.request_id for o in outputs)
            return outputs

        engine.begin_step, engine.finish_step = begin_until_aborted, finish_noting
        stream = loop.submit("long", [7, 8, 9], SamplingParams(max_tokens=4000, ignore_eos=True))
        first = next(iter(stream))
        assert not first.finished
        stream.abort()
        final: list = []
        waiter = threading.Thread(target=lambda: final.append(stream.result()), daemon=True)
        waiter.start()
        waiter.join(timeout=240)  # a lost abort would leave the stream open forever: fail, don't hang
        assert final and final[0].finish_reason == "abort"
        # Read through the loop's thread (under its lock): the removal has happened by then, whatever order
        # the loop delivers the final output and drops the request in.
        assert loop.call(lambda e: e.stats().num_running) == 0
        assert loop.call(lambda e: e.pool.get_num_free_blocks()) == loop.engine.num_blocks - 1
    finally:
        loop.close()


def test_submissions_during_a_step_share_the_next_step():
    """A submit never waits behind a running step's lock: requests that arrive while the engine steps are
    all added before the next step (the server's HTTP requests arrive that way)."""
    lm = tiny_lm(seed=3)
    engine = LLMEngine(lm, EngineConfig(block_size=4, kv_cache_bytes=64 * 4 * 256))
    in_step, release = threading.Event(), threading.Event()
    real_begin = engine.begin_step

    def held_begin():
        if not release.is_set():
            in_step.set()
            release.wait(30)
        return real_begin()

    engine.begin_step = held_begin  # the first step stays running until the test releases it
    loop = EngineLoop(engine)
    try:
        first = threading.Thread(target=lambda: loop.submit("first", [1, 2, 3], SamplingParams(max_tokens=2)).result())
        first.start()
        assert in_step.wait(30)
        streams: dict[int, object] = {}
        threads = [threading.Thread(target=lambda i=i: streams.__setitem__(
            i, loop.submit(f"late{i}", [4 + i, 5, 6], SamplingParams(max_tokens=2)))) for i in range(5)]
        for t in threads:
            t.start()
        while len(loop._intake) < 5:  # every late submission is waiting in the intake, none behind the lock
            in_step.wait(0.01)
        release.set()
        for t in threads:
            t.join(30)
        first.join(30)
        assert all(s.result().finished for s in streams.values())
        late_steps = [r for r in engine.steps if r.prefill_tokens >= 15]
        assert late_steps and late_steps[0].num_requests >= 5  # the five late prompts in one step
    finally:
        loop.close()


def test_readers_do_not_wait_for_the_forward_pass_but_call_and_abort_do():
    """``read`` and ``stats`` (a room's cache peek, the metrics) see the state as scheduled while the model
    computes; ``call`` (changes, K/V reads) and ``abort`` run between steps. A peek that waited for the
    forward pass let one early prompt start a step of its own while the room's other prompts queued
    behind it, step after step."""
    lm = tiny_lm(seed=6)
    engine = LLMEngine(lm, EngineConfig(block_size=4, kv_cache_bytes=64 * 4 * 256))
    in_forward, release = threading.Event(), threading.Event()
    real_execute = engine.execute_step

    def held_execute(work):
        if not release.is_set():
            in_forward.set()
            release.wait(60)
        return real_execute(work)

    engine.execute_step = held_execute
    loop = EngineLoop(engine)
    try:
        stream: list = []
        client = threading.Thread(target=lambda: stream.append(
            loop.submit("r", [1, 2, 3, 4, 5], SamplingParams(max_tokens=2)).result()))
        client.start()
        assert in_forward.wait(60)
        seen: dict[str, object] = {}
        reader = threading.Thread(target=lambda: seen.update(
            running=loop.read(lambda e: [r.request_id for r in e.scheduler.running]), stats=loop.stats()))
        reader.start()
        reader.join(60)  # returns while the forward pass is still held
        assert not release.is_set() and seen["running"] == ["r"] and seen["stats"].num_running == 1
        called = threading.Event()
        caller = threading.Thread(target=lambda: (loop.call(lambda e: None), called.set()))
        caller.start()
        assert in_forward.is_set() and not called.is_set()  # it cannot have run: the step lock is held
        release.set()
        caller.join(60)
        client.join(60)
        assert called.is_set() and stream and stream[0].finished
    finally:
        release.set()
        loop.close()


def test_submit_many_starts_every_request_in_the_same_step():
    lm = tiny_lm(seed=4)
    loop = EngineLoop(LLMEngine(lm, EngineConfig(block_size=4, kv_cache_bytes=64 * 4 * 256)))
    try:
        streams = loop.submit_many([(f"m{i}", [3 + i, 4, 5, 6, 7], SamplingParams(max_tokens=3)) for i in range(4)],
                                   client="t")
        assert all(s.result().finished for s in streams)
        firsts = {min(r.step for r in loop.engine.steps if any(i.request_id == f"m{k}" for i in r.items))
                  for k in range(4)}
        assert len(firsts) == 1
        assert {i.client for r in loop.engine.steps for i in r.items} == {"t"}
        with pytest.raises(CodedError):  # one bad prompt: none of them stays in the engine
            loop.submit_many([("ok", [1, 2], None), ("bad", [], None)])
        assert loop.wait_idle(30) and not loop.engine.requests
    finally:
        loop.close()


def test_an_engine_loop_shortens_the_gil_switch_interval():
    """A step's many short torch calls each give the GIL up: at Python's 5 ms default, a thread running
    Python beside the loop made each wait up to 5 ms (kvviz.engine.loop.ENGINE_SWITCH_INTERVAL_S)."""
    import sys

    from kvviz.engine.loop import ENGINE_SWITCH_INTERVAL_S

    before = sys.getswitchinterval()
    sys.setswitchinterval(0.005)  # Python's default, whatever an earlier test left
    loop = EngineLoop(LLMEngine(tiny_lm(seed=5), EngineConfig(block_size=4, kv_cache_bytes=64 * 4 * 256)))
    try:
        assert sys.getswitchinterval() <= ENGINE_SWITCH_INTERVAL_S
    finally:
        loop.close()
        sys.setswitchinterval(min(before, ENGINE_SWITCH_INTERVAL_S))


def test_a_sink_gets_every_output_in_the_loop_thread_and_the_stream_queue_none():
    lm = tiny_lm(seed=5)
    loop = EngineLoop(LLMEngine(lm, EngineConfig(block_size=4, kv_cache_bytes=64 * 4 * 256)))
    try:
        got: list = []
        threads: set[str] = set()
        done = threading.Event()

        def sink(item) -> None:
            got.append(item)
            threads.add(threading.current_thread().name)
            if isinstance(item, BaseException) or item.finished:
                done.set()

        prompt = [3, 1, 4, 1, 5, 9]
        stream = loop.submit("sunk", prompt, SamplingParams(max_tokens=7, ignore_eos=True), sink=sink)
        assert done.wait(timeout=240)
        assert threads == {"kvviz-engine"} and stream._queue.empty()
        assert [o.finished for o in got] == [False] * (len(got) - 1) + [True]
        assert got[-1].token_ids == greedy_reference(lm, prompt, 7)
        assert "".join(o.delta_text for o in got) == got[-1].text
    finally:
        loop.close()


def test_a_loop_without_its_own_thread_steps_in_its_owners_thread_and_close_drains_aborts():
    lm = tiny_lm(seed=7)
    loop = EngineLoop(LLMEngine(lm, EngineConfig(block_size=4, kv_cache_bytes=64 * 4 * 256)), own_thread=False)
    results: dict[str, list] = {}
    stepping: set[str] = set()
    real_step = loop._step

    def step() -> bool:
        stepping.add(threading.current_thread().name)
        return real_step()

    loop._step = step  # type: ignore[method-assign]

    def client(rid: str, max_tokens: int) -> None:
        results[rid] = list(loop.submit(rid, [2, 7, 1, 8, 2, 8], SamplingParams(max_tokens=max_tokens,
                                                                              ignore_eos=True)))

    short = threading.Thread(target=client, args=("short", 5))
    short.start()
    loop.run_here(until=lambda: "short" in results)  # returns once the short request's stream has ended
    assert stepping == {threading.current_thread().name}
    assert results["short"][-1].token_ids == greedy_reference(lm, [2, 7, 1, 8, 2, 8], 5)
    endless = threading.Thread(target=client, args=("endless", 10_000))
    endless.start()
    loop.run_here(until=lambda: loop.engine.has_unfinished_requests() and bool(loop.engine.steps))
    loop.close()  # aborts what is left and delivers the abort, here: nobody else steps this loop
    endless.join(timeout=60)
    assert not endless.is_alive() and results["endless"][-1].finish_reason == "abort"
    threaded = EngineLoop(LLMEngine(lm, EngineConfig(block_size=4, kv_cache_bytes=64 * 4 * 256)))
    try:
        with pytest.raises(RuntimeError):
            threaded.run_here(lambda: True)  # a loop with its own thread is stepped only there
    finally:
        threaded.close()
