"""``python -m kvviz watch --listen``: kvviz binds, the engine's PUB connects (vLLM 0.33.0 given a specific
address), its replay ROUTER binds; one engine and a fleet of two, and bad input. Loopback only."""

from __future__ import annotations

import json
import threading

import pytest
from live_testpub import WirePublisher, free_port

from kvviz.cli import main

JOIN_S = 60


def _watch(capsys: pytest.CaptureFixture, args: list[str], publish) -> dict:
    rc: list[int] = []
    thread = threading.Thread(target=lambda: rc.append(main(["watch", *args, "--json"])), daemon=True)
    thread.start()
    publish()
    thread.join(JOIN_S)
    assert not thread.is_alive(), "watch did not stop"
    out = capsys.readouterr()
    assert rc == [0], out.err
    return json.loads(out.out)


def _connecting_publisher(port: int, replay: int | None = None) -> WirePublisher:
    """A publisher built like vLLM's for a specific address: PUB connect()s, the replay ROUTER binds."""
    return WirePublisher(port, replay, connect=True)


def test_watch_listen_hears_a_connecting_engine_and_replays(capsys: pytest.CaptureFixture) -> None:
    port, replay = free_port(), free_port()
    pubs: list[WirePublisher] = []

    def publish() -> None:
        pub = _connecting_publisher(port, replay)
        pubs.append(pub)
        pub.publish([pub.stored([1, 2], None, list(range(8)))], send=False)  # before kvviz subscribed
        pub.wait_subscribed()
        pub.wait_replay_served()  # the replay asked on connecting answered first: the next batch is live
        pub.publish([pub.stored([3], 2, list(range(8, 12)))])

    try:
        out = _watch(capsys, ["--listen", f"tcp://127.0.0.1:{port}", "--replay-endpoint",
                              f"tcp://127.0.0.1:{replay}", "--batches", "2", "--timeout", "40"], publish)
    finally:
        for pub in pubs:
            pub.close()
    assert (out["batches"], out["replayed"], out["missed"], out["cached_blocks"]) == (2, 1, 0, 3)


def test_watch_listen_fleet_of_two(capsys: pytest.CaptureFixture) -> None:
    ports = {"a": free_port(), "b": free_port()}
    pubs: list[WirePublisher] = []

    def publish() -> None:
        for i, (_, port) in enumerate(sorted(ports.items())):
            pub = _connecting_publisher(port)
            pubs.append(pub)
            pub.wait_subscribed()
            pub.publish([pub.stored([10 * (i + 1) + k for k in range(i + 1)], None, list(range(4 * (i + 1))))])

    try:
        out = _watch(capsys, [a for n, p in ports.items() for a in ("--listen", f"{n}=tcp://127.0.0.1:{p}")]
                     + ["--batches", "1", "--timeout", "40"], publish)
    finally:
        for pub in pubs:
            pub.close()
    held = {r["name"]: (r["batches"], r["blocks_held"]) for r in out["replicas"]}
    assert held == {"a": (1, 1), "b": (1, 2)}


@pytest.mark.parametrize("args,err", [
    (["--listen", "tcp://127.0.0.1"], "listen endpoint"),
    (["--listen", "udp://127.0.0.1:5800"], "listen endpoint"),
    (["--listen", "tcp://127.0.0.1:0"], "port"),
    (["--listen", "tcp://127.0.0.1:5800", "--replay-endpoint", "tcp://*:5801"], "replay endpoint"),
    (["--listen", "a=tcp://127.0.0.1:5800", "--listen", "b=bad"], "endpoint b"),
])
def test_bad_listen_input_is_one_line_exit_2(capsys: pytest.CaptureFixture, args: list[str], err: str) -> None:
    assert main(["watch", *args, "--seconds", "0.2", "--json"]) == 2
    line = capsys.readouterr().err
    assert line.startswith("error:") and line.count("\n") == 1 and err in line


def test_a_busy_listen_port_is_one_line_exit_2(capsys: pytest.CaptureFixture) -> None:
    port = free_port()
    holder = WirePublisher(port)  # something already bound there
    try:
        assert main(["watch", "--listen", f"tcp://127.0.0.1:{port}", "--seconds", "0.2", "--json"]) == 2
    finally:
        holder.close()
    line = capsys.readouterr().err
    assert line.startswith("error: cannot listen on") and line.count("\n") == 1


def test_endpoint_and_listen_together_exit_2(capsys: pytest.CaptureFixture) -> None:
    assert main(["watch", "--endpoint", "tcp://127.0.0.1:1", "--listen", "tcp://127.0.0.1:2", "--json"]) == 2
    line = capsys.readouterr().err
    assert "not allowed with" in line and line.count("\n") == 1
