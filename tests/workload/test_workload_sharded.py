"""A directory of Parquet shards on a local two-worker Dask cluster (127.0.0.1, started here): the cluster's
partitions equal one process's bit for bit (the shuffle keeps the access order), and the pooled estimate
agrees with the exact curve within its error bar; the CLI's --engine and --address."""

from __future__ import annotations

import json

import pytest

from kvviz.analysis.workload.gen import WorkloadGenConfig, generate
from kvviz.analysis.workload.reuse_distance import analyze, log_grid
from kvviz.analysis.workload.sharded import analyze_sharded, partition_profile
from kvviz.analysis.workload.stream import read_trace
from kvviz.cli import main

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
distributed = pytest.importorskip("dask.distributed")


@pytest.fixture(scope="module")
def cluster():
    """Two spawned workers. A spawned process re-runs the parent's ``__main__`` file, so the process's own
    ``__main__`` is put back first: an AppTest run earlier in this process leaves a page script there, which
    each worker would run (and die on) at start."""
    import sys

    from main_module_util import PROCESS_MAIN

    left, sys.modules["__main__"] = sys.modules["__main__"], PROCESS_MAIN
    try:
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, host="127.0.0.1", processes=True,
                                      dashboard_address="127.0.0.1:0") as c:
            yield c
    finally:
        sys.modules["__main__"] = left


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    d = tmp_path_factory.mktemp("shards")
    lines = generate(WorkloadGenConfig(num_requests=2400, block_size=64, seed=2))
    for i in range(4):
        part = lines[i * 600:(i + 1) * 600]
        table = pa.table({"timestamp": [x["timestamp"] for x in part],
                          "input_length": [x["input_length"] for x in part],
                          "output_length": [x["output_length"] for x in part],
                          "hash_ids": pa.array([x["hash_ids"] for x in part], pa.list_(pa.int64()))})
        pq.write_table(table, d / f"part-{i:03d}.parquet")
    return d


def test_the_cluster_equals_one_process_and_the_exact_curve(cluster, shards):
    cols, _ = read_trace(shards, 64)
    rate = 0.5
    res = analyze_sharded(shards, rate, cluster.scheduler_address, 64)
    assert res.files == 4 and res.workers == 2 and res.bad.count == 0
    one = partition_profile(cols, rate)
    assert [g.hits_at.tolist() for g in res.profile.groups] == [g.hits_at.tolist() for g in one.groups]
    assert res.profile.num_block_accesses == cols.num_accesses and res.profile.num_requests == cols.num_requests
    exact = analyze(cols)
    grid = [c for c in log_grid(cols.num_blocks, 40) if c >= res.profile.resolved_from]
    assert len(grid) > 10
    for c in grid:
        assert abs(res.profile.hit_rate(c) - exact.hit_rate(c)) <= res.profile.error(c), c


def test_cli_engine_dask_with_an_address(cluster, shards, capsys):
    code = main(["workload", "--trace", str(shards), "--engine", "dask", "--address", cluster.scheduler_address,
                 "--block-size", "64", "--sample-rate", "0.5", "--capacities", "1000,10000", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["engine"] == "dask" and out["sampled"] is True and out["files"] == 4
    assert out["workers"] == 2 and out["partitions"] == 32 and out["bad_lines"]["count"] == 0
    assert [p["capacity_blocks"] for p in out["curve"]] == [1000, 10000] and 0 < out["hit_rate_error"] < 0.1
    code = main(["workload", "--trace", str(shards), "--engine", "dask", "--address", cluster.scheduler_address,
                 "--json"])  # block size 512 by default: every line of every file is bad
    err = capsys.readouterr().err
    assert code == 2 and "part-000.parquet: no line of the trace is usable" in err and err.count("\n") == 1


@pytest.mark.parametrize(("argv", "message"), [
    (["--engine", "ray"], "--engine ray is not supported"),
    (["--engine", "spark"], "unknown engine"),
    (["--address", "tcp://127.0.0.1:1"], "--address needs --engine dask"),
    (["--engine", "dask", "--memory-mb", "5"], "--sample-rate only"),
])
def test_cli_engine_refusals_are_one_line(shards, capsys, argv, message):
    code = main(["workload", "--trace", str(shards), *argv, "--json"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1
