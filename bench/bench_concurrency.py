"""Twenty sessions at once on one shared room on the engine, through the room page's code path, measured in
this run.

Each of ``SESSIONS`` threads joins one room (on the process-wide engine loop, ``kvviz.engine``) and sends
``PROMPTS_PER_SESSION`` prompts through ``kvviz.experiments.room.prefill.room_prefill`` (rate limits, then the prompt's
prefill on the engine under the session's salt with ``max_tokens=1``, then the room's records), with a
cache lookup (``Room.peek``) before each. Prompts share a workshop system prompt, so sessions hit each
other's blocks; prompts that arrive together share an engine step. Meanwhile a noisy thread sends
thousands of one-token prompts and rapid resets with a wrong presenter key: they must be refused cheaply
(before the engine) and change nothing.

Keys: ``concurrent_sessions``, ``concurrent_requests``, ``concurrent_p50_ms``, ``concurrent_p95_ms``
(wall time of each ``room_prefill`` call: tokenizing, waiting in the engine's queue, the step and the
room's records), ``concurrent_max_ms``, ``concurrent_compute_p50_ms`` (each prompt's share of its engine
steps: compute without waiting), ``concurrent_wait_p50_ms`` (the rest of each prompt's time to its first
token: the step already running, the engine's queue, the other prompts' share of its step),
``concurrent_errors`` (exceptions + refused prompts of the twenty sessions), ``concurrent_hit_rate``,
``concurrent_cross_session_blocks``, ``concurrent_invariants_ok``, ``concurrent_spam_refused``,
``concurrent_spam_max_ms``, ``concurrent_wall_s``, ``concurrent_throughput_rps`` (the twenty sessions'
prompts / wall time), ``concurrent_batch_mean`` (mean over the prompts of the most requests one of their
engine steps computed), ``concurrent_steps`` (engine steps during the run).

``busy_thread_compute_ms`` / ``quiet_compute_ms``: the compute of one 263-token prefill on the engine
(median of 3, fresh cache salts) with a thread running pure Python beside it / without;
``busy_thread_ratio`` is their quotient. The busy thread also takes one of the cores, so about 2 is the
floor on 2 cores; with Python's 5 ms GIL switch interval it was 15-20 (``ENGINE_SWITCH_INTERVAL_S``).
"""

from __future__ import annotations

import statistics
import threading
import time

SESSIONS = 20
PROMPTS_PER_SESSION = 3
SPAM_PROMPTS = 2000
SPAM_RESETS = 50
SYSTEM = (
    "You are the workshop assistant for a hands-on session on prompt caching in large language model servers. "
    "Answer briefly, cite the block size when it matters, and say when you are unsure.\n\nQuestion: "
)
QUESTIONS = [
    "why does one early edit break the cache?", "what is a cache salt?", "what is evicted first?",
    "how big is one block?", "why are partial blocks never cached?", "what is NONE_HASH?",
]

TARGETS = [
    ("concurrent_errors", "no errors or refusals among the 20 sessions", lambda r: r["concurrent_errors"] == 0),
    ("concurrent_invariants_ok", "room and pool invariants hold after the run", lambda r: r["concurrent_invariants_ok"]),
    ("concurrent_cross_session_blocks", "sessions reuse each other's blocks", lambda r: r["concurrent_cross_session_blocks"] > 0),
    ("concurrent_p95_ms", "20 sessions x 3 prompts on the engine: p95 <= 1.0 s", lambda r: r["concurrent_p95_ms"] <= 1000),
    ("busy_thread_ratio", "a prefill beside a busy Python thread <= 3x its quiet compute",
     lambda r: r["busy_thread_ratio"] <= 3.0),
]
BUSY_RUNS = 3


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[k]


def run(results: dict) -> None:
    run_room(results)
    run_busy_thread(results)


def _prefill_compute_ms(loop, ids: list[int]) -> float:
    from kvviz.experiments.edit.engine_run import fresh_salt, run_prompt

    return run_prompt(loop, ids, fresh_salt()).compute_ms


def run_busy_thread(results: dict) -> None:
    """One prefill's compute with and without a pure-Python thread beside the engine (module docstring)."""
    from kvviz.engine import get_engine_loop
    from kvviz.experiments.edit.presets import DEFAULT_PRESET_ID, load_edit_presets
    from kvviz.model import tokenize

    loop = get_engine_loop()
    ids = tokenize({p.id: p for p in load_edit_presets()}[DEFAULT_PRESET_ID].a).ids
    _prefill_compute_ms(loop, ids)  # warm-up
    quiet = [_prefill_compute_ms(loop, ids) for _ in range(BUSY_RUNS)]
    stop = threading.Event()

    def busy() -> None:
        n = 0
        while not stop.is_set():
            n += 1

    thread = threading.Thread(target=busy, daemon=True)
    thread.start()
    try:
        loaded = [_prefill_compute_ms(loop, ids) for _ in range(BUSY_RUNS)]
    finally:
        stop.set()
        thread.join()
    results["quiet_compute_ms"] = round(statistics.median(quiet), 1)
    results["busy_thread_compute_ms"] = round(statistics.median(loaded), 1)
    results["busy_thread_ratio"] = round(statistics.median(loaded) / statistics.median(quiet), 2)


def run_room(results: dict) -> None:
    """The twenty-session room on the engine (module docstring)."""
    from kvviz.engine import get_engine_loop
    from kvviz.experiments.room.limits import RoomLimits
    from kvviz.experiments.room.prefill import room_prefill
    from kvviz.experiments.room.room import Room
    from kvviz.model import tokenize

    loop = get_engine_loop()
    room = Room(RoomLimits(), engine=loop, presenter_key="bench-presenter")
    assert room.reset(force=True).ok  # a cold prefix cache: the first wave computes the system prompt
    warm = room.join()  # one prompt outside the measurement: the engine's first step pays one-off costs
    room_prefill(room, warm, text="warm-up " * 8)
    assert room.reset(force=True).ok
    steps0 = loop.stats().num_steps
    latencies: list[float] = []
    computes: list[float] = []
    waits: list[float] = []
    batch: list[int] = []
    errors: list[str] = []
    spam: dict[str, float] = {"refused": 0, "max_ms": 0.0}
    lock = threading.Lock()
    start_gate = threading.Barrier(SESSIONS + 1)

    def session(i: int) -> None:
        sid = room.join()
        start_gate.wait()
        for k in range(PROMPTS_PER_SESSION):
            text = SYSTEM + QUESTIONS[(i + k) % len(QUESTIONS)] + f" (attendee {i})"
            try:
                room.peek(tokenize(text).ids)
                t0 = time.perf_counter()
                out = room_prefill(room, sid, text=text)
                ms = (time.perf_counter() - t0) * 1000.0
                with lock:
                    if out.ok:
                        latencies.append(ms)
                        computes.append(out.compute_ms)
                        waits.append(out.wait_ms)
                        batch.append(out.admission.step_requests)
                    else:
                        errors.append(out.admission.error or "refused")
            except Exception as exc:  # noqa: BLE001 - counted, the run goes on
                with lock:
                    errors.append(f"{type(exc).__name__}: {exc}")

    def noisy() -> None:
        sid = room.join()
        start_gate.wait()
        worst = 0.0
        refused = 0
        for n in range(SPAM_PROMPTS):
            t0 = time.perf_counter()
            out = room_prefill(room, sid, token_ids=[n % 40000])
            if not out.admission.ok:  # refused before the engine: must stay cheap
                refused += 1
                worst = max(worst, (time.perf_counter() - t0) * 1000.0)
        for _ in range(SPAM_RESETS):
            refused += 0 if room.reset("wrong key").ok else 1
        spam["refused"], spam["max_ms"] = refused, worst

    threads = [threading.Thread(target=session, args=(i,)) for i in range(SESSIONS)]
    threads.append(threading.Thread(target=noisy))
    wall0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - wall0
    try:
        room.check_invariants()
        invariants_ok = True
    except AssertionError as exc:
        invariants_ok = False
        errors.append(f"invariant: {exc}")
    totals = room.totals()
    nan = float("nan")
    results["concurrent_sessions"] = SESSIONS
    results["concurrent_requests"] = len(latencies)
    results["concurrent_p50_ms"] = round(statistics.median(latencies), 1) if latencies else nan
    results["concurrent_p95_ms"] = round(_percentile(latencies, 0.95), 1) if latencies else nan
    results["concurrent_max_ms"] = round(max(latencies), 1) if latencies else nan
    results["concurrent_compute_p50_ms"] = round(statistics.median(computes), 1) if computes else nan
    results["concurrent_wait_p50_ms"] = round(statistics.median(waits), 1) if waits else nan
    results["concurrent_errors"] = len(errors)
    results["concurrent_hit_rate"] = round(totals.hit_rate, 4)
    results["concurrent_cross_session_blocks"] = totals.cross_session_hits
    results["concurrent_invariants_ok"] = invariants_ok
    results["concurrent_spam_refused"] = int(spam["refused"])
    results["concurrent_spam_max_ms"] = round(spam["max_ms"], 3)
    results["concurrent_wall_s"] = round(wall, 2)
    results["concurrent_throughput_rps"] = round(len(latencies) / wall, 2) if wall > 0 else nan
    results["concurrent_batch_mean"] = round(statistics.mean(batch), 2) if batch else 0.0
    results["concurrent_steps"] = loop.stats().num_steps - steps0
    for e in errors[:5]:
        print(f"[bench] concurrency error: {e}")


if __name__ == "__main__":  # the room part alone: python -m bench.bench_concurrency
    import json

    from kvviz.settings import prefer_passive_openmp

    prefer_passive_openmp()
    out: dict = {}
    run_room(out)
    print(json.dumps(out, indent=2))
