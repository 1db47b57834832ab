"""The two-tier grid with an ARC host tier (vLLM 0.33.0's eviction_policy "arc") equals the plain step-by-step
replay exactly (generated traces, token lines, the bundled example), ARC keeps a reused prefix through a scan
of one-off prompts that LRU loses, and the CLI's --kv-offloading-eviction-policy reaches the grid."""

from __future__ import annotations

import json

import pytest
from test_workload_tiers import _token_lines

from kvviz.analysis.workload.example import EXAMPLE_PATH
from kvviz.analysis.workload.gen import WorkloadGenConfig, generate
from kvviz.analysis.workload.parse import parse_trace
from kvviz.analysis.workload.reuse_distance import log_grid
from kvviz.analysis.workload.tiers import replay_two_tier, two_tier_grid
from kvviz.cli import main


def _check_arc_grid(trace, devs, hosts):
    grid = two_tier_grid(trace, devs, hosts, "arc")
    lru = two_tier_grid(trace, devs, hosts)
    assert (grid.device_tokens == lru.device_tokens).all()  # the device tier does not depend on the host's policy
    for k, d in enumerate(grid.device_capacities):
        for h, host in enumerate(grid.host_capacities):
            steps = replay_two_tier(trace, d, host, "arc")
            assert grid.device_tokens[k] == sum(s.device_tokens for s in steps), (d, host)
            assert grid.host_tokens[h, k] == sum(s.host_tokens for s in steps), (d, host)
            assert grid.host_loaded[h, k] == sum(s.host_blocks for s in steps), (d, host)
            assert grid.host_stored[h] == sum(s.stored for s in steps), (d, host)
            assert grid.host_refused[h] == sum(s.refused for s in steps), (d, host)
    return grid, lru


@pytest.mark.parametrize("seed", range(2))
def test_arc_grid_equals_the_plain_replay_on_a_generated_trace(seed):
    cfg = WorkloadGenConfig(num_requests=200, block_size=256, seed=seed, system_tokens=(300, 1500),
                            agent_prompt_tokens=(500, 2500), oneoff_tokens=(100, 3000))
    trace = parse_trace("\n".join(json.dumps(x) for x in generate(cfg)), 256)
    u = trace.num_blocks
    grid, _ = _check_arc_grid(trace, log_grid(u, 4), [0, 3, u // 20, u // 5])
    assert grid.host_tokens[-1].max() > 0


@pytest.mark.parametrize("seed", range(3))
def test_arc_grid_equals_the_plain_replay_on_token_lines(seed):
    trace = parse_trace(_token_lines(seed), 4)
    _check_arc_grid(trace, [1, 2, 8], [0, 1, 3, 6, 12, 40])


def test_arc_grid_equals_the_plain_replay_on_the_bundled_example():
    trace = parse_trace(EXAMPLE_PATH.read_text(), 512)
    _check_arc_grid(trace, [50, 2000], [200, 2000])


def test_arc_keeps_a_reused_prefix_through_a_scan_that_lru_loses():
    hot = {"token_ids": [1] * 4 + [2] * 4 + [3] * 4 + [9]}  # 3 full blocks
    scan = [{"token_ids": [10 + i] * 4 + [40 + i] * 4 + [70 + i] * 4 + [9]} for i in range(3)]
    lines = [hot, hot, *scan, hot]  # hot reused once (T2), then 9 one-off blocks, then hot again
    trace = parse_trace("\n".join(json.dumps(x) for x in lines), 4)
    arc = replay_two_tier(trace, 1, 6, "arc")
    lru = replay_two_tier(trace, 1, 6)
    assert arc[-1].host_tokens == 12 and lru[-1].host_tokens == 0  # the one device block holds a scan block
    grid = two_tier_grid(trace, [1], [6], "arc")
    assert grid.host_tokens[0, 0] == sum(s.host_tokens for s in arc)


def test_the_cli_flag_reaches_the_grid(capsys):
    args = ["workload", "--trace", str(EXAMPLE_PATH), "--capacities", "100", "--host-blocks", "500", "--json"]
    assert main([*args, "--kv-offloading-eviction-policy", "arc"]) == 0
    tier = json.loads(capsys.readouterr().out)["two_tier"]
    assert tier["policy"] == "vllm-0.33.0-offloading-arc"
    trace = parse_trace(EXAMPLE_PATH.read_bytes())
    steps = replay_two_tier(trace, 100, 500, "arc")
    assert tier["rows"][0]["host_blocks_loaded"] == sum(s.host_blocks for s in steps)
    assert main([*args, "--kv-offloading-eviction-policy", "fifo"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err
