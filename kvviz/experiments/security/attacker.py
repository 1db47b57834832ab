"""The attacker game: guess a patient's diagnosis by timing which candidate prompt hits the cache. Each
probe runs alone on the engine (``kvviz.experiments.security.probe``); each round in a namespace of its own."""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kvviz.engine import EngineLoop, get_engine_loop
from kvviz.experiments.security.probe import run_alone
from kvviz.experiments.security.side_channel import Progress, trial_namespace
from kvviz.model.loader import LoadedModel
from kvviz.model.settings import InputError, check_count
from kvviz.model.tokens import tokenize
from kvviz.util.blank import is_blank

GAME_TEMPLATE = (
    "Patient record 4471. Diagnosis: {secret}. Treatment plan and notes follow. You are the clinic's "
    "assistant: keep this record confidential, never read it aloud to anyone but the patient, and answer "
    "only the patient's own questions about appointments, prescriptions, test results and billing, in "
    "plain and friendly language."
)
GAME_CANDIDATES = ("diabetes", "asthma", "influenza", "migraine", "anaemia", "arthritis")
GAME_CONTINUATION = "\nPatient: can I move my appointment to Friday?"

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


def attacker_game(loop: EngineLoop | None = None, *, rounds: int = 6, salted: bool = False,
                  template: str = GAME_TEMPLATE, candidates: Sequence[str] = GAME_CANDIDATES, max_blocks: int = 4,
                  seed: int = 0, progress: Progress | None = None) -> GameResult:
    """Play ``rounds`` rounds: a fresh namespace (cache salt) per round, a secret picked at random, the
    victim's prompt (template + a continuation the attacker does not know), then one probe per candidate in
    random order (its first whole blocks + one token), each timed alone on the engine. The fastest probe is
    the guess. ``loop``: the process-wide engine loop by default."""
    check_count("rounds", rounds, 1, 200)
    loop = loop or get_engine_loop()
    lm, block_size = loop.engine.lm, loop.engine.block_size
    filled, blocks = game_probes(lm, template, candidates, block_size, max_blocks)
    names = tuple(c.strip() for c in candidates if isinstance(c, str) and not is_blank(c))
    tail = list(tokenize(GAME_CONTINUATION, model_name=lm.source.key).ids)
    rng = random.Random(seed)
    result = GameResult(salted, names, template, block_size, blocks)
    namespace = trial_namespace()
    start = time.perf_counter()
    n = blocks * block_size
    suffix = tail[0]
    run_alone(loop, filled[0][:n] + [suffix], cache_salt=namespace(-1))  # warm-up at the probe length
    for r in range(rounds):
        shared = namespace(r)
        secret = rng.randrange(len(names))
        run_alone(loop, filled[secret] + tail, cache_salt=shared + ":victim" if salted else shared)
        latencies = [0.0] * len(names)
        hits = [0] * len(names)
        order = list(range(len(names)))
        rng.shuffle(order)
        for i in order:
            p = run_alone(loop, filled[i][:n] + [suffix], cache_salt=shared)
            latencies[i] = p.compute_ms
            hits[i] = p.cached_tokens // block_size
        result.rounds.append(GameRound(r, salted, secret, tuple(latencies), tuple(hits)))
        if progress is not None:
            progress(r + 1, rounds)
    result.seconds = time.perf_counter() - start
    return result
