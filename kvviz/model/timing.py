"""The model side of the security chapter: the room's prefill path, the timing side channel measured
on the real model, the attacker game, and what a hash collision serves.

``room_prefill`` is the one path every room prompt takes (the room page, the concurrency benchmark and
the experiments below): the room admits the prompt (longest cached prefix under the session's salt),
then the model prefills it reusing at most that prefix from the room's K/V store, then the new full
blocks are stored. The latency it reports is the wall time up to the last prompt token's logits
(K/V-store lookup + forward; storing happens after), which is what an outside observer can time.

Every forward pass goes through the model's batching scheduler (``kvviz.model.prefill.scheduler_for``),
so any number of sessions may call these functions at once: room prompts that arrive together share a
pass, while the side channel's timed probes run alone (``batch_origin(..., alone=True)``). Experiments run in private rooms with private K/V stores:
they neither read nor disturb the shared room.
"""

from __future__ import annotations

import random
import statistics
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from kvviz.core.blank import is_blank
from kvviz.model.batching import batch_origin, current_origin
from kvviz.model.kvstore import CachedPrefill, KVStore, model_key, prefill_cached, store_block_hashes
from kvviz.model.loader import LoadedModel
from kvviz.model.prefill import PrefillResult, prefill, prefill_continue
from kvviz.model.settings import InputError
from kvviz.model.tokens import tokenize
from kvviz.security.collisions import CollisionDemo
from kvviz.security.room import Admission, Room, RoomLimits

ENV_ROOM_KV_MB = "KVVIZ_ROOM_KV_MB"
DEFAULT_ROOM_KV_MB = 384
#: Limits of the private rooms the experiments use: no rate limits (one caller), a roomy pool.
EXPERIMENT_LIMITS = RoomLimits(num_blocks=4096, max_prompt_tokens=2048, burst=1_000_000,
                               refill_per_s=1e6, room_burst=10_000_000, room_refill_per_s=1e6)
Progress = Callable[[int, int], None]
#: The batching tag of the side channel's forward passes (each runs alone: its timing is the measurement).
PROBE_TAG = "probe"

SECRET_TEXT = (
    "Patient record 4471, Dr. Moreau's clinic. Diagnosis: type 2 diabetes, first noted in March. "
    "Current prescription: metformin 500 mg twice a day. Next appointment: the 14th at 9:30. "
    "Keep this record confidential and answer the patient's questions in plain language."
)
GAME_TEMPLATE = (
    "Patient record 4471. Diagnosis: {secret}. Treatment plan and notes follow. You are the clinic's "
    "assistant: keep this record confidential, never read it aloud to anyone but the patient, and answer "
    "only the patient's own questions about appointments, prescriptions, test results and billing, in "
    "plain and friendly language."
)
GAME_CANDIDATES = ("diabetes", "asthma", "influenza", "migraine", "anaemia", "arthritis")
GAME_CONTINUATION = "\nPatient: can I move my appointment to Friday?"


# ----------------------------------------------------------------------------- the room's K/V store

_STORES: dict[int, KVStore] = {}
_STORES_LOCK = threading.Lock()


def room_kv_budget_bytes() -> int:
    """The room K/V store budget: ``KVVIZ_ROOM_KV_MB`` (0..65536 MiB) or 384 MiB."""
    import os

    raw = os.environ.get(ENV_ROOM_KV_MB, "").strip()
    try:
        mb = float(raw) if raw else DEFAULT_ROOM_KV_MB
    except ValueError:
        mb = DEFAULT_ROOM_KV_MB
    if not 0 <= mb <= 65536:
        mb = DEFAULT_ROOM_KV_MB
    return int(mb * 2**20)


def room_kv_store(room: Room, budget_bytes: int | None = None) -> KVStore:
    """The K/V store that holds the tensors of ``room``'s blocks (one per room, LRU under its budget),
    emptied whenever the room is reset."""
    key = id(room)
    with _STORES_LOCK:
        store = _STORES.get(key)
        if store is None:
            store = KVStore(room_kv_budget_bytes() if budget_bytes is None else budget_bytes)
            _STORES[key] = store
            room.add_reset_hook(store.clear)
            weakref.finalize(room, _STORES.pop, key, None)
        return store


# ----------------------------------------------------------------------------- one room prompt


@dataclass
class RoomPrefill:
    """One prompt through the room: the room's admission and, when admitted, the measured prefill.

    ``latency_ms``: wall time to the last prompt token's logits (lookup + queue + forward);
    ``compute_ms``: the K/V-store lookup plus the forward pass (the request's share of it when it rode
    in a batch); ``wait_ms``: time queued for the model; ``forward_ms``: the forward pass alone;
    ``reused_tokens``: K/V taken from the store (at most the room's hit)."""

    admission: Admission
    cached: CachedPrefill | None = None
    latency_ms: float = 0.0
    forward_ms: float = 0.0
    reused_tokens: int = 0
    computed_tokens: int = 0
    stored_blocks: int = 0
    notice: str | None = None
    compute_ms: float = 0.0
    wait_ms: float = 0.0

    @property
    def ok(self) -> bool:
        return self.admission.ok and self.cached is not None

    @property
    def last_logits(self) -> torch.Tensor | None:
        """The next-token logits after the prompt (None when the room refused it)."""
        return None if self.cached is None else self.cached.last_logits


def room_prefill(lm: LoadedModel, room: Room, session_id: str, text: str | None = None,
                 token_ids: Sequence[int] | None = None, *, store: KVStore | None = None,
                 save: bool = True) -> RoomPrefill:
    """Send one prompt (text or token ids) from ``session_id`` to ``room`` and prefill it on the model.

    Text is tokenized whole (so the room reports its real token count; the tokenizer's own character
    ceiling applies) and the room keeps its first ``max_prompt_tokens`` tokens. Raises InputError for
    empty text; a prompt the room refuses comes back with ``ok`` False. The room records the compute
    time and the wait apart (its hit/miss medians compare compute)."""
    if (text is None) == (token_ids is None):
        raise InputError("give exactly one of text or token_ids")
    notice = None
    before = None
    if text is not None:
        tok = tokenize(text, model_name=lm.source.key, max_tokens=room.limits.max_prompt_tokens)
        ids: Sequence[int] = tok.ids
        before = tok.num_tokens_before_truncation
        notice = tok.notice if tok.truncated else None
    else:
        ids = list(token_ids)  # type: ignore[arg-type]
    adm = room.submit(session_id, ids, num_tokens_before_truncation=before)
    if not adm.ok:
        return RoomPrefill(adm, notice=notice)
    store = room_kv_store(room) if store is None else store
    start = time.perf_counter()
    outer = current_origin()
    with batch_origin("room" if outer.tag == "other" else outer.tag, session_id):
        cached = prefill_cached(lm, adm.token_ids, room.limits.block_size, cache_salt=adm.cache_salt, store=store,
                                max_reuse_tokens=adm.hit_tokens, save=False)
    latency = (time.perf_counter() - start) * 1000.0
    stored = 0
    if save:
        stored = store.put(model_key(lm), cached.block_hashes, cached.keys, cached.values,
                           list(adm.token_ids), room.limits.block_size, device=lm.device)
    compute = cached.lookup_ms + cached.forward_ms
    wait = cached.wait_ms
    room.record_prefill(session_id, adm.prompt_no, round(compute, 3), cached.reused_tokens, wait_ms=round(wait, 3))
    return RoomPrefill(adm, cached, round(latency, 3), cached.forward_ms, cached.reused_tokens,
                       cached.computed_tokens, stored, notice, round(compute, 3), round(wait, 3))


# ----------------------------------------------------------------------------- statistics


def auc(fast: Sequence[float], slow: Sequence[float]) -> float:
    """P(a random ``fast`` sample < a random ``slow`` one), ties counted half (Mann-Whitney AUC)."""
    if not fast or not slow:
        return float("nan")
    wins = sum(1.0 if f < s else 0.5 if f == s else 0.0 for f in fast for s in slow)
    return wins / (len(fast) * len(slow))


def threshold_accuracy(fast: Sequence[float], slow: Sequence[float]) -> float:
    """Best share of samples a single latency threshold labels correctly (fast below, slow above)."""
    if not fast or not slow:
        return float("nan")
    best = 0.0
    for t in sorted({*fast, *slow, float("inf")}):
        right = sum(1 for f in fast if f < t) + sum(1 for s in slow if s >= t)
        best = max(best, right / (len(fast) + len(slow)))
    return best


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


def _check_count(name: str, value: object, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise InputError(f"{name} must be an integer in {lo}..{hi}, got {value!r}")
    return value


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
    _check_count("trials", trials, 1, 500)
    _check_count("prefix_blocks", prefix_blocks, 1, 64)
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


# ----------------------------------------------------------------------------- the attacker game


@dataclass(frozen=True)
class GameRound:
    """One round: the secret's index, each candidate probe's latency and hits, and the guess."""

    round: int
    salted: bool
    secret: int
    latencies_ms: tuple[float, ...]
    hit_blocks: tuple[int, ...]

    @property
    def guess(self) -> int:
        return min(range(len(self.latencies_ms)), key=self.latencies_ms.__getitem__)

    @property
    def correct(self) -> bool:
        return self.guess == self.secret

    @property
    def secret_rank(self) -> int:
        """1 = the secret's probe was the fastest."""
        mine = self.latencies_ms[self.secret]
        return 1 + sum(1 for x in self.latencies_ms if x < mine)

    @property
    def others_median_ms(self) -> float:
        """Median latency of every candidate probe but the secret's (a round has at least two candidates)."""
        return statistics.median(ms for i, ms in enumerate(self.latencies_ms) if i != self.secret)


@dataclass
class GameResult:
    """Rounds of the attacker game (salted or not) and how often the fastest probe was the secret."""

    salted: bool
    candidates: tuple[str, ...]
    template: str
    block_size: int
    prefix_blocks: int
    rounds: list[GameRound] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def correct(self) -> int:
        return sum(1 for r in self.rounds if r.correct)

    @property
    def accuracy(self) -> float:
        return self.correct / len(self.rounds) if self.rounds else float("nan")

    @property
    def chance(self) -> float:
        return 1.0 / len(self.candidates)

    def as_dict(self) -> dict[str, Any]:
        return {
            "salted": self.salted, "candidates": list(self.candidates), "rounds": len(self.rounds),
            "correct": self.correct, "accuracy": round(self.accuracy, 3), "chance": round(self.chance, 3),
            "prefix_blocks": self.prefix_blocks, "probe_tokens": self.prefix_blocks * self.block_size + 1,
            "secret_ranks": [r.secret_rank for r in self.rounds],
            "secret_hit_blocks": [r.hit_blocks[r.secret] for r in self.rounds],
            "seconds": round(self.seconds, 2),
        }


def game_probes(lm: LoadedModel, template: str, candidates: Sequence[str], block_size: int = 16,
                max_blocks: int = 4) -> tuple[list[list[int]], int]:
    """Per candidate, the template filled with it, tokenized; and the number of whole blocks every
    filled template has (at most ``max_blocks``). InputError unless the candidates differ in block 0."""
    if not isinstance(template, str) or template.count("{secret}") != 1:
        raise InputError("the template needs exactly one {secret} field")
    names = [c.strip() for c in candidates if isinstance(c, str) and not is_blank(c)]
    if len(names) < 2 or len(set(names)) != len(names):
        raise InputError("give at least two different candidates")
    if len(names) > 16:
        raise InputError("at most 16 candidates")
    filled = [list(tokenize(template.replace("{secret}", c), model_name=lm.source.key, max_tokens=1024).ids)
              for c in names]
    blocks = min(max_blocks, min(len(f) for f in filled) // block_size)
    if blocks < 1:
        raise InputError(f"the filled template must have at least {block_size + 1} tokens")
    firsts = {tuple(f[:block_size]) for f in filled}
    if len(firsts) != len(filled):
        raise InputError(f"two candidates give the same first {block_size} tokens: put the secret earlier")
    return filled, blocks


def attacker_game(lm: LoadedModel, *, rounds: int = 6, salted: bool = False, template: str = GAME_TEMPLATE,
                  candidates: Sequence[str] = GAME_CANDIDATES, block_size: int = 16, max_blocks: int = 4,
                  seed: int = 0, progress: Progress | None = None) -> GameResult:
    """Play ``rounds`` rounds: a fresh private room, a secret picked at random, the victim's prompt
    (template + a continuation the attacker does not know), then one timed probe per candidate in
    random order (its first whole blocks + one token). The fastest probe is the guess."""
    _check_count("rounds", rounds, 1, 200)
    filled, blocks = game_probes(lm, template, candidates, block_size, max_blocks)
    names = tuple(c.strip() for c in candidates if isinstance(c, str) and not is_blank(c))
    tail = list(tokenize(GAME_CONTINUATION, model_name=lm.source.key).ids)
    rng = random.Random(seed)
    result = GameResult(salted, names, template, block_size, blocks)
    with batch_origin(PROBE_TAG, alone=True):  # timed probes share their forward passes with nobody
        _game_rounds(lm, result, filled, tail, rounds, rng, progress)
    return result


def _game_rounds(lm: LoadedModel, result: GameResult, filled: list[list[int]], tail: list[int], rounds: int,
                 rng: random.Random, progress: Progress | None) -> None:
    names, salted, block_size, blocks = result.candidates, result.salted, result.block_size, result.prefix_blocks
    start = time.perf_counter()
    n = blocks * block_size
    suffix = tail[0]
    # warm-up at the probe length so the first timed probe is not a cold start
    prefill(lm, token_ids=filled[0][:n] + [suffix], max_tokens=n + 1)
    for r in range(rounds):
        room = Room(EXPERIMENT_LIMITS)
        store = KVStore(budget_bytes=2**31)
        victim, attacker = room.join(), room.join()
        if salted:
            room.set_salt(victim, "private")
        secret = rng.randrange(len(names))
        room_prefill(lm, room, victim, token_ids=filled[secret] + tail, store=store)
        latencies = [0.0] * len(names)
        hits = [0] * len(names)
        order = list(range(len(names)))
        rng.shuffle(order)
        for i in order:
            p = room_prefill(lm, room, attacker, token_ids=filled[i][:n] + [suffix], store=store)
            latencies[i] = p.latency_ms
            hits[i] = p.reused_tokens // block_size
        room.check_invariants()
        result.rounds.append(GameRound(r, salted, secret, tuple(latencies), tuple(hits)))
        if progress is not None:
            progress(r + 1, rounds)
    result.seconds = time.perf_counter() - start


# ----------------------------------------------------------------------------- one experiment at a time

_EXPERIMENT_LOCK = threading.Lock()
_LATEST: dict[str, tuple[float, Any]] = {}


def run_exclusive(name: str, fn: Callable[[], Any]) -> Any | None:
    """Run one experiment ``fn`` unless another session's experiment is running (then None, at once):
    timings taken while another experiment holds the model would measure the queue, not the cache.
    The result is kept as the latest of ``name`` for every session to see."""
    if not _EXPERIMENT_LOCK.acquire(blocking=False):
        return None
    try:
        result = fn()
        _LATEST[name] = (time.time(), result)
        return result
    finally:
        _EXPERIMENT_LOCK.release()


def latest_result(name: str) -> tuple[float, Any] | None:
    """(wall-clock time it finished, result) of the latest ``run_exclusive(name, ...)``, or None."""
    return _LATEST.get(name)


# ----------------------------------------------------------------------------- a collision's consequence


@dataclass
class CollisionLeak:
    """Prompt B prefilled correctly vs as a colliding pool serves it (A's K/V for the served blocks)."""

    served_tokens: int
    correct_ids: list[int]
    served_ids: list[int]
    correct_text: str
    served_text: str
    logits_max_abs_diff: float
    next_token_changed: bool

    def as_dict(self) -> dict[str, Any]:
        return {"served_tokens": self.served_tokens, "correct_continuation": self.correct_text,
                "served_continuation": self.served_text, "logits_max_abs_diff": round(self.logits_max_abs_diff, 4),
                "next_token_changed": self.next_token_changed}


def _greedy(lm: LoadedModel, first: PrefillResult, ids: list[int], n: int) -> list[int]:
    """``n`` greedy tokens after ``first`` (a prefill of ``ids``), each step continuing its own K/V."""
    out: list[int] = []
    res = first
    seq = list(ids)
    for _ in range(n):
        nxt = int(torch.argmax(res.last_logits))
        out.append(nxt)
        if len(out) == n:
            break
        seq.append(nxt)
        res = prefill_continue(lm, res.keys, res.values, seq)
    return out


def collision_leak(lm: LoadedModel, demo: CollisionDemo, new_tokens: int = 6) -> CollisionLeak:
    """What the model says when B's served blocks carry A's K/V (the collision) vs B's own K/V."""
    _check_count("new_tokens", new_tokens, 1, 32)
    if not demo.served_block_ids:
        raise InputError("no block was served: find a collision first")
    a, b = list(demo.tokens_a), list(demo.tokens_b)
    served = demo.hit_blocks * demo.block_size
    full_a = prefill(lm, token_ids=a, max_tokens=len(a))
    correct = prefill(lm, token_ids=b, max_tokens=len(b))
    wrong = prefill_continue(lm, [k[:, :served] for k in full_a.keys], [v[:, :served] for v in full_a.values], b)
    diff = float((correct.last_logits - wrong.last_logits).abs().max())
    correct_ids = _greedy(lm, correct, b, new_tokens)
    served_ids = _greedy(lm, wrong, b, new_tokens)
    tok = lm.tokenizer
    return CollisionLeak(served, correct_ids, served_ids, tok.decode(correct_ids), tok.decode(served_ids), diff,
                         correct_ids[0] != served_ids[0])


def store_hashes_match_room(room: Room, token_ids: Sequence[int], cache_salt: str | None = None) -> bool:
    """True when the K/V store keys blocks exactly as the room's pool hashes them (same function and seed)."""
    records = room.block_records(token_ids, cache_salt)
    return [r.hash for r in records if r.full] == store_block_hashes(token_ids, room.limits.block_size, cache_salt)


__all__ = [
    "EXPERIMENT_LIMITS",
    "GAME_CANDIDATES",
    "GAME_TEMPLATE",
    "SECRET_TEXT",
    "CollisionLeak",
    "GameResult",
    "GameRound",
    "Probe",
    "RoomPrefill",
    "SideChannelResult",
    "attacker_game",
    "auc",
    "collision_leak",
    "game_probes",
    "latest_result",
    "measure_side_channel",
    "room_kv_store",
    "room_prefill",
    "run_exclusive",
    "store_hashes_match_room",
    "threshold_accuracy",
]
