"""A fleet of three test publishers (vLLM 0.33.0's wire format) watched at once: the cluster index is the
union of what each published; a restarted replica is rebuilt; a vanished one goes stale within a bounded
time and leaves routing; garbage and a flood on one endpoint stall no other and stay within the caps."""

from __future__ import annotations

import time

import pytest
from live_testpub import WirePublisher, free_port, h

from kvviz.fleet.fleet import Fleet, parse_replicas

WAIT_S = 30


def _until(cond, what: str, wait_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + wait_s
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


class Three:
    """Three publishers a, b, c (PUB on port, replay on port + 1) and a fleet subscribed to them."""

    def __init__(self, replay: bool = True, **fleet_kw) -> None:
        self.ports = {n: free_port(2) for n in "abc"}
        self.pubs = {n: self._pub(n, replay) for n in "abc"}
        eps = [f"{n}=tcp://127.0.0.1:{p}" for n, p in self.ports.items()]
        replays = [f"{n}=tcp://127.0.0.1:{p + 1}" for n, p in self.ports.items()] if replay else []
        self.fleet = Fleet(parse_replicas(eps, replays), **fleet_kw).start()
        for pub in self.pubs.values():
            pub.wait_subscribed()
            if replay:
                pub.wait_replay_served()

    def _pub(self, name: str, replay: bool) -> WirePublisher:
        port = self.ports[name]
        return WirePublisher(port, port + 1 if replay else None, rank=0, topic=f"kv@pod-{name}@smol".encode())

    def batches(self, name: str) -> int:
        return self.fleet.subscribers[name].summary()["batches"]

    def close(self) -> None:
        self.fleet.stop()
        for pub in self.pubs.values():
            pub.close()


@pytest.fixture
def three():
    fleets: list[Three] = []
    yield lambda **kw: fleets.append(Three(**kw)) or fleets[-1]
    for f in fleets:
        f.close()


def _system_prompt(pub: WirePublisher):  # the same two blocks on every replica: a shared system prompt
    return pub.stored([1, 2], None, list(range(8)))


def test_index_is_the_union_of_what_each_published(three) -> None:
    t = three()
    a, b, c = t.pubs["a"], t.pubs["b"], t.pubs["c"]
    a.publish([_system_prompt(a), a.stored([10], 2, [8, 9, 10, 11])])
    b.publish([_system_prompt(b)])
    b.publish([b.stored([20, 21], 2, list(range(20, 28)), medium="CPU")])
    c.publish([_system_prompt(c), c.stored([3], 2, [8, 9, 10, 11])])
    c.publish([c.removed([3])])
    _until(lambda: (t.batches("a"), t.batches("b"), t.batches("c")) == (1, 2, 2), "every batch applied")
    G, C = frozenset({"GPU"}), frozenset({"CPU"})
    assert t.fleet.cluster_index() == {
        h(1): {"a": G, "b": G, "c": G}, h(2): {"a": G, "b": G, "c": G},
        h(10): {"a": G}, h(20): {"b": C}, h(21): {"b": C},
    }
    healths = {x.name: x for x in t.fleet.healths()}
    assert [healths[n].blocks_held for n in "abc"] == [3, 4, 2]
    assert [healths[n].distinct_prefixes for n in "abc"] == [1, 1, 1]  # b's CPU chain hangs under block 2
    assert healths["a"].pod == "pod-a" and healths["a"].model == "smol" and not healths["a"].stale
    # The prompt [system prompt, block 10]: a holds 3 leading blocks, b and c 2.
    views, r = t.fleet.route([h(1), h(2), h(10)], 12, 4)
    assert [v.prefix_blocks for v in views] == [3, 2, 2]
    assert r.picks["longest_prefix"] == "a" and r.picks["overlap_cost"] == "a"


def test_restart_is_rebuilt_and_a_vanished_replica_goes_stale(three) -> None:
    t = three(stale_after_s=0.5)
    for pub in t.pubs.values():
        pub.publish([_system_prompt(pub)])
    t.pubs["c"].publish([t.pubs["c"].stored([7, 8], 2, list(range(8)))])  # c alone holds the longest prefix
    _until(lambda: (t.batches("a"), t.batches("b"), t.batches("c")) == (1, 1, 2), "first batches")
    # b restarts: a new engine on the same ports clears its cache, then stores new blocks (seq from 0).
    t.pubs["b"].close()
    _until(lambda: not t.fleet.subscribers["b"].counters.ranks[0].connected, "b's disconnect seen")
    t.pubs["b"] = t._pub("b", True)
    t.pubs["b"].wait_subscribed()
    t.pubs["b"].publish([t.pubs["b"].cleared(), t.pubs["b"].stored([50], None, [1, 2, 3, 4])])
    _until(lambda: set(t.fleet.cluster_index()) - {h(1), h(2), h(7), h(8)} == {h(50)}
           and "b" not in t.fleet.cluster_index().get(h(1), {}), "b rebuilt from its new events")
    # c vanishes and stays away: stale within a bounded time, and out of routing.
    t.pubs["c"].close()
    start = time.monotonic()
    _until(lambda: t.fleet.is_stale("c"), "c marked stale", wait_s=10)
    assert time.monotonic() - start < 10
    views, r = t.fleet.route([h(1), h(2), h(7), h(8)], 16, 4)
    assert [v.prefix_blocks for v in views] == [2, 0, 4]  # c still shows what it held ...
    assert r.picks["longest_prefix"] == "a" and r.picks["overlap_cost"] == "a"  # ... but is never picked
    assert {x.name: x.stale for x in t.fleet.healths()} == {"a": False, "b": False, "c": True}


def test_garbage_and_a_flood_on_one_endpoint_stall_no_other(three) -> None:
    t = three(replay=False, max_blocks=500)
    a = t.pubs["a"]
    for i in range(600):  # wrong frame counts, short sequence frames, payloads that are not msgpack
        a.send_raw([[b"only one"], [b"", b"\x00\x01", b"x"], [b"", (i).to_bytes(8, "big"), b"\xc1 junk"]][i % 3])
    for i in range(30):  # a flood of distinct blocks: 3,000 stores against a cap of 500
        a.publish([a.stored(list(range(1000 + 100 * i, 1100 + 100 * i)), None, list(range(400)))])
    for n in "bc":
        t.pubs[n].publish([_system_prompt(t.pubs[n])])
    _until(lambda: t.batches("b") == 1 and t.batches("c") == 1, "b and c applied while a was flooded")
    _until(lambda: t.batches("a") == 30, "a's valid batches applied")
    ha = t.fleet.health("a")
    assert ha.decode_errors == 600 and ha.blocks_held == 500 and ha.overflow == 2500
    index = t.fleet.cluster_index()
    assert index[h(1)] == {"b": frozenset({"GPU"}), "c": frozenset({"GPU"})} and len(index) == 502


@pytest.mark.parametrize("specs,replays,dp,err", [
    ([], [], 1, "at least one"), (["a=tcp://127.0.0.1:1", "a=tcp://127.0.0.1:2"], [], 1, "differ"),
    (["a b=tcp://127.0.0.1:1"], [], 1, "name"), (["a=tcp://127.0.0.1:1"], ["z=tcp://127.0.0.1:2"], 1, "matches no"),
    ([f"tcp://127.0.0.1:{i}" for i in range(1, 18)], [], 1, "too many"),
    (["a=tcp://127.0.0.1:65535"], [], 2, "port"),
])
def test_bad_replica_lists(specs, replays, dp, err) -> None:
    with pytest.raises(ValueError, match=err):
        parse_replicas(specs, replays, dp)


def test_names_positions_and_dp_ranks() -> None:
    got = parse_replicas(["tcp://127.0.0.1:5557", "b=tcp://127.0.0.1:6000"], ["tcp://127.0.0.1:5558", "b=tcp://127.0.0.1:6001"], dp_size=2)
    assert [(r.name, r.endpoint, r.replay_endpoint) for r in got] == [
        ("0/dp0", "tcp://127.0.0.1:5557", "tcp://127.0.0.1:5558"), ("0/dp1", "tcp://127.0.0.1:5558", "tcp://127.0.0.1:5559"),
        ("b/dp0", "tcp://127.0.0.1:6000", "tcp://127.0.0.1:6001"), ("b/dp1", "tcp://127.0.0.1:6001", "tcp://127.0.0.1:6002")]


def test_a_third_shared_fleet_stops_the_least_recently_used_one() -> None:
    """The process keeps MAX_SHARED_FLEETS fleets; watching one more stops the oldest (the registry called
    ``Fleet.stop(timeout_s=...)``, which Fleet did not take: the page raised a TypeError)."""
    from kvviz.fleet.fleet import MAX_SHARED_FLEETS, shared_fleet, stop_shared_fleet

    lists = [parse_replicas([f"r{i}=tcp://127.0.0.1:{free_port()}"]) for i in range(MAX_SHARED_FLEETS + 1)]
    fleets = []
    try:
        for specs in lists:
            fleets.append(shared_fleet(specs))
        assert not fleets[0].alive and all(f.alive for f in fleets[1:])
    finally:
        for specs in lists[1:]:
            stop_shared_fleet(specs)
