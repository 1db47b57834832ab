"""The batching scheduler with a fake forward: gathering while a pass runs, the token budget, the maximum
wait of a lone request, alone requests, and errors reaching the right caller. Deterministic: passes are
held open with events and the scheduler's clock and wait are fakes (no wall-clock thresholds)."""

from __future__ import annotations

import threading

import pytest

from kvviz.model.batching import BatchScheduler, Origin, batch_origin, current_origin, settings_from_env


class FakeClock:
    """A clock that moves only when the scheduler waits (the fake wait adds its timeout)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    def wait(self, cond: threading.Condition, timeout: float) -> None:
        self.waits.append(timeout)
        self.now += timeout


class GatedForward:
    """A fake forward: records each pass's payloads; the first pass blocks until ``release``."""

    def __init__(self, block_first: bool = True) -> None:
        self.passes: list[list] = []
        self.entered = threading.Event()
        self.gate = threading.Event()
        if not block_first:
            self.gate.set()

    def __call__(self, payloads: list) -> list:
        self.passes.append(list(payloads))
        self.entered.set()
        self.gate.wait(10)
        return [ValueError(f"bad {p}") if str(p).startswith("bad") else f"out:{p}" for p in payloads]


def _submit_async(sched: BatchScheduler, payload, tokens: int, results: dict, origin: Origin | None = None):
    def run() -> None:
        try:
            results[payload] = sched.submit(payload, tokens, origin=origin)
        except BaseException as exc:  # noqa: BLE001 - checked by the test
            results[payload] = exc

    t = threading.Thread(target=run)
    t.start()
    return t


def _wait_queued(sched: BatchScheduler, n: int) -> None:
    for _ in range(10_000):
        if sched.queued() >= n:
            return
        threading.Event().wait(0.001)
    raise AssertionError(f"{sched.queued()} queued, expected {n}")


def _scheduler(fwd, clock: FakeClock, **kw) -> BatchScheduler:
    return BatchScheduler(fwd, clock=clock, wait=clock.wait, **kw)


def test_requests_arriving_during_a_pass_are_gathered_into_the_next():
    clock, fwd = FakeClock(), GatedForward()
    sched = _scheduler(fwd, clock, max_tokens=100, max_wait_s=0.004)
    results: dict = {}
    first = _submit_async(sched, "a", 10, results)
    assert fwd.entered.wait(10)
    others = [_submit_async(sched, p, 10, results) for p in ("b", "c", "d")]
    _wait_queued(sched, 3)
    fwd.gate.set()
    for t in [first, *others]:
        t.join(10)
    assert fwd.passes == [["a"], ["b", "c", "d"]]
    assert [results[p].result for p in "abcd"] == ["out:a", "out:b", "out:c", "out:d"]
    assert results["a"].batch_size == 1 and results["b"].batch_size == 3
    assert results["b"].pass_id == results["d"].pass_id != results["a"].pass_id
    history = sched.history()
    assert [r.batch_size for r in history] == [1, 3] and history[1].new_tokens == 30
    sched.close()


def test_token_budget_splits_passes_in_arrival_order():
    clock, fwd = FakeClock(), GatedForward()
    sched = _scheduler(fwd, clock, max_tokens=25, max_wait_s=0.004)
    results: dict = {}
    threads = [_submit_async(sched, "a", 1, results)]
    assert fwd.entered.wait(10)
    for p, n in (("b", 10), ("c", 10), ("d", 10), ("e", 40), ("f", 1)):
        threads.append(_submit_async(sched, p, n, results))
        _wait_queued(sched, len(threads) - 1)
    fwd.gate.set()
    for t in threads:
        t.join(10)
    # b+c fit 25, d would not; e alone exceeds the budget (a head always runs); f follows
    assert fwd.passes == [["a"], ["b", "c"], ["d"], ["e"], ["f"]]
    assert all(not isinstance(results[p], BaseException) for p in "abcdef")
    sched.close()


def test_a_lone_request_waits_exactly_the_maximum_wait():
    clock, fwd = FakeClock(), GatedForward(block_first=False)
    sched = _scheduler(fwd, clock, max_tokens=100, max_wait_s=0.004)
    done = sched.submit("x", 3)
    assert done.result == "out:x" and done.batch_size == 1
    assert done.wait_ms == pytest.approx(4.0)
    assert sum(clock.waits) == pytest.approx(0.004)
    sched.close()


def test_a_full_queue_does_not_wait():
    clock, fwd = FakeClock(), GatedForward()
    sched = _scheduler(fwd, clock, max_tokens=20, max_wait_s=1.0)
    results: dict = {}
    threads = [_submit_async(sched, "a", 50, results)]  # over the budget on its own: runs at once
    assert fwd.entered.wait(10)
    assert clock.waits == []
    fwd.gate.set()
    threads[0].join(10)
    assert results["a"].wait_ms == 0.0
    sched.close()


def test_alone_requests_never_share_a_pass():
    clock, fwd = FakeClock(), GatedForward()
    sched = _scheduler(fwd, clock, max_tokens=100, max_wait_s=0.004)
    results: dict = {}
    threads = [_submit_async(sched, "a", 1, results)]
    assert fwd.entered.wait(10)
    for p, origin in (("b", None), ("probe", Origin("probe", alone=True)), ("c", None), ("d", None)):
        threads.append(_submit_async(sched, p, 2, results, origin))
        _wait_queued(sched, len(threads) - 1)
    fwd.gate.set()
    for t in threads:
        t.join(10)
    assert fwd.passes == [["a"], ["b"], ["probe"], ["c", "d"]]
    assert [i.alone for i in sched.history()[2].items] == [True]
    sched.close()


def test_errors_reach_only_their_caller_and_the_worker_goes_on():
    clock, fwd = FakeClock(), GatedForward()
    sched = _scheduler(fwd, clock, max_tokens=100, max_wait_s=0.004)
    results: dict = {}
    threads = [_submit_async(sched, "a", 1, results)]
    assert fwd.entered.wait(10)
    for p in ("b", "bad1", "c"):
        threads.append(_submit_async(sched, p, 1, results))
        _wait_queued(sched, len(threads) - 1)
    fwd.gate.set()
    for t in threads:
        t.join(10)
    assert isinstance(results["bad1"], ValueError) and "bad1" in str(results["bad1"])
    assert results["b"].result == "out:b" and results["c"].result == "out:c"
    assert [i.ok for i in sched.history()[1].items] == [True, False, True]
    assert sched.submit("later", 1).result == "out:later"
    sched.close()


def test_a_pass_that_raises_fails_its_callers_only():
    clock = FakeClock()
    calls = []

    def forward(payloads):
        calls.append(payloads)
        if len(calls) == 1:
            raise RuntimeError("boom")
        return [f"ok:{p}" for p in payloads]

    sched = _scheduler(forward, clock, max_tokens=100, max_wait_s=0.0)
    with pytest.raises(RuntimeError, match="boom"):
        sched.submit("a", 1)
    assert sched.submit("b", 1).result == "ok:b"
    sched.close()


def test_one_request_a_pass_and_shares_by_tokens():
    clock, fwd = FakeClock(), GatedForward()
    sched = _scheduler(fwd, clock, max_tokens=0, max_wait_s=0.5)
    results: dict = {}
    threads = [_submit_async(sched, "a", 1, results)]
    assert fwd.entered.wait(10)
    threads += [_submit_async(sched, p, 1, results) for p in ("b", "c")]
    _wait_queued(sched, 2)
    fwd.gate.set()
    for t in threads:
        t.join(10)
    assert sorted(len(p) for p in fwd.passes) == [1, 1, 1] and clock.waits == []
    sched.close()


def test_share_of_a_pass_is_split_by_new_tokens():
    clock = FakeClock()

    def forward(payloads):
        clock.now += 0.3  # the pass takes 300 ms on the fake clock
        return list(payloads)

    sched = _scheduler(forward, clock, max_tokens=100, max_wait_s=0.0)
    done = sched.submit("x", 5)
    assert done.pass_ms == pytest.approx(300.0) and done.share_ms == pytest.approx(300.0)
    sched.close()
    gated = GatedForward()

    def timed(payloads):
        out = gated(payloads)
        clock.now += 0.4
        return out

    sched = _scheduler(timed, clock, max_tokens=100, max_wait_s=0.0)
    results: dict = {}
    threads = [_submit_async(sched, "a", 1, results)]
    assert gated.entered.wait(10)
    threads += [_submit_async(sched, "b", 1, results)]
    _wait_queued(sched, 1)
    threads += [_submit_async(sched, "c", 3, results)]
    _wait_queued(sched, 2)
    gated.gate.set()
    for t in threads:
        t.join(10)
    assert results["b"].pass_ms == pytest.approx(400.0)
    assert results["b"].share_ms == pytest.approx(100.0) and results["c"].share_ms == pytest.approx(300.0)
    sched.close()


def test_origin_context_and_settings_from_env(monkeypatch):
    assert current_origin().tag == "other" and not current_origin().alone
    with batch_origin("probe", alone=True), batch_origin("room", "s1"):
        assert current_origin() == Origin("room", "s1", alone=True)  # alone is inherited
    assert not current_origin().alone
    monkeypatch.setenv("KVVIZ_BATCH_TOKENS", "64")
    monkeypatch.setenv("KVVIZ_BATCH_WAIT_MS", "2.5")
    assert settings_from_env() == (64, 0.0025)
    monkeypatch.setenv("KVVIZ_BATCH_TOKENS", "lots")
    monkeypatch.setenv("KVVIZ_BATCH_WAIT_MS", "-3")
    assert settings_from_env() == (512, 0.004)


def test_a_pass_waits_for_announced_requests_and_no_longer():
    """``expect(n, within)``: the next pass waits until n more requests arrived (prompts about to borrow a
    queued request's prefix), never past ``within``. Real clock, loose bounds."""
    import time

    fwd = GatedForward(block_first=False)
    sched = BatchScheduler(fwd, max_tokens=100, max_wait_s=0.001)
    results: dict = {}
    t0 = time.perf_counter()
    def owner_request() -> None:  # announces its followers once queued, as a lending room prompt does
        results["owner"] = sched.submit("owner", 5, on_queued=lambda: sched.expect(2, 5.0))

    owner = threading.Thread(target=owner_request)
    owner.start()
    time.sleep(0.1)  # far past the 1 ms maximum wait: only the announcement holds the pass
    late = [_submit_async(sched, p, 3, results) for p in ("b1", "b2")]
    for t in [owner, *late]:
        t.join(10)
    assert fwd.passes == [["owner", "b1", "b2"]] or fwd.passes == [["owner", "b2", "b1"]]
    assert time.perf_counter() - t0 < 4.0  # it stopped waiting when both had arrived
    sched.expect(3, 0.05)  # announced, but only one comes: the pass starts when the hold ends
    assert sched.submit("lone", 1).batch_size == 1
    sched.expect(0, 5.0)  # nothing announced: a lone request waits its 1 ms
    t1 = time.perf_counter()
    assert sched.submit("quick", 1).batch_size == 1 and time.perf_counter() - t1 < 2.0
    sched.close()
