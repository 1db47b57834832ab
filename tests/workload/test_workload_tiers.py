"""The two-tier grid (device block pool LRU + a host tier under vLLM 0.33.0's offloading rules) equals the
plain step-by-step replay exactly, on generated traces, token lines and the bundled example trace."""

from __future__ import annotations

import json
import random

import pytest

from kvviz.analysis.workload.example import EXAMPLE_PATH
from kvviz.analysis.workload.gen import WorkloadGenConfig, generate
from kvviz.analysis.workload.parse import parse_trace
from kvviz.analysis.workload.reuse_distance import analyze, log_grid
from kvviz.analysis.workload.tiers import replay_two_tier, two_tier_grid


def _check_grid(trace, devs, hosts):
    grid = two_tier_grid(trace, devs, hosts)
    assert grid.device_capacities == sorted(set(devs)) and grid.host_capacities == sorted(set(hosts))
    profile = analyze(trace)
    for k, d in enumerate(grid.device_capacities):
        assert grid.device_tokens[k] == profile.hit_tokens(d)  # the device tier is the one-pass LRU curve
        for h, host in enumerate(grid.host_capacities):
            steps = replay_two_tier(trace, d, host)
            assert grid.device_tokens[k] == sum(s.device_tokens for s in steps), (d, host)
            assert grid.host_tokens[h, k] == sum(s.host_tokens for s in steps), (d, host)
            assert grid.host_loaded[h, k] == sum(s.host_blocks for s in steps), (d, host)
            if host:
                assert grid.host_stored[h] == sum(s.stored for s in steps), (d, host)
                assert grid.host_refused[h] == sum(s.refused for s in steps), (d, host)
            else:
                assert grid.host_tokens[h, k] == 0 and grid.host_stored[h] == 0
    return grid


@pytest.mark.parametrize("seed", range(3))
def test_grid_equals_the_plain_replay_on_a_generated_trace(seed):
    cfg = WorkloadGenConfig(num_requests=300, block_size=256, seed=seed, system_tokens=(300, 1500),
                            agent_prompt_tokens=(500, 2500), oneoff_tokens=(100, 3000))
    trace = parse_trace("\n".join(json.dumps(x) for x in generate(cfg)), 256)
    u = trace.num_blocks
    grid = _check_grid(trace, log_grid(u, 6), [0, 3, 10, u // 20, u // 5, u])
    assert grid.host_tokens[-1].max() > 0 and grid.host_refused[1] > 0  # 3 blocks refuse long prompts


def test_grid_equals_the_plain_replay_on_the_bundled_example():
    trace = parse_trace(EXAMPLE_PATH.read_text(), 512)
    u = trace.num_blocks
    grid = _check_grid(trace, [50, 400, 2000], [0, 200, 2000, u])
    rows = grid.rows(bytes_per_block=1000.0)
    assert len(rows) == 12 and all(r["hit_rate"] <= 1.0 for r in rows)
    big = next(r for r in rows if r["device_blocks"] == 50 and r["host_blocks"] == u)
    assert big["host_hit_rate"] > 0.1  # a host tier as large as the trace recovers what 50 device blocks lose
    assert big["load_bytes_per_s"] == pytest.approx(big["host_blocks_loaded"] * 1000.0 / grid.duration_s)


def _token_lines(seed: int, bs: int = 4, n: int = 120) -> str:
    rng = random.Random(seed)
    systems = [[rng.randrange(9) for _ in range(bs * rng.randint(1, 4) + rng.randint(0, 2))] for _ in range(4)]
    out = []
    for _ in range(n):  # some prompts end on a block boundary: vLLM recomputes their last token
        body = [rng.randrange(4) for _ in range(rng.randint(0, 3 * bs))]
        out.append(json.dumps({"token_ids": rng.choice(systems) + body}))
    return "\n".join(out)


@pytest.mark.parametrize("seed", range(4))
def test_grid_equals_the_plain_replay_on_token_lines(seed):
    trace = parse_trace(_token_lines(seed), 4)
    _check_grid(trace, [1, 2, 4, 8, 30], [0, 1, 3, 6, 12, 40, 10_000])


def test_a_host_hit_after_a_device_miss_by_hand():
    # bs 4; device 2 blocks, host 8. A = blocks a1 a2 a3 (12 tokens + 1), B evicts A from the device;
    # A again: the device has nothing of A, the host loads a1..a3 (12 tokens, 3 blocks).
    a = {"token_ids": [1] * 4 + [2] * 4 + [3] * 4 + [9]}
    b = {"token_ids": [5] * 4 + [6] * 4 + [9]}
    trace = parse_trace("\n".join(json.dumps(x) for x in (a, b, a)), 4)
    steps = replay_two_tier(trace, 2, 8)
    assert [(s.device_tokens, s.host_tokens, s.host_blocks) for s in steps] == [(0, 0, 0), (0, 0, 0), (0, 12, 3)]
    grid = two_tier_grid(trace, [2], [8])
    assert (grid.device_tokens[0], grid.host_tokens[0, 0], grid.host_loaded[0, 0]) == (0, 12, 3)


def test_a_prompt_ending_on_a_block_boundary_recomputes_its_last_token():
    a = {"token_ids": [1] * 4 + [2] * 4}  # 2 full blocks; the device lookup may hit only the first
    trace = parse_trace("\n".join(json.dumps(x) for x in (a, a)), 4)
    steps = replay_two_tier(trace, 10, 10)
    # second request: device hits block 1 (4 tokens), the host loads block 2 and the last token is recomputed
    assert (steps[1].device_tokens, steps[1].host_tokens, steps[1].host_blocks) == (4, 3, 1)
    assert two_tier_grid(trace, [10], [10]).host_tokens[0, 0] == 3


def test_a_prompt_longer_than_the_host_tier_is_not_stored():
    a = {"token_ids": [1] * 4 + [2] * 4 + [3] * 4 + [9]}
    trace = parse_trace("\n".join(json.dumps(x) for x in (a, a)), 4)
    steps = replay_two_tier(trace, 1, 2)
    assert steps[0].refused and steps[0].stored == 0 and steps[1].host_tokens == 0
    grid = two_tier_grid(trace, [1], [2, 3])  # the one device block keeps a1 (touched last): host a2, a3
    assert grid.host_refused.tolist() == [2, 0] and grid.host_tokens[:, 0].tolist() == [0, 8]
    assert grid.device_tokens.tolist() == [4]


def test_bad_capacities_are_refused():
    trace = parse_trace(json.dumps({"token_ids": [1, 2, 3, 4, 5]}), 4)
    for devs, hosts in (([], [1]), ([0], [1]), ([1], [-1]), ([1], [True]), (list(range(1, 70)), [1])):
        with pytest.raises(ValueError):
            two_tier_grid(trace, devs, hosts)
