"""``python -m kvviz watch`` against a test publisher written from vLLM's wire format (map and array
forms, int hashes, replay on start and on gaps, garbage frames, a second DP rank), against the demo
publisher end to end, and on bad input. Only 127.0.0.1, free ports, and every wait bounded."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from live_testpub import WirePublisher, free_port

from kvviz.cli import main
from kvviz.fleet.demo import SYSTEM_PROMPTS, DemoPublisher, synthetic_tokenizer
from kvviz.fleet.wire import to_int_hash
from kvviz.mirror.hashing import hash_block_chain, init_none_hash

ROOT = Path(__file__).resolve().parents[2]
JOIN_S = 60


class Watch:
    """``main(['watch', ...])`` in a thread (it blocks until its batches arrive)."""

    def __init__(self, capsys: pytest.CaptureFixture, *args: str) -> None:
        self.capsys = capsys
        self.rc: list[int] = []
        self.thread = threading.Thread(target=lambda: self.rc.append(main(["watch", *args, "--json"])), daemon=True)
        self.thread.start()

    def result(self) -> dict:
        self.thread.join(JOIN_S)
        assert not self.thread.is_alive(), "watch did not stop"
        out = self.capsys.readouterr()
        assert self.rc == [0], out.err
        return json.loads(out.out)


def _chain(pub: WirePublisher, n0: int, n: int, parent: int | None) -> object:
    ids = list(range(n0, n0 + n))
    return pub.stored(ids, parent, list(range(4 * n)))


LAYOUTS = [("vllm", "0.33"), ("map", "legacy")]  # vLLM 0.33.0's forms and replay layout; an older publisher's


@pytest.mark.parametrize("form,layout", LAYOUTS)
def test_replay_fills_a_gap_and_ends_on_the_end_marker(capsys: pytest.CaptureFixture, form: str, layout: str) -> None:
    port = free_port(2)
    pub = WirePublisher(port, port + 1, rank=0, form=form, replay_layout=layout, topic=b"kv@pod-a@smol")
    try:
        pub.publish([_chain(pub, 0, 2, None)])  # before anyone listens: only the replay has it
        watch = Watch(capsys, "--endpoint", f"tcp://127.0.0.1:{port}", "--replay-endpoint",
                      f"tcp://127.0.0.1:{port + 1}", "--batches", "4", "--timeout", "40")
        pub.wait_subscribed()
        pub.wait_replay_served()
        pub.publish([_chain(pub, 10, 1, None)])
        pub.publish([pub.stored([20], None, [1, 2, 3, 4], session_id="chat-1", locality="LOCAL")], send=False)
        pub.publish([pub.removed([10], group_idx=0)])  # seq 3 shows the gap at seq 2
        out = watch.result()
    finally:
        pub.close()
    assert out["batches"] == 4 and out["missed"] == 0 and out["decode_errors"] == 0
    assert out["replayed"] == 2 and out["replay_requests"] == 2  # on connecting, then the gap
    assert out["replays_ended"] == 2 and out["replay_timeouts"] == 0 and out["replay_layout"] == layout
    assert out["cached_blocks"] == 3


@pytest.mark.parametrize("form,layout", LAYOUTS)
def test_replay_on_start_gap_and_garbage(capsys: pytest.CaptureFixture, form: str, layout: str) -> None:
    port = free_port(2)
    pub = WirePublisher(port, port + 1, rank=0, form=form, replay_layout=layout)
    try:
        for i in range(3):  # published before anyone listens: only the replay has them
            pub.publish([_chain(pub, 10 * i, 2, None)])
        watch = Watch(capsys, "--endpoint", f"tcp://127.0.0.1:{port}", "--replay-endpoint",
                      f"tcp://127.0.0.1:{port + 1}", "--batches", "7", "--timeout", "40")
        pub.wait_subscribed()
        pub.wait_replay_served()  # the subscriber asked for what it missed on connecting
        pub.publish([_chain(pub, 100, 1, None)])
        pub.publish([pub.removed([10, 999])], send=False)  # lost on the live stream: a gap
        pub.send_raw([b"", b"\x00\x01", b"short seq frame"])
        pub.send_raw([b"only two", b"frames"])
        pub.send_raw([b"", (5).to_bytes(8, "big"), b"\xc1 not msgpack"])
        pub.publish([_chain(pub, 200, 3, None)])
        pub.publish([pub.cleared(), _chain(pub, 300, 1, None)])
        out = watch.result()
    finally:
        pub.close()
    assert out["batches"] == 7 and out["missed"] == 0 and out["decode_errors"] == 3
    assert out["replayed"] == 4  # seqs 0-2 on start and 4 after the gap
    assert out["replays_ended"] == 2 and out["replay_timeouts"] == 0  # replies and end markers are no errors
    assert out["events"] == {"BlockStored": 6, "BlockRemoved": 1, "AllBlocksCleared": 1}
    assert out["cached_blocks"] == 1 and out["stored_tokens"] == 4  # the clear came before the last store
    assert (out["first_seq"], out["last_seq"], out["dp_ranks"]) == (0, 6, [0])


def test_array_form_int_hashes_without_replay_counts_missed_and_checks_a_prompt(capsys) -> None:
    port = free_port()
    pub = WirePublisher(port, array_like=True, int_hashes=True)
    tokens = list(range(1000, 1040))  # 10 blocks of 4
    digests = hash_block_chain(tokens, 4, "sha256", init_none_hash("sha256", "7"))
    ints = [to_int_hash(d) for d in digests]
    S = pub.s["BlockStored"]
    try:
        watch = Watch(capsys, "--endpoint", f"tcp://127.0.0.1:{port}", "--batches", "3", "--timeout", "40",
                      "--seed", "7", "--prompt-tokens", ",".join(map(str, tokens)))
        pub.wait_subscribed()
        pub.publish([S(ints[:3], None, tokens[:12], 4, None, "GPU", None)])
        pub.publish([S(ints[3:5], ints[2], tokens[12:20], 4, None, "GPU", None)], send=False)
        pub.publish([S(ints[6:8], ints[5], tokens[24:32], 4, None, "CPU", None)])
        pub.publish([pub.s["BlockRemoved"]([ints[1]], "GPU")])
        out = watch.result()
    finally:
        pub.close()
    assert out["batches"] == 3 and out["missed"] == 1 and out["replayed"] == 0
    assert out["cached_blocks"] == 4 and out["stored_tokens"] == 16
    assert out["prompt_blocks"] == 10 and out["prompt_cached_blocks"] == 1
    assert [b["cached"] for b in out["prompt_block_status"]] == [True, False, True, False, False, False,
                                                                 True, True, False, False]
    assert out["prompt_block_status"][0]["hash"] == f"{ints[0]:016x}"


def test_second_dp_rank_on_port_plus_one(capsys: pytest.CaptureFixture) -> None:
    port = free_port(4)
    pubs = [WirePublisher(port + r, port + 2 + r, rank=r) for r in range(2)]
    try:
        watch = Watch(capsys, "--endpoint", f"tcp://127.0.0.1:{port}", "--replay-endpoint",
                      f"tcp://127.0.0.1:{port + 2}", "--dp-size", "2", "--batches", "4", "--timeout", "40")
        for pub in pubs:
            pub.wait_subscribed()
        for r, pub in enumerate(pubs):  # same hashes on both ranks: one distinct block each
            pub.publish([_chain(pub, 1, 2, None)])
            pub.publish([_chain(pub, 10 + r, 1, 2)])
        out = watch.result()
    finally:
        for pub in pubs:
            pub.close()
    assert out["batches"] == 4 and out["dp_ranks"] == [0, 1] and out["missed"] == 0
    assert (out["first_seq"], out["last_seq"]) == (0, 1) and out["cached_blocks"] == 4


def test_demo_publisher_end_to_end_in_process(capsys: pytest.CaptureFixture) -> None:
    port = free_port(2)
    demo = DemoPublisher(f"tcp://127.0.0.1:{port}", f"tcp://127.0.0.1:{port + 1}", seed=3, interval_s=0.01,
                         max_batches=40, int_hashes=True).start()
    prompt = synthetic_tokenizer(3)(SYSTEM_PROMPTS[0] + " " + SYSTEM_PROMPTS[1])
    try:
        out = Watch(capsys, "--endpoint", f"tcp://127.0.0.1:{port}", "--replay-endpoint",
                    f"tcp://127.0.0.1:{port + 1}", "--batches", "40", "--timeout", "40",
                    "--prompt-tokens", ",".join(map(str, prompt))).result()
    finally:
        demo.stop()
    pool = demo.workload.manager.block_pool.cached_block_hash_to_block
    assert out["batches"] == 40 and out["missed"] == 0 and out["decode_errors"] == 0
    assert out["cached_blocks"] == len(pool)  # the engine model equals the demo engine's own pool
    held = {to_int_hash(d) for d in pool}
    expected = [to_int_hash(d) in held for d in demo.workload.manager.request_block_hashes(prompt)]
    assert [b["cached"] for b in out["prompt_block_status"]] == expected


def _default_ctrl_c() -> None:
    """In the child before exec: Ctrl-C acts as in a terminal. A runner started in the background by a
    non-interactive shell ignores SIGINT and its children inherit that, so Python never installs its
    handler and the demo ran on to --seconds (the test timed out in such a run)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_demo_publisher_cli_end_to_end() -> None:
    """Both CLIs as processes: watch gets the demo's 30 batches; Ctrl-C ends the demo, which then reports."""
    port = free_port(2)
    demo = subprocess.Popen(
        [sys.executable, "-m", "kvviz", "publish-demo", "--endpoint", f"tcp://127.0.0.1:{port}", "--synthetic",
         "--array-like", "--interval", "0.01", "--max-batches", "30", "--seconds", "120", "--json"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_default_ctrl_c)
    try:
        watch = subprocess.run(
            [sys.executable, "-m", "kvviz", "watch", "--endpoint", f"tcp://127.0.0.1:{port}", "--replay-endpoint",
             f"tcp://127.0.0.1:{port + 1}", "--batches", "30", "--timeout", "60", "--json"],
            cwd=ROOT, capture_output=True, text=True, timeout=90)
        demo.send_signal(signal.SIGINT)  # the demo serves replay until stopped: stop it as a user would
        demo_out, demo_err = demo.communicate(timeout=60)
    finally:
        demo.kill()
    assert watch.returncode == 0, watch.stderr
    assert demo.returncode == 0, demo_err
    seen, published = json.loads(watch.stdout), json.loads(demo_out)
    assert published["batches"] == seen["batches"] == 30 and seen["missed"] == 0
    assert seen["cached_blocks"] == published["cached_blocks"] and seen["events"]["BlockStored"] > 0


def test_nobody_publishing_is_zero_batches(capsys: pytest.CaptureFixture) -> None:
    port = free_port()
    assert main(["watch", "--endpoint", f"tcp://127.0.0.1:{port}", "--replay-endpoint",
                 f"tcp://127.0.0.1:{port}", "--seconds", "0.5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["batches"] == 0 and out["first_seq"] is None and out["cached_blocks"] == 0


@pytest.mark.parametrize("args", [
    ["--endpoint", "tcp://*:5557"], ["--endpoint", "http://127.0.0.1:5557"], ["--endpoint", "tcp://127.0.0.1"],
    ["--endpoint", "tcp://127.0.0.1:99999"], ["--endpoint", ""], ["--endpoint", "tcp://a b:1"],
    ["--endpoint", "tcp://127.0.0.1:5557", "--replay-endpoint", "garbage"],
    ["--endpoint", "tcp://127.0.0.1:5557", "--dp-size", "0"],
    ["--endpoint", "tcp://127.0.0.1:5557", "--seconds", "-1"],
    ["--endpoint", "tcp://127.0.0.1:5557", "--seconds", "nan"],
    ["--endpoint", "tcp://127.0.0.1:5557", "--batches", "0"],
    ["--endpoint", "tcp://127.0.0.1:5557", "--hash", "md5"],
    ["--endpoint", "tcp://127.0.0.1:5557", "--block-size", "0"],
    ["--endpoint", "tcp://127.0.0.1:5557", "--prompt-tokens", "1,x"],
])
def test_bad_input_is_one_line_exit_2(capsys: pytest.CaptureFixture, args: list[str]) -> None:
    assert main(["watch", *args, "--json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1


@pytest.mark.parametrize("args", [["--endpoint", "udp://x:1"], ["--interval", "0"], ["--max-batches", "0"]])
def test_publish_demo_bad_input(capsys: pytest.CaptureFixture, args: list[str]) -> None:
    assert main(["publish-demo", "--synthetic", *args]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_ctrl_c_right_after_the_demo_starts_still_stops_and_reports(capsys: pytest.CaptureFixture,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C that lands while publish-demo is still starting (its publisher already sending: a fast
    watcher had its batches and the test sent SIGINT) stops the publisher and reports, as a later Ctrl-C
    does; it used to escape the CLI with the publisher's sockets open, and the process hung at exit."""
    import kvviz.cli.publish_demo as cli

    started: list[DemoPublisher] = []
    real_start = DemoPublisher.start

    def start_then_ctrl_c(self):
        started.append(real_start(self))
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.DemoPublisher, "start", start_then_ctrl_c)
    port = free_port(2)
    assert main(["publish-demo", "--endpoint", f"tcp://127.0.0.1:{port}", "--synthetic", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["endpoint"] == f"tcp://127.0.0.1:{port}"
    assert started and not any(d.alive for d in started)


def test_a_demo_past_its_last_batch_waits_instead_of_spinning(monkeypatch: pytest.MonkeyPatch) -> None:
    """After ``max_batches`` the publisher only serves replay: its loop sleeps between polls (it spun,
    burning a core, which slowed everything beside it on a loaded machine)."""
    calls = []
    real = DemoPublisher._serve_replay
    monkeypatch.setattr(DemoPublisher, "_serve_replay", lambda self: (calls.append(1), real(self))[1])
    port = free_port(2)
    demo = DemoPublisher(f"tcp://127.0.0.1:{port}", f"tcp://127.0.0.1:{port + 1}", interval_s=0.001,
                         tokenize=synthetic_tokenizer(0), max_batches=3).start()
    try:
        stopped = threading.Event()
        while demo.seq < 3 and demo.alive:
            stopped.wait(0.01)
        calls.clear()
        stopped.wait(0.5)  # half a second past the last batch: polls at most every 20 ms
        assert len(calls) <= 50, len(calls)
    finally:
        demo.stop()
