"""The attacker game's round record (kvviz.experiments.security.attacker.GameRound), without the model (moved out of
tests/model/test_timing.py)."""

from __future__ import annotations

from kvviz.experiments.security.attacker import GameRound


def test_game_round_median_of_the_other_candidates():
    rnd = GameRound(round=0, salted=False, secret=1, latencies_ms=(9.0, 1.0, 4.0, 6.0), hit_blocks=(0, 1, 0, 0))
    assert rnd.others_median_ms == 6.0  # median of 9, 4, 6: the secret's 1.0 is left out
    assert GameRound(0, False, 0, (1.0, 3.0, 5.0), (1, 0, 0)).others_median_ms == 4.0
