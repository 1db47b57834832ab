"""The timing side channel measured on the real model through the engine: a cached prefix answers faster
than a cold one.

Every timed probe runs alone on the engine (``kvviz.experiments.security.probe.run_alone``): what is timed is the
compute of its prefill, with no other request in its steps; the wait for a quiet engine is kept apart.
The engine is shared (the room, the API, the pages), so each trial runs in a namespace of its own: a
fresh cache salt that victim and attacker share (an empty cache between them, as in a private room);
"salt on" gives the victim a salt of its own. One trial never hits another's blocks.
"""

from __future__ import annotations

import random
import secrets
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kvviz.analysis.separation import auc, threshold_accuracy
from kvviz.engine import EngineLoop, get_engine_loop
from kvviz.experiments.security.probe import run_alone
from kvviz.model.loader import LoadedModel
from kvviz.model.settings import InputError, check_count
from kvviz.model.tokens import tokenize

Progress = Callable[[int, int], None]

SECRET_TEXT = (
    "Patient record 4471, Dr. Moreau's clinic. Diagnosis: type 2 diabetes, first noted in March. "
    "Current prescription: metformin 500 mg twice a day. Next appointment: the 14th at 9:30. "
    "Keep this record confidential and answer the patient's questions in plain language."
)

# ----------------------------------------------------------------------------- the side channel


@dataclass(frozen=True)
class Probe:
    """One timed probe: its group (``cached``: repeats the victim's prefix; ``uncached``: the same tokens
    with the first one changed), its measured compute (alone on the engine), the wait for a quiet engine
    (not part of the measurement) and what the engine reused."""

    trial: int
    group: str
    latency_ms: float
    waited_ms: float
    hit_blocks: int
    computed_tokens: int


def _quartiles(values: list[float]) -> tuple[float, float]:
    """The 25th and 75th percentiles (the median of a single value for both)."""
    if len(values) < 2:
        return (values[0], values[0]) if values else (float("nan"), float("nan"))
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


@dataclass
class SideChannelResult:
    """Latencies of cached vs uncached probes, ``trials`` of each, with or without the victim's salt."""

    salted: bool
    trials: int
    block_size: int
    prefix_blocks: int
    probe_tokens: int
    device: str
    dtype: str
    probes: list[Probe] = field(default_factory=list)
    seconds: float = 0.0  # the whole measurement, start to end (waits for a quiet engine included)
    compute_s: float = 0.0  # the engine compute of every prefill it ran: warm-up, victims and probes

    def latencies(self, group: str) -> list[float]:
        return [p.latency_ms for p in self.probes if p.group == group]

    @property
    def cached_median_ms(self) -> float:
        return statistics.median(self.latencies("cached"))

    @property
    def uncached_median_ms(self) -> float:
        return statistics.median(self.latencies("uncached"))

    def spread_ms(self, group: str) -> tuple[float, float]:
        """The interquartile range of a group's latencies (25th, 75th percentile)."""
        return _quartiles(self.latencies(group))

    @property
    def within_noise(self) -> bool:
        """True unless the two groups' interquartile ranges are apart (then the difference is clear)."""
        c_lo, c_hi = self.spread_ms("cached")
        u_lo, u_hi = self.spread_ms("uncached")
        return not (c_hi < u_lo or u_hi < c_lo)

    @property
    def ratio(self) -> float:
        return self.uncached_median_ms / self.cached_median_ms if self.cached_median_ms > 0 else float("nan")

    @property
    def auc(self) -> float:
        return auc(self.latencies("cached"), self.latencies("uncached"))

    @property
    def threshold_accuracy(self) -> float:
        return threshold_accuracy(self.latencies("cached"), self.latencies("uncached"))

    @property
    def cached_hit_blocks(self) -> list[int]:
        return [p.hit_blocks for p in self.probes if p.group == "cached"]

    @property
    def reused_tokens_on_hit(self) -> int:
        return max(self.cached_hit_blocks, default=0) * self.block_size

    def as_dict(self) -> dict[str, Any]:
        spread = {g: [round(x, 3) for x in self.spread_ms(g)] for g in ("cached", "uncached")}
        return {
            "salted": self.salted, "trials": self.trials, "probes": len(self.probes),
            "block_size": self.block_size, "prefix_blocks": self.prefix_blocks, "probe_tokens": self.probe_tokens,
            "device": self.device, "dtype": self.dtype,
            "cached_median_ms": round(self.cached_median_ms, 3), "uncached_median_ms": round(self.uncached_median_ms, 3),
            "cached_iqr_ms": spread["cached"], "uncached_iqr_ms": spread["uncached"],
            "within_noise": self.within_noise,
            "ratio": round(self.ratio, 3), "auc": round(self.auc, 3),
            "threshold_accuracy": round(self.threshold_accuracy, 3),
            "cached_hit_blocks": sorted(set(self.cached_hit_blocks)),
            "cached_ms": [round(x, 3) for x in self.latencies("cached")],
            "uncached_ms": [round(x, 3) for x in self.latencies("uncached")],
            "waited_ms_max": round(max((p.waited_ms for p in self.probes), default=0.0), 3),
            "seconds": round(self.seconds, 2), "compute_s": round(self.compute_s, 3),
        }


def trial_namespace() -> Callable[[int], str]:
    """Per trial, a fresh cache salt victim and attacker share (their own empty cache on the shared engine)."""
    nonce = secrets.token_hex(6)
    return lambda trial: f"probe-trial:{nonce}:{trial}"


def _secret_ids(lm: LoadedModel, text: str, need: int) -> list[int]:
    """The victim prompt's tokens, repeated (a longer document) when the probe needs more of them."""
    ids = list(tokenize(text, model_name=lm.source.key, max_tokens=4096).ids)
    if len(ids) < 2:
        raise InputError(f"the secret prompt has {len(ids)} token(s); give a longer one")
    return (ids * (need // len(ids) + 1))[: max(need, len(ids))]


def _alt_first_tokens(first: int, vocab: int, count: int, rng: random.Random) -> list[int]:
    """``count`` distinct token ids different from ``first`` (for the uncached probes' first token)."""
    pool = [t for t in rng.sample(range(1000, min(vocab, 40000)), count + 1) if t != first]
    return pool[:count]


def measure_side_channel(loop: EngineLoop | None = None, *, trials: int = 12, prefix_blocks: int = 4,
                         salted: bool = False, text: str = SECRET_TEXT, seed: int = 0,
                         progress: Progress | None = None) -> SideChannelResult:
    """Victim sends ``text`` to the engine (in the trial's namespace, or under a salt of its own); then per
    trial the attacker times, in random order and each alone on the engine, a probe repeating the victim's
    first ``prefix_blocks`` blocks plus one token, and the same probe with its first token changed (its
    chain misses from block 0). ``loop``: the process-wide engine loop by default."""
    check_count("trials", trials, 1, 500)
    check_count("prefix_blocks", prefix_blocks, 1, 64)
    loop = loop or get_engine_loop()
    lm, block_size = loop.engine.lm, loop.engine.block_size
    need = prefix_blocks * block_size + 1
    ids = _secret_ids(lm, text, need + block_size)
    rng = random.Random(seed)
    prefix = ids[: prefix_blocks * block_size]
    suffix = ids[prefix_blocks * block_size]
    alts = _alt_first_tokens(ids[0], lm.info.vocab_size, trials + 1, rng)
    victim_ids = ids[: need + block_size]  # the victim's prompt goes on past what the attacker probes
    result = SideChannelResult(salted, trials, block_size, prefix_blocks, need, lm.info.device, lm.info.dtype)
    namespace = trial_namespace()
    start = time.perf_counter()
    warm = run_alone(loop, [alts[trials]] + prefix[1:] + [suffix], cache_salt=namespace(-1))  # not a probe
    compute_ms = warm.compute_ms
    for t in range(trials):
        shared = namespace(t)
        compute_ms += run_alone(loop, victim_ids, cache_salt=shared + ":victim" if salted else shared).compute_ms
        probes = {"cached": prefix + [suffix], "uncached": [alts[t]] + prefix[1:] + [suffix]}
        order = ["cached", "uncached"]
        rng.shuffle(order)
        for group in order:
            p = run_alone(loop, probes[group], cache_salt=shared)
            compute_ms += p.compute_ms
            result.probes.append(Probe(t, group, p.compute_ms, p.waited_ms, p.cached_tokens // block_size,
                                       p.computed_tokens))
        if progress is not None:
            progress(t + 1, trials)
    result.seconds = time.perf_counter() - start
    result.compute_s = compute_ms / 1000.0
    return result
