"""``python -m kvviz watch`` over a fleet: three test publishers (vLLM 0.33.0's wire format) as
``--endpoint NAME=URL`` with matching ``--replay-endpoint``, a prompt routed by the three scorers, the
JSON shape the issue names; a demo fleet from ``publish-demo --replicas``; bad fleet input."""

from __future__ import annotations

import json
import threading

import pytest
from live_testpub import WirePublisher, free_port

from kvviz.cli import main
from kvviz.fleet.demo import SYSTEM_PROMPTS, DemoPublisher, synthetic_tokenizer
from kvviz.mirror.hashing import hash_block_chain, init_none_hash

JOIN_S = 60


def _watch(capsys: pytest.CaptureFixture, args: list[str], ready=None) -> dict:
    rc: list[int] = []
    thread = threading.Thread(target=lambda: rc.append(main(["watch", *args, "--json"])), daemon=True)
    thread.start()
    if ready is not None:
        ready()
    thread.join(JOIN_S)
    assert not thread.is_alive(), "watch did not stop"
    out = capsys.readouterr()
    assert rc == [0], out.err
    return json.loads(out.out)


def test_three_publishers_and_a_routed_prompt(capsys: pytest.CaptureFixture) -> None:
    ports = {n: free_port(2) for n in "abc"}
    pubs = {n: WirePublisher(p, p + 1, rank=0) for n, p in ports.items()}
    tokens = list(range(300, 364))  # 4 blocks of 16
    d = hash_block_chain(tokens, 16, "sha256", init_none_hash("sha256", None))
    try:
        S = {n: p.s["BlockStored"] for n, p in pubs.items()}
        pubs["a"].publish([S["a"](d[:2], None, tokens[:32], 16, None, "GPU", None)])
        pubs["b"].publish([S["b"](d[:4], None, tokens, 16, None, "CPU", None)])  # the whole prompt, on CPU
        pubs["c"].publish([S["c"](d[:3], None, tokens[:48], 16, None, "GPU", None)])
        args = [x for n, p in ports.items() for x in ("--endpoint", f"{n}=tcp://127.0.0.1:{p}",
                                                        "--replay-endpoint", f"{n}=tcp://127.0.0.1:{p + 1}")]
        out = _watch(capsys, [*args, "--batches", "1", "--timeout", "40", "--prompt-tokens", ",".join(map(str, tokens)),
                              "--load", "c=100"])
    finally:
        for p in pubs.values():
            p.close()
    reps = {r["name"]: r for r in out["replicas"]}
    assert list(reps) == ["a", "b", "c"]
    for r in reps.values():
        assert {"name", "connected", "blocks_held", "prefix_blocks", "decode_errors", "gaps_filled"} <= set(r)
        assert r["connected"] and r["decode_errors"] == 0
    assert [reps[n]["prefix_blocks"] for n in "abc"] == [2, 4, 3]
    assert [reps[n]["blocks_held"] for n in "abc"] == [2, 4, 3]
    # llm-d: a 2.0, b 4 x 0.8 = 3.2, c 3.0 -> b. Dynamo: a 2 + 4 = 6, b 0 + 4 = 4, c 1 + 104 -> b.
    assert reps["b"]["scores"] == {"longest_prefix": 3.2, "overlap_cost": 4.0}
    assert out["route"] == {"longest_prefix": "b", "overlap_cost": "b", "round_robin": "a"}
    assert out["cluster"] == {"distinct_blocks": 4, "shared_blocks": 3}
    assert out["prompt_blocks"] == 4 and out["block_size"] == 16 and out["reference"] == "vLLM 0.33.0"


def test_bare_urls_are_named_by_position_and_a_demo_fleet(capsys: pytest.CaptureFixture) -> None:
    base = free_port(4)
    demos = [DemoPublisher(f"tcp://127.0.0.1:{base + 2 * i}", f"tcp://127.0.0.1:{base + 2 * i + 1}", seed=i,
                           interval_s=0.01, max_batches=15, topic=f"kv@demo-{i}@smol").start() for i in range(2)]
    prompt = synthetic_tokenizer(0)(SYSTEM_PROMPTS[0])
    try:
        out = _watch(capsys, ["--endpoint", f"tcp://127.0.0.1:{base}", "--endpoint", f"tcp://127.0.0.1:{base + 2}",
                              "--replay-endpoint", f"tcp://127.0.0.1:{base + 1}",
                              "--replay-endpoint", f"tcp://127.0.0.1:{base + 3}",
                              "--batches", "15", "--timeout", "40", "--prompt-tokens", ",".join(map(str, prompt))])
    finally:
        for d in demos:
            d.stop()
    names = [r["name"] for r in out["replicas"]]
    assert names == ["0", "1"] and [r["pod"] for r in out["replicas"]] == ["demo-0", "demo-1"]
    for r, demo in zip(out["replicas"], demos, strict=True):
        assert r["batches"] == 15 and r["decode_errors"] == 0
        assert r["blocks_held"] == len(demo.workload.manager.block_pool.cached_block_hash_to_block)
    assert out["route"]["longest_prefix"] in names


@pytest.mark.parametrize("args,err", [
    (["--endpoint", "a=tcp://127.0.0.1:1", "--endpoint", "a=tcp://127.0.0.1:2"], "differ"),
    (["--endpoint", "a=tcp://127.0.0.1:1", "--replay-endpoint", "z=tcp://127.0.0.1:2"], "matches no"),
    (["--endpoint", "a=tcp://127.0.0.1:1", "--load", "b=3"], "no replica"),
    (["--endpoint", "a=tcp://127.0.0.1:1", "--load", "a=-3"], "whole number"),
    (["--endpoint", "a b=tcp://127.0.0.1:1"], "name"),
    (["--endpoint", "tcp://127.0.0.1:1", "--load", "0=3"], "fleet"),
])
def test_bad_fleet_input_is_one_line_exit_2(capsys: pytest.CaptureFixture, args: list[str], err: str) -> None:
    assert main(["watch", *args, "--seconds", "0.2", "--json"]) == 2
    line = capsys.readouterr().err
    assert line.startswith("error:") and line.count("\n") == 1 and err in line


def test_publish_demo_replicas_places_ports_and_topics(capsys: pytest.CaptureFixture) -> None:
    base = free_port(6)
    assert main(["publish-demo", "--synthetic", "--replicas", "3", "--endpoint", f"tcp://127.0.0.1:{base}",
                 "--interval", "0.01", "--max-batches", "5", "--seconds", "0.5", "--json"]) == 0
    reps = json.loads(capsys.readouterr().out)["replicas"]
    assert [(r["endpoint"], r["replay_endpoint"], r["topic"]) for r in reps] == [
        (f"tcp://127.0.0.1:{base + 2 * i}", f"tcp://127.0.0.1:{base + 2 * i + 1}", f"kv@demo-{i}@SmolLM2-135M-Instruct")
        for i in range(3)]


@pytest.mark.parametrize("args", [["--replicas", "0"], ["--replicas", "9"],
                                  ["--replicas", "2", "--replay-endpoint", "tcp://127.0.0.1:2"],
                                  ["--replicas", "3", "--endpoint", "tcp://127.0.0.1:65533"]])
def test_publish_demo_bad_replicas(capsys: pytest.CaptureFixture, args: list[str]) -> None:
    assert main(["publish-demo", "--synthetic", *args]) == 2
    assert capsys.readouterr().err.count("\n") == 1
