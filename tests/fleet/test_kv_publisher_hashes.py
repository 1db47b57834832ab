"""The server's KV-event publisher sends block hashes as vLLM 0.33.0 does by default
(``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1``: the digest's low 64 bits as an int), or as the 32-byte
digests when asked; ``kvviz serve --kv-events-hash-format`` chooses. kvviz's own subscriber matches a
prompt hashed as ``kvviz hash`` hashes it against either form."""

from __future__ import annotations

import time

import msgspec
import pytest
from live_testpub import free_port

from kvviz.cli import build_parser
from kvviz.cli.serve import kv_event_publisher
from kvviz.fleet.subscriber import LiveConfig, Subscriber, check_prompt
from kvviz.fleet.wire import to_int_hash
from kvviz.mirror.hashing import hash_block_chain, init_none_hash
from kvviz.mirror.kv_events import BlockRemoved, BlockStored, KVEventBatch
from kvviz.server.kv_publisher import KVEventPublisher

TOKENS = list(range(100, 148))  # three blocks of 16
DIGESTS = hash_block_chain(TOKENS, 16, "sha256", init_none_hash("sha256", None))


def _stored() -> KVEventBatch:
    return KVEventBatch(time.time(), [BlockStored(list(DIGESTS), None, TOKENS, 16, None, "GPU", None)])


def _published(pub: KVEventPublisher, port: int) -> tuple[Subscriber, list]:
    """Publish the prompt's three blocks and one removal until kvviz's subscriber has them; the stored
    event's hashes as they went on the wire."""
    sub = Subscriber(LiveConfig(f"tcp://127.0.0.1:{port}")).start()
    deadline = time.monotonic() + 20
    while sub.summary()["batches"] < 1 and time.monotonic() < deadline:  # until the subscription is through
        pub.publish(_stored())
        sub.wait(0.1)
    assert sub.summary()["batches"] >= 1
    seq, payload = pub.buffer[-1]
    wire_hashes = msgspec.msgpack.decode(payload)[1][0]["block_hashes"]
    return sub, wire_hashes


@pytest.mark.parametrize("int_hashes", [True, False])
def test_hash_form_on_the_wire_and_kvviz_matches_it(int_hashes: bool) -> None:
    port = free_port()
    pub = KVEventPublisher(f"tcp://127.0.0.1:{port}", int_hashes=int_hashes).start()
    sub = None
    try:
        sub, wire_hashes = _published(pub, port)
        assert wire_hashes == ([to_int_hash(d) for d in DIGESTS] if int_hashes else list(DIGESTS))
        assert sub.model.hash_kind == ("int" if int_hashes else "bytes")
        status = check_prompt(sub, TOKENS, None, "sha256", None)
        assert status.cached == (True, True, True) and status.cached_run == 3
        pub.publish(KVEventBatch(time.time(), [BlockRemoved([DIGESTS[2]], "GPU")]))  # removals too
        deadline = time.monotonic() + 20
        while sub.summary()["cached_blocks"] != 2 and time.monotonic() < deadline:
            sub.wait(0.05)
        assert check_prompt(sub, TOKENS, None, "sha256", None).cached == (True, True, False)
    finally:
        if sub is not None:
            sub.stop()
        pub.stop()


def test_the_default_is_int_as_vllm() -> None:
    pub = KVEventPublisher(f"tcp://127.0.0.1:{free_port()}")
    try:
        assert pub.int_hashes
    finally:
        pub.stop()


@pytest.mark.parametrize("flag,int_hashes", [([], True), (["--kv-events-hash-format", "int"], True),
                                             (["--kv-events-hash-format", "bytes"], False)])
def test_serve_flag_chooses_the_hash_form(flag: list[str], int_hashes: bool) -> None:
    port = free_port()
    args = build_parser().parse_args(["serve", "--kv-events-endpoint", f"tcp://127.0.0.1:{port}", *flag])
    pub = kv_event_publisher(args, f"tcp://127.0.0.1:{port}", None)
    try:
        assert pub.int_hashes is int_hashes
    finally:
        pub.stop()


def test_serve_refuses_another_hash_format(capsys: pytest.CaptureFixture) -> None:
    from kvviz.cli import main

    assert main(["serve", "--kv-events-endpoint", "tcp://127.0.0.1:1", "--kv-events-hash-format", "hex"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
