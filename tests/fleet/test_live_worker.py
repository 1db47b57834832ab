"""The shared background-thread lifecycle (``kvviz.fleet.worker``): one thread per worker, idempotent stop,
errors kept not raised, ``_close`` exactly once, and the registry's replace / evict / refuse rules."""

from __future__ import annotations

import threading

import pytest

from kvviz.fleet.worker import Worker, WorkerRegistry

WAIT_S = 30.0  # generous: only a hang reaches it


class Counting(Worker):
    """Loops until stopped (or raises ``fail`` after its first pass), recording threads and closes."""

    def __init__(self, fail: Exception | None = None, stop_itself: bool = False) -> None:
        super().__init__("test-worker")
        self.fail, self.stop_itself = fail, stop_itself
        self.threads: set[int] = set()
        self.passes = 0
        self.closes = 0
        self.ran = threading.Event()

    def _loop(self) -> None:
        while not self.stopping:
            self.threads.add(threading.get_ident())
            self.passes += 1
            self.ran.set()
            if self.fail is not None:
                raise self.fail
            if self.stop_itself:
                self.stop()
            self._sleep(0.01)

    def _close(self) -> None:
        self.closes += 1


def _join(worker: Worker) -> None:
    worker._thread.join(WAIT_S)
    assert not worker.alive


def test_one_thread_per_worker_and_start_is_idempotent() -> None:
    w = Counting()
    assert w.start() is w and w.start() is w
    assert w.ran.wait(WAIT_S) and w.alive
    w.stop()
    _join(w)
    assert len(w.threads) == 1 and threading.get_ident() not in w.threads
    assert w.start() is w and not w.alive  # a stopped worker stays stopped


def test_stop_is_idempotent_and_closes_once() -> None:
    w = Counting().start()
    assert w.ran.wait(WAIT_S)
    w.stop()
    w.stop()
    _join(w)
    w.stop()
    assert w.closes == 1 and w.stopping and w.error is None


def test_stop_before_start_closes_and_never_runs() -> None:
    w = Counting()
    w.stop()
    w.stop()
    assert w.closes == 1
    w.start()
    assert not w.alive and w.passes == 0 and w.closes == 1


def test_an_error_is_kept_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    raised: list[object] = []
    monkeypatch.setattr(threading, "excepthook", raised.append)
    w = Counting(fail=RuntimeError("socket gone\nsecond line")).start()
    _join(w)
    assert w.error == "RuntimeError: socket gone" and w.closes == 1 and not raised
    w.stop()  # stopping a dead worker is fine
    assert w.closes == 1


def test_stop_from_its_own_thread_does_not_deadlock() -> None:
    w = Counting(stop_itself=True).start()
    _join(w)
    assert w.passes == 1 and w.closes == 1 and w.error is None


def test_registry_replaces_a_dead_worker() -> None:
    reg: WorkerRegistry[str, Counting] = WorkerRegistry(2, evict=True)
    first = reg.get("a", Counting)
    assert reg.get("a", Counting) is first and reg.running("a") is first and first.alive
    first.stop()
    _join(first)
    assert reg.running("a") is None
    second = reg.get("a", Counting)
    assert second is not first and second.alive
    assert reg.pop("a") is second and reg.pop("a") is None
    second.stop()
    _join(second)


def test_registry_evicts_the_least_recently_used() -> None:
    reg: WorkerRegistry[str, Counting] = WorkerRegistry(2, evict=True)
    a, b = reg.get("a", Counting), reg.get("b", Counting)
    reg.get("a", Counting)  # a is now the most recently used
    c = reg.get("c", Counting)
    _join(b)
    assert b.closes == 1 and reg.running("b") is None
    assert reg.running("a") is a and reg.running("c") is c
    for w in (a, c):
        w.stop()
        _join(w)


def test_a_full_registry_without_eviction_refuses_and_keeps_the_others() -> None:
    reg: WorkerRegistry[str, Counting] = WorkerRegistry(1, evict=False)
    a = reg.get("a", Counting)
    built: list[Counting] = []
    with pytest.raises(ValueError, match=r"1 run: a"):
        reg.get("b", lambda: built.append(Counting()) or built[-1], lambda keys: f"{len(keys)} run: {', '.join(keys)}")
    assert not built and reg.running("a") is a and a.alive  # nothing was built, nothing stopped
    a.stop()
    _join(a)
    b = reg.get("b", Counting)  # the dead one no longer counts
    assert b.alive
    b.stop()
    _join(b)


def test_a_failing_factory_registers_nothing() -> None:
    reg: WorkerRegistry[str, Counting] = WorkerRegistry(2, evict=True)

    def bad() -> Counting:
        raise ValueError("cannot bind tcp://127.0.0.1:1")

    with pytest.raises(ValueError, match="cannot bind"):
        reg.get("a", bad)
    assert reg.running("a") is None and reg.pop("a") is None
