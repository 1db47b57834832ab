"""Sampled mode on multi-turn conversation traffic repeated several times (one block shared by every
request, long shared prefixes, every block reused one cycle later): the stated error must hold."""

from __future__ import annotations

import json

from kvviz.analysis.workload.columns import as_columns
from kvviz.analysis.workload.gen import WorkloadGenConfig, generate
from kvviz.analysis.workload.parse import parse_trace
from kvviz.analysis.workload.reuse_distance import analyze, log_grid
from kvviz.analysis.workload.sample import analyze_sampled

BS = 64


def conversation_trace(requests: int = 800, repeats: int = 10, seed: int = 3):
    """Chat sessions behind one one-block system prompt (the block every request starts with), played
    ``repeats`` times with the same block ids, as a production trace replayed in a loop."""
    cfg = WorkloadGenConfig(num_requests=requests, block_size=BS, seed=seed, system_prompts=1,
                            system_tokens=(BS, BS), chat_share=1.0, agent_share=0.0, max_turns=20,
                            turn_tokens=(40, 400), answer_tokens=(80, 500))
    lines = generate(cfg)
    span = lines[-1]["timestamp"] + 1
    looped = [dict(x, timestamp=x["timestamp"] + k * span) for k in range(repeats) for x in lines]
    return as_columns(parse_trace("\n".join(json.dumps(x) for x in looped), BS))


def test_the_stated_error_holds_on_looped_conversations():
    cols = conversation_trace()
    assert len({int(cols.blocks[o]) for o in cols.offsets[:-1]}) == 1  # one block shared by every request
    exact = analyze(cols)
    rate, salts = 0.1, range(8)
    covered = points = 0
    for salt in salts:
        sp = analyze_sampled(cols, rate, salt)
        grid = [c for c in log_grid(cols.num_blocks, 30) if c >= sp.resolved_from]
        real = [abs(sp.hit_rate(c) - exact.hit_rate(c)) for c in grid]
        bars = [sp.error(c) for c in grid]
        covered += sum(r <= b for r, b in zip(real, bars, strict=True))
        points += len(grid)
        assert max(real) <= max(bars), (salt, max(real), max(bars))  # the reported hit_rate_error holds
    assert covered >= 0.9 * points, (covered, points)
