"""Twenty sessions at once on one shared room on the engine, through the room page's code path, measured in
this run.

Each of ``SESSIONS`` threads joins one room (on the process-wide engine loop, ``kvviz.engine``) and sends
``PROMPTS_PER_SESSION`` prompts through ``kvviz.room.prefill.room_prefill`` (rate limits, then the prompt's
prefill on the engine under the session's salt with ``max_tokens=1``, then the room's records), with a
cache lookup (``Room.peek``) before each. Prompts share a workshop system prompt, so sessions hit each
other's blocks; prompts that arrive together share an engine step. Meanwhile a noisy thread sends
thousands of one-token prompts and rapid resets with a wrong presenter key: they must be refused cheaply
(before the engine) and change nothing.

Keys: ``concurrent_sessions``, ``concurrent_requests``, ``concurrent_p50_ms``, ``concurrent_p95_ms``
(wall time of each ``room_prefill`` call: tokenizing, waiting in the engine's queue, the step and the
room's records), ``concurrent_max_ms``, ``concurrent_compute_p50_ms`` (each prompt's share of its engine
steps: compute without waiting), ``concurrent_wait_p50_ms`` (time in the engine's queue),
``concurrent_errors`` (exceptions + refused prompts of the twenty sessions), ``concurrent_hit_rate``,
``concurrent_cross_session_blocks``, ``concurrent_invariants_ok``, ``concurrent_spam_refused``,
``concurrent_spam_max_ms``, ``concurrent_wall_s``, ``concurrent_throughput_rps`` (the twenty sessions'
prompts / wall time), ``concurrent_batch_mean`` (mean over the prompts of the most requests one of their
engine steps computed), ``concurrent_steps`` (engine steps during the run).

Batching, in the same run (the scheduler's own runner, median of 5 interleaved rounds):
``batched_8x16_ms`` (eight requests of 16 new tokens over their cached 512-token prefixes in one
packed pass), ``sequential_8x16_ms`` (the same eight one by one), ``batching_speedup`` (their ratio),
``single_16_ms`` (one such request through the scheduler, its maximum wait included) beside
``single_16_direct_ms`` (the same request as a plain model call, no scheduler), and
``matmul_batched_8x16_ms``, ``matmul_sequential_8x16_ms``, ``matmul_8x16_speedup``: the same comparison
for the weight matrix products alone (every layer's projections
and the LM head on 8 x 16 rows one by one vs 128 rows at once, real weights): the most batching can save
on this machine, since attention over each prefix, K/V copies and the rest are per-request work.
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
    ("batching_speedup", "sequential_8x16_ms / batched_8x16_ms >= 3", lambda r: r["batching_speedup"] >= 3),
]
BATCH_REQUESTS = 8
BATCH_NEW_TOKENS = 16
BATCH_PREFIX_TOKENS = 512
BATCH_ROUNDS = 5


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[k]


def run(results: dict) -> None:
    run_room(results)
    run_batching(results)


def run_room(results: dict) -> None:
    """The twenty-session room on the engine (module docstring)."""
    from kvviz.engine import get_engine_loop
    from kvviz.model import tokenize
    from kvviz.room.limits import RoomLimits
    from kvviz.room.prefill import room_prefill
    from kvviz.room.room import Room

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


def run_batching(results: dict, lm=None) -> None:
    """``batched_8x16_ms`` vs ``sequential_8x16_ms`` and the lone request's latency (module docstring)."""
    import random
    import weakref

    from kvviz.model import load_model, prefill  # sets OMP_WAIT_POLICY before torch loads
    from kvviz.model.prefill import _run_batch, forward_request

    lm = lm or load_model()
    ref = weakref.ref(lm)
    rng = random.Random(0)
    prompts = [[rng.randrange(100, 20000) for _ in range(BATCH_PREFIX_TOKENS + BATCH_NEW_TOKENS)]
               for _ in range(BATCH_REQUESTS)]
    prefixes = []
    for ids in prompts:
        head = prefill(lm, token_ids=ids[:BATCH_PREFIX_TOKENS], max_tokens=BATCH_PREFIX_TOKENS)
        prefixes.append([(k.to(lm.device).unsqueeze(0), v.to(lm.device).unsqueeze(0))
                         for k, v in zip(head.keys, head.values, strict=True)])

    def payloads() -> list:  # fresh caches over the same prefix tensors (a cache never writes into them)
        return [(ids[BATCH_PREFIX_TOKENS:], lm.new_cache(data)) for ids, data in zip(prompts, prefixes, strict=True)]

    def timed(fn) -> float:
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1000.0

    batched, sequential, single, direct, mm_batched, mm_sequential = [], [], [], [], [], []
    products = {rows: _weight_products(lm, rows, heads) for rows, heads in
                ((BATCH_NEW_TOKENS, 1), (BATCH_REQUESTS * BATCH_NEW_TOKENS, BATCH_REQUESTS))}
    _run_batch(ref, payloads())  # warm-up
    for _ in range(BATCH_ROUNDS):
        batched.append(timed(lambda: _run_batch(ref, payloads())))
        sequential.append(timed(lambda: [_run_batch(ref, [p]) for p in payloads()]))
        mm_batched.append(timed(products[BATCH_REQUESTS * BATCH_NEW_TOKENS]))
        mm_sequential.append(timed(lambda: [products[BATCH_NEW_TOKENS]() for _ in range(BATCH_REQUESTS)]))
        one = payloads()[0]
        single.append(timed(lambda one=one: forward_request(lm, one[0], one[1])))
        one = payloads()[0]
        direct.append(timed(lambda one=one: _run_batch(ref, [one])))
    results["batched_8x16_ms"] = round(statistics.median(batched), 1)
    results["sequential_8x16_ms"] = round(statistics.median(sequential), 1)
    results["batching_speedup"] = round(statistics.median(sequential) / statistics.median(batched), 2)
    results["matmul_batched_8x16_ms"] = round(statistics.median(mm_batched), 1)
    results["matmul_sequential_8x16_ms"] = round(statistics.median(mm_sequential), 1)
    results["matmul_8x16_speedup"] = round(statistics.median(mm_sequential) / statistics.median(mm_batched), 2)
    results["single_16_ms"] = round(statistics.median(single), 1)
    results["single_16_direct_ms"] = round(statistics.median(direct), 1)


def _weight_products(lm, rows: int, head_rows: int):
    """A callable multiplying ``rows`` random activations by every weight matrix of every decoder layer,
    and ``head_rows`` of them by the LM head: a pass's weight work alone, with nothing per request."""
    import torch
    import torch.nn.functional as F

    device, dtype = lm.device, lm.torch_dtype
    pairs = []
    for layer in lm.model.model.layers:
        for m in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj, layer.self_attn.o_proj,
                  layer.mlp.gate_proj, layer.mlp.up_proj, layer.mlp.down_proj):
            pairs.append((torch.randn(rows, m.weight.shape[1], device=device, dtype=dtype), m.weight))
    head = lm.model.lm_head.weight
    pairs.append((torch.randn(head_rows, head.shape[1], device=device, dtype=dtype), head))

    def run() -> None:
        with torch.inference_mode():
            for x, w in pairs:
                F.linear(x, w)
            if device.type == "cuda":
                torch.cuda.synchronize()

    return run


if __name__ == "__main__":  # the room part alone: python -m bench.bench_concurrency
    import json

    from kvviz.settings import prefer_passive_openmp

    prefer_passive_openmp()
    out: dict = {}
    run_room(out)
    print(json.dumps(out, indent=2))
