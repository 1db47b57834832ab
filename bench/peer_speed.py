"""Speed of both engines in one run, through the same client: one stream's decode (256-token prompt, 128
new), 16 concurrent streams (total tok/s, per-stream decode, median TTFT), TTFT of a 1,024-token prompt
uncached and with 992 of its tokens cached.

Invariant: every figure is the median of ``rounds`` runs, A/B interleaved (the engine that goes first
alternates by round), each run's prompt new to both caches except the cached-TTFT prompt's shared prefix, and
each run starts once neither engine uses the CPU (``wait_until_idle``).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from bench.peer_agree import Peer, text_ids
from bench.peer_client import complete, complete_many

PROMPT, NEW, STREAMS = 256, 128, 16
LONG, CACHED = 1024, 992  # 992 = 31 blocks of 32


def _say(what: str) -> None:
    import os

    print(f"[peer] {time.strftime('%H:%M:%S')} {what} (load {os.getloadavg()[0]:.1f})", flush=True)


def one_stream(peer: Peer, tok, salt: str) -> dict[str, float]:
    s = complete(peer.url, text_ids(tok, PROMPT, salt), NEW)
    return {"decode_1_tok_s": s.decode_tok_s(), "ms_per_token_1": 1000.0 / s.decode_tok_s()}


def sixteen(peer: Peer, tok, salt: str) -> dict[str, float]:
    prompts = [text_ids(tok, PROMPT, f"{salt} stream {i}") for i in range(STREAMS)]
    streams, wall = complete_many(peer.url, prompts, NEW)
    return {"total_16_tok_s": sum(s.completion_tokens for s in streams) / wall,
            "decode_16_per_stream_tok_s": statistics.median(s.decode_tok_s() for s in streams),
            "ttft_16_median_s": statistics.median(s.ttft_s for s in streams)}


def ttft(peer: Peer, tok, salt: str) -> dict[str, float]:
    long = text_ids(tok, LONG, salt)
    cold = complete(peer.url, long, 1)
    warm = complete(peer.url, long[:CACHED] + text_ids(tok, LONG - CACHED, f"{salt} other end"), 1)
    if cold.cached_tokens != 0 or warm.cached_tokens != CACHED:
        raise RuntimeError(f"{peer.name}: cached_tokens {cold.cached_tokens} / {warm.cached_tokens}, "
                           f"expected 0 / {CACHED}")
    return {"ttft_1024_uncached_s": cold.ttft_s, "ttft_1024_cached_992_s": warm.ttft_s}


KINDS: list[tuple[str, Callable[[Peer, Any, str], dict[str, float]]]] = [
    ("one stream", one_stream), ("16 streams", sixteen), ("TTFT", ttft)]


def measure(peers: list[Peer], tok, rounds: int, tag: str,
            beside: Callable[[str], None] | None = None) -> dict[str, dict[str, Any]]:
    """Every figure for every engine: {engine: {key: median, key + '_runs': [...]}}. ``beside(label)`` runs
    just before each measurement, once both engines are idle (the memory bound is read there)."""
    runs: dict[str, dict[str, list[float]]] = {p.name: {} for p in peers}
    for label, fn in KINDS:
        for r in range(rounds):
            order = peers if r % 2 == 0 else peers[::-1]
            for peer in order:
                waited = wait_until_idle(peers)
                if beside is not None:
                    beside(label)
                before, started = {p.name: group_cpu_s(p.pid) for p in peers}, time.perf_counter()
                got = fn(peer, tok, f"Peer {tag} {label} round {r}")
                wall = time.perf_counter() - started
                for p in peers:  # cores each engine's processes used while this one was measured
                    side = "cores_self" if p is peer else "cores_other"
                    got[f"{side}_{label.replace(' ', '_')}"] = (group_cpu_s(p.pid) - before[p.name]) / wall
                got[f"idle_wait_s_{label.replace(' ', '_')}"] = waited
                for key, value in got.items():
                    runs[peer.name].setdefault(key, []).append(value)
                _say(f"{tag} {label} round {r + 1} {peer.name}: "
                     + ", ".join(f"{k} {v:.3g}" for k, v in got.items()))
    out: dict[str, dict[str, Any]] = {}
    for name, keys in runs.items():
        out[name] = {}
        for key, values in keys.items():
            out[name][key] = round(statistics.median(values), 4)
            out[name][key + "_runs"] = [round(v, 4) for v in values]
    return out


def group_cpu_s(pgid: int | None) -> float:
    """CPU seconds (user + system) used so far by the live processes of process group ``pgid`` (0 without one:
    Linux /proc only). An engine's server and its workers share its group (``start_new_session``)."""
    if pgid is None:
        return 0.0
    import os

    ticks = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # fields after the name: state, ppid, pgrp, ..., utime (12th), stime (13th)
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


#: both engines count as idle when together they used less than this share of one core over ``IDLE_WINDOW_S``
IDLE_SHARE, IDLE_WINDOW_S, IDLE_DEADLINE_S = 0.1, 0.25, 15.0


def wait_until_idle(peers: list[Peer]) -> float:
    """Wait until neither engine's processes use the CPU (vLLM's workers busy-poll their message queue for a
    second after their last request, vLLM 0.32 ``shm_broadcast``: a run started then shares its cores with
    that poll); the seconds waited. Gives up after ``IDLE_DEADLINE_S`` and measures anyway."""
    start = time.perf_counter()
    while time.perf_counter() - start < IDLE_DEADLINE_S:
        before = sum(group_cpu_s(p.pid) for p in peers)
        time.sleep(IDLE_WINDOW_S)  # the window over which CPU use is measured, not a guess at a duration
        if sum(group_cpu_s(p.pid) for p in peers) - before < IDLE_SHARE * IDLE_WINDOW_S:
            break
    return round(time.perf_counter() - start, 2)


def warm_up(peers: list[Peer], tok) -> None:
    """One short request each (first-request costs kept out of the timings)."""
    for peer in peers:
        complete(peer.url, text_ids(tok, 64, f"Warm-up {peer.name}"), 8)


RATIO_KEYS = {  # key: True when higher is better for kvviz
    "decode_1_tok_s": True, "total_16_tok_s": True, "decode_16_per_stream_tok_s": True,
    "ttft_16_median_s": False, "ttft_1024_uncached_s": False, "ttft_1024_cached_992_s": False}


def ratios(figures: dict[str, dict[str, Any]]) -> dict[str, float]:
    """kvviz / vLLM for every figure (>= 1 is the target for rates, <= 1 for times)."""
    k, v = figures["kvviz"], figures["vllm"]
    return {key: round(k[key] / v[key], 3) for key in RATIO_KEYS if v.get(key)}
