"""A fleet whose replicas have a host-memory tier (vLLM 0.33.0 KV offloading: BlockStored/BlockRemoved
with medium "CPU" beside the device's "GPU"): each replica's blocks per medium come from its events, and
llm-d's longest-prefix score weighs each leading block by its best medium (GPU 1.0, CPU 0.8)."""

from __future__ import annotations

import time

import pytest
from live_testpub import WirePublisher, free_port, h

from kvviz.cli.watch_fleet import fleet_report
from kvviz.fleet.fleet import Fleet, parse_replicas

WAIT_S = 30
TOKENS = list(range(12))  # three blocks of 4


def _until(cond, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


@pytest.fixture
def fleet_abc():
    ports = {n: free_port(1) for n in "abc"}
    pubs = {n: WirePublisher(p, None, rank=0) for n, p in ports.items()}
    fleet = Fleet(parse_replicas([f"{n}=tcp://127.0.0.1:{p}" for n, p in ports.items()])).start()
    for pub in pubs.values():
        pub.wait_subscribed()
    yield fleet, pubs
    fleet.stop()
    for pub in pubs.values():
        pub.close()


def _publish(pubs: dict[str, WirePublisher]) -> None:
    a, b, c = pubs["a"], pubs["b"], pubs["c"]
    # a: the three blocks on the device only
    a.publish([a.stored([1, 2, 3], None, TOKENS)])
    # b: computed on the device, copied to host memory, then evicted from the device
    b.publish([b.stored([1, 2, 3], None, TOKENS)])
    b.publish([b.stored([1, 2, 3], None, TOKENS, medium="CPU")])
    b.publish([b.removed([1, 2, 3], medium="GPU")])
    # c: blocks 1-2 on both tiers, block 3 only in host memory
    c.publish([c.stored([1, 2, 3], None, TOKENS, medium="CPU"), c.stored([1, 2], None, TOKENS[:8])])


def test_blocks_by_medium_per_replica_and_weighted_score(fleet_abc) -> None:
    fleet, pubs = fleet_abc
    _publish(pubs)
    want = (1, 3, 1)
    _until(lambda: tuple(fleet.subscribers[n].summary()["batches"] for n in "abc") == want, "every batch applied")
    healths = {x.name: x for x in fleet.healths()}
    assert {n: healths[n].blocks_by_medium for n in "abc"} == {
        "a": {"GPU": 3}, "b": {"CPU": 3}, "c": {"CPU": 3, "GPU": 2}}
    assert [healths[n].blocks_held for n in "abc"] == [3, 3, 3]  # distinct hashes, any medium
    views, r = fleet.route([h(1), h(2), h(3)], 12, 4)
    assert [v.held for v in views][2] == (frozenset({"GPU", "CPU"}),) * 2 + (frozenset({"CPU"}),)
    scores = {s.name: s for s in r.scores}
    assert scores["a"].longest_prefix == pytest.approx(3.0)
    assert scores["b"].longest_prefix == pytest.approx(2.4)  # 3 x 0.8: host memory only
    assert scores["c"].longest_prefix == pytest.approx(2.8)  # 1.0 + 1.0 + 0.8
    assert [scores[n].prefix_blocks for n in "abc"] == [3, 3, 3]  # every tier is a hit for the engine
    assert r.picks["longest_prefix"] == "a"
    # Dynamo's overlap counts leading blocks on any tier: all three tie, the first listed wins
    assert len({scores[n].overlap_cost for n in "abc"}) == 1 and r.picks["overlap_cost"] == "a"
    report = fleet_report(fleet, None, None, "sha256", None, {}, {})
    assert [row["blocks_by_medium"] for row in report["replicas"]] == [
        {"GPU": 3}, {"CPU": 3}, {"CPU": 3, "GPU": 2}]
