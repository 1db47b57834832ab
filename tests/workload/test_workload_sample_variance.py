"""The sampled error's parts against what they claim to measure, over many independent hashes (salts) of one
trace: the kept blocks' own standard error is the spread of the estimate where only the choice of blocks
matters (past every reuse distance, the capacity axis plays no part); the kernel's replicates against a
list stack."""

from __future__ import annotations

import json
import statistics

import numpy as np

from kvviz.analysis.workload.columns import as_columns
from kvviz.analysis.workload.gen import WorkloadGenConfig, generate
from kvviz.analysis.workload.parse import parse_trace
from kvviz.analysis.workload.sample import analyze_sampled
from kvviz.analysis.workload.stack import group_bin, sampled_pass


def test_the_kept_blocks_own_error_is_the_spread_over_salts():
    lines = generate(WorkloadGenConfig(num_requests=600, block_size=64, seed=5))
    cols = as_columns(parse_trace("\n".join(json.dumps(x) for x in lines), 64))
    big = 4 * cols.num_blocks  # beyond every distance: the estimate is kept hit tokens over kept tokens
    for rate in (0.1, 0.3):
        runs = [analyze_sampled(cols, rate, salt) for salt in range(1, 41)]
        spread = statistics.stdev(sp.hit_rate(big) for sp in runs)
        stated = statistics.mean(sp.sample.block_error(big, sp.coverage) for sp in runs)
        assert 0.7 * spread <= stated <= 1.4 * spread, (rate, stated, spread)


def test_replicates_move_each_hit_by_the_signed_sum_of_the_blocks_above_it():
    # The kernel's signed Fenwick trees (renumbered when the touch times fill the tree: 3,000 touches of
    # 40 blocks renumber several times) against a list stack: replicate k moves a hit at distance d to
    # d +- scale x (sum of the signs, bit k, of the blocks touched since its block's last touch).
    rng = np.random.default_rng(7)
    num_blocks, reps, scale = 40, 3, 1.5
    reqs = [rng.choice(num_blocks, size=rng.integers(1, 5), replace=False) for _ in range(1000)]
    blocks = np.concatenate(reqs).astype(np.int32)
    starts = np.concatenate(([0], np.cumsum([len(r) for r in reqs]))).astype(np.int64)
    tok = rng.integers(1, 50, len(blocks)).astype(np.int32)
    signs = rng.integers(0, 256, num_blocks).astype(np.uint8)
    res = sampled_pass(blocks, starts, tok, np.ones(len(blocks), bool), np.zeros(len(blocks), np.uint8), 1,
                       num_blocks, signs, reps, scale)
    want = np.zeros_like(res.replica_hits)
    stack: list[int] = []  # most recent first
    for r in range(len(reqs)):
        for j in range(starts[r], starts[r + 1]):
            b = int(blocks[j])
            if b in stack:
                d = stack.index(b) + 1
                for k in range(reps):
                    above = sum(1 if (signs[a] >> k) & 1 else -1 for a in stack[: d - 1])
                    for m, step in enumerate((scale, -scale)):
                        moved = min(max(int(d + step * above + 0.5), 1), 2 * num_blocks)
                        want[2 * k + m, group_bin(moved)] += tok[j]
        for j in range(starts[r + 1] - 1, starts[r] - 1, -1):
            b = int(blocks[j])
            if b in stack:
                stack.remove(b)
            stack.insert(0, b)
    assert np.array_equal(res.replica_hits, np.cumsum(want, axis=1))
