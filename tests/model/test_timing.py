"""The timing side channel and the attacker game on the real model (short prompts): cached probes are
faster (medians), salts remove the hits that cause it, the game's structure, a collision's served K/V,
and the timing CLI."""

from __future__ import annotations

import json

import pytest

from kvviz.cli import main
from kvviz.engine import get_engine_loop
from kvviz.experiments.security.attacker import attacker_game
from kvviz.experiments.security.collision_leak import collision_leak
from kvviz.experiments.security.collisions import DEFAULT_PROMPT_A, DEFAULT_PROMPT_B, force_collision
from kvviz.experiments.security.side_channel import measure_side_channel
from kvviz.model import InputError, load_model, tokenize

pytestmark = pytest.mark.model

CANDIDATES = ("asthma", "influenza", "migraine")


@pytest.fixture(scope="module")
def lm():
    return load_model()


@pytest.fixture(scope="module")
def loop():
    return get_engine_loop()


def test_cached_prefix_is_measurably_faster_and_salt_removes_the_hits(loop):
    plain = measure_side_channel(loop, trials=7, prefix_blocks=3, seed=1)
    assert plain.trials == 7 and len(plain.probes) == 14 and plain.probe_tokens == 49
    assert set(plain.cached_hit_blocks) == {3}  # every cached probe reused the victim's 3 blocks
    assert {p.hit_blocks for p in plain.probes if p.group == "uncached"} == {0}
    assert {p.computed_tokens for p in plain.probes if p.group == "cached"} == {1}
    # the measured ordering (medians over 7 trials; 1 vs 49 computed tokens), not absolute times
    assert plain.cached_median_ms < plain.uncached_median_ms
    assert plain.auc > 0.5 and plain.ratio > 1.0
    # its compute: every prefill it ran (probes, victims, warm-up), inside the run's length
    probes_s = sum(p.latency_ms for p in plain.probes) / 1000
    assert probes_s < plain.compute_s <= plain.seconds
    salted = measure_side_channel(loop, trials=3, prefix_blocks=3, salted=True, seed=1)
    assert {p.hit_blocks for p in salted.probes} == {0}  # salted victim: the probe hits nothing
    assert {p.computed_tokens for p in salted.probes} == {49}
    d = plain.as_dict()
    assert d["trials"] == 7 and d["probes"] == 14 and len(d["cached_ms"]) == 7
    lo, hi = d["cached_iqr_ms"]
    assert lo <= d["cached_median_ms"] <= hi and isinstance(d["within_noise"], bool)
    json.dumps(d)


def test_attacker_game_structure_and_salt(loop):
    plain = attacker_game(loop, rounds=2, candidates=CANDIDATES, seed=3)
    assert len(plain.rounds) == 2 and plain.chance == pytest.approx(1 / 3)
    for r in plain.rounds:
        assert len(r.latencies_ms) == 3 and all(ms > 0 for ms in r.latencies_ms)
        assert r.hit_blocks[r.secret] == plain.prefix_blocks  # only the secret's probe hits
        assert sum(r.hit_blocks) == plain.prefix_blocks
        assert 1 <= r.secret_rank <= 3 and r.correct == (r.guess == r.secret)
    assert plain.correct == sum(r.correct for r in plain.rounds)
    salted = attacker_game(loop, rounds=1, salted=True, candidates=CANDIDATES, seed=3)
    assert all(h == 0 for r in salted.rounds for h in r.hit_blocks)
    with pytest.raises(InputError):
        attacker_game(loop, rounds=1, template="no field here", candidates=CANDIDATES)
    with pytest.raises(InputError):
        attacker_game(loop, rounds=1, candidates=["same", "same"])
    with pytest.raises(InputError):
        attacker_game(loop, rounds=1, template="A. " * 20 + "{secret}", candidates=CANDIDATES)  # secret past block 0


def test_a_collision_serves_a_s_kv_to_b(lm):
    a = tokenize(DEFAULT_PROMPT_A).ids
    b = tokenize(DEFAULT_PROMPT_B).ids
    demo = force_collision(a, b, bits=8, vocab_size=lm.info.vocab_size)
    leak = collision_leak(lm, demo, new_tokens=3)
    assert leak.served_tokens == 16 and len(leak.correct_ids) == len(leak.served_ids) == 3
    assert leak.logits_max_abs_diff > 0.5  # another prompt's K/V change what the model computes
    json.dumps(leak.as_dict())


def test_timing_cli_json_and_errors(capsys):
    assert main(["timing", "--trials", "2", "--prefix-blocks", "2", "--salt", "on", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["trials"] == 2 and "unsalted" not in out
    assert out["salted"]["probes"] == 4 and out["salted"]["cached_hit_blocks"] == [0]
    assert main(["timing", "--trials", "0"]) == 2
    assert main(["timing", "--game-rounds", "1", "--candidates", "x", "--trials", "1", "--salt", "off"]) == 2
    assert main(["timing", "--model", " "]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert all(line.startswith("error:") for line in err) and len(err) == 3
    assert "--model is empty" in err[-1]
