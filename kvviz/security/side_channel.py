"""The timing side channel measured on the real model: a cached prefix answers faster than a cold one.

The timed probes run alone (``batch_origin(..., alone=True)``): their timing is the measurement.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kvviz.model.batching import batch_origin
from kvviz.model.block_store import KVStore
from kvviz.model.loader import LoadedModel
from kvviz.model.prefill import prefill
from kvviz.model.settings import InputError, check_count
from kvviz.model.tokens import tokenize
from kvviz.room.prefill import EXPERIMENT_LIMITS, room_prefill
from kvviz.room.room import Room
from kvviz.sim.separation import auc, threshold_accuracy

Progress = Callable[[int, int], None]
#: The batching tag of the side channel's forward passes (each runs alone: its timing is the measurement).
PROBE_TAG = "probe"

SECRET_TEXT = (
    "Patient record 4471, Dr. Moreau's clinic. Diagnosis: type 2 diabetes, first noted in March. "
    "Current prescription: metformin 500 mg twice a day. Next appointment: the 14th at 9:30. "
    "Keep this record confidential and answer the patient's questions in plain language."
)

# ----------------------------------------------------------------------------- the side channel


@dataclass(frozen=True)
class Probe:
    """One timed probe: its group (``cached``: repeats the victim's prefix; ``uncached``: the same tokens
    with the first one changed), the measured latency and what the room reused."""

    trial: int
    group: str
    latency_ms: float
    forward_ms: float
    hit_blocks: int
    computed_tokens: int


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
    seconds: float = 0.0

    def latencies(self, group: str) -> list[float]:
        return [p.latency_ms for p in self.probes if p.group == group]

    @property
    def cached_median_ms(self) -> float:
        return statistics.median(self.latencies("cached"))

    @property
    def uncached_median_ms(self) -> float:
        return statistics.median(self.latencies("uncached"))

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
        return {
            "salted": self.salted, "trials": self.trials, "probes": len(self.probes),
            "block_size": self.block_size, "prefix_blocks": self.prefix_blocks, "probe_tokens": self.probe_tokens,
            "device": self.device, "dtype": self.dtype,
            "cached_median_ms": round(self.cached_median_ms, 3), "uncached_median_ms": round(self.uncached_median_ms, 3),
            "ratio": round(self.ratio, 3), "auc": round(self.auc, 3),
            "threshold_accuracy": round(self.threshold_accuracy, 3),
            "cached_hit_blocks": sorted(set(self.cached_hit_blocks)),
            "cached_ms": [round(x, 3) for x in self.latencies("cached")],
            "uncached_ms": [round(x, 3) for x in self.latencies("uncached")],
            "seconds": round(self.seconds, 2),
        }



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


def measure_side_channel(lm: LoadedModel, *, trials: int = 12, prefix_blocks: int = 4, salted: bool = False,
                         text: str = SECRET_TEXT, block_size: int = 16, seed: int = 0,
                         progress: Progress | None = None) -> SideChannelResult:
    """Victim sends ``text`` to a private room (salted or not); then per trial the attacker times, in
    random order, a probe repeating the victim's first ``prefix_blocks`` blocks plus one token, and
    the same probe with its first token changed (its chain misses from block 0)."""
    check_count("trials", trials, 1, 500)
    check_count("prefix_blocks", prefix_blocks, 1, 64)
    need = prefix_blocks * block_size + 1
    ids = _secret_ids(lm, text, need + block_size)
    rng = random.Random(seed)
    prefix = ids[: prefix_blocks * block_size]
    suffix = ids[prefix_blocks * block_size]
    alts = _alt_first_tokens(ids[0], lm.info.vocab_size, trials, rng)
    victim_ids = ids[: need + block_size]  # the victim's prompt goes on past what the attacker probes
    result = SideChannelResult(salted, trials, block_size, prefix_blocks, need, lm.info.device, lm.info.dtype)
    with batch_origin(PROBE_TAG, alone=True):  # a timed probe shares its forward pass with nobody
        _side_channel_trials(lm, result, ids, prefix, suffix, alts, victim_ids, salted, rng, progress)
    return result


def _side_channel_trials(lm: LoadedModel, result: SideChannelResult, ids: list[int], prefix: list[int], suffix: int,
                         alts: list[int], victim_ids: list[int], salted: bool, rng: random.Random,
                         progress: Progress | None) -> None:
    trials, block_size, need = result.trials, result.block_size, result.probe_tokens
    start = time.perf_counter()
    prefill(lm, token_ids=[alts[0]] + prefix[1:] + [suffix], max_tokens=need)  # warm-up, outside any room
    for t in range(trials):
        # A fresh private room per trial: a probe repeated in one room would hit the attacker's own blocks.
        room = Room(EXPERIMENT_LIMITS)
        store = KVStore(budget_bytes=2**31)
        victim, attacker = room.join(), room.join()
        if salted:
            room.set_salt(victim, "private")
        room_prefill(lm, room, victim, token_ids=victim_ids, store=store)
        probes = {"cached": prefix + [suffix], "uncached": [alts[t]] + prefix[1:] + [suffix]}
        order = ["cached", "uncached"]
        rng.shuffle(order)
        for group in order:
            r = room_prefill(lm, room, attacker, token_ids=probes[group], store=store)
            result.probes.append(Probe(t, group, r.latency_ms, r.forward_ms, r.reused_tokens // block_size,
                                       r.computed_tokens))
        room.check_invariants()
        if progress is not None:
            progress(t + 1, trials)
    result.seconds = time.perf_counter() - start
