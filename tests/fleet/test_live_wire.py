"""The KV-event codec against payloads encoded by msgspec structs re-declared from vLLM's wire format:
0.33.0's form (array batch, tagged-map events, its new fields), map and array forms, bytes and int
hashes, unknown fields and kinds, both replay-reply layouts, garbage."""

from __future__ import annotations

import msgspec
import pytest
from live_testpub import h, structs

from kvviz.fleet.wire import (
    END_SEQ,
    REPLAY_LEGACY,
    REPLAY_V033,
    WireError,
    decode_batch,
    decode_message,
    decode_replay,
    decode_seq,
    encode_batch,
    encode_replay,
    encode_seq,
    offset_endpoint_port,
    to_int_hash,
)
from kvviz.mirror.kv_events import AllBlocksCleared, BlockRemoved, BlockStored, KVEventBatch


def _payload(array_like: bool | str, int_hashes: bool = False, rank: int | None = 1) -> bytes:
    s = structs(array_like)
    events = [
        s["BlockStored"]([h(1, int_hashes), h(2, int_hashes)], None, [1, 2, 3, 4, 5, 6, 7, 8], 4, None, "GPU", None,
                         extra_keys=[None, ("salt",)], group_idx=0),
        s["BlockRemoved"]([h(1, int_hashes)], "CPU"),
        s["AllBlocksCleared"](),
    ]
    return msgspec.msgpack.encode(s["EventBatch"](12.5, events, rank))


@pytest.mark.parametrize("array_like", [False, True, "vllm"])
@pytest.mark.parametrize("int_hashes", [False, True])
def test_decodes_every_form_and_hash_kind(array_like: bool | str, int_hashes: bool) -> None:
    decoded = decode_batch(_payload(array_like, int_hashes))
    assert decoded.unknown_kinds == decoded.unknown_fields == 0
    batch = decoded.batch
    assert batch.ts == 12.5 and batch.data_parallel_rank == 1
    stored, removed, cleared = batch.events
    assert isinstance(stored, BlockStored) and isinstance(removed, BlockRemoved)
    assert isinstance(cleared, AllBlocksCleared)
    assert stored.block_hashes == [h(1, int_hashes), h(2, int_hashes)]
    assert stored.parent_block_hash is None and stored.token_ids == [1, 2, 3, 4, 5, 6, 7, 8]
    assert stored.block_size == 4 and stored.medium == "GPU" and stored.extra_keys == [None, ("salt",)]
    assert removed.block_hashes == [h(1, int_hashes)] and removed.medium == "CPU"


def test_map_form_is_tagged_with_type_and_omits_defaults() -> None:
    raw = msgspec.msgpack.decode(_payload(False, rank=None))
    assert set(raw) == {"ts", "events"}  # data_parallel_rank None is omitted
    assert [e["type"] for e in raw["events"]] == ["BlockStored", "BlockRemoved", "AllBlocksCleared"]
    assert decode_batch(_payload(False, rank=None)).batch.data_parallel_rank is None


def test_unknown_fields_and_kinds_are_counted_and_skipped() -> None:
    event = {"type": "BlockRemoved", "block_hashes": [b"x"], "medium": None, "future_field": 3}
    payload = msgspec.msgpack.encode({"ts": 1.0, "events": [event, {"type": "BlockMoved", "x": 1}], "extra": 1})
    decoded = decode_batch(payload)
    assert [type(e).__name__ for e in decoded.batch.events] == ["BlockRemoved"]
    assert decoded.unknown_kinds == 1 and decoded.unknown_fields == 2
    arr = msgspec.msgpack.encode([1.0, [["BlockRemoved", [b"x"], "GPU", 0, "LOCAL", None, "later"], ["Other"]], 0])
    decoded = decode_batch(arr)
    assert decoded.unknown_kinds == 1 and decoded.unknown_fields == 1


@pytest.mark.parametrize("payload", [
    b"", b"\xc1", b"not msgpack at all \xff\xfe", msgspec.msgpack.encode(42), msgspec.msgpack.encode({"ts": "x"}),
    msgspec.msgpack.encode({"ts": 1.0, "events": [{"no": "tag"}]}),
    msgspec.msgpack.encode({"ts": 1.0, "events": [{"type": "BlockStored", "block_hashes": ["str"],
                                                   "token_ids": [], "block_size": 4}]}),
    msgspec.msgpack.encode({"ts": 1.0, "events": [{"type": "BlockStored", "block_hashes": [], "token_ids": [],
                                                   "block_size": 0}]}),
    msgspec.msgpack.encode([1.0]),
])
def test_garbage_is_a_wire_error(payload: bytes) -> None:
    with pytest.raises(WireError):
        decode_batch(payload)


def test_messages_and_sequence_frames() -> None:
    payload = _payload(False)
    msg = decode_message([b"kv", (7).to_bytes(8, "big"), payload])
    assert msg.topic == b"kv" and msg.seq == 7
    assert decode_seq((-1).to_bytes(8, "big", signed=True)) == -1 and encode_seq(-1) == b"\xff" * 8
    for frames in ([b"", b"\x00" * 8], [b"", b"\x00" * 7, payload], [b"", b"\x00" * 8, payload, b""]):
        with pytest.raises(WireError):
            decode_message(frames)


def test_vllm_033_form_and_new_fields() -> None:
    s = structs("vllm")
    stored = s["BlockStored"]([h(1)], None, [1, 2, 3, 4], 4, None, "CPU", "sql", extra_keys=[("sql", "s")],
                              group_idx=0, kv_cache_spec_kind="sliding_window", kv_cache_spec_sliding_window=128,
                              locality="REMOTE", ownership="tier-2", session_id="chat-7",
                              lookahead_token_ids=[[5]])
    removed = s["BlockRemoved"]([h(1)], "CPU", group_idx=0, locality="REMOTE", ownership="tier-2")
    payload = msgspec.msgpack.encode(s["EventBatch"](1.0, [stored, removed], 0))
    raw = msgspec.msgpack.decode(payload)
    assert isinstance(raw, list) and isinstance(raw[1][0], dict) and raw[1][0]["type"] == "BlockStored"
    decoded = decode_batch(payload)
    assert decoded.unknown_fields == 0
    got, gone = decoded.batch.events
    assert (got.locality, got.ownership, got.session_id, got.lookahead_token_ids) == ("REMOTE", "tier-2", "chat-7", [[5]])
    assert (got.kv_cache_spec_kind, got.kv_cache_spec_sliding_window, got.extra_keys) == (
        "sliding_window", 128, [("sql", "s")])
    assert (gone.locality, gone.ownership, gone.group_idx) == ("REMOTE", "tier-2", 0)
    assert encode_batch(decoded.batch) == payload  # kvviz writes 0.33.0's bytes back
    bad = msgspec.msgpack.encode([1.0, [{"type": "BlockStored", "block_hashes": [], "parent_block_hash": None,
                                         "token_ids": [], "block_size": 4, "lookahead_token_ids": [["x"]]}]])
    with pytest.raises(WireError, match="lookahead"):
        decode_batch(bad)


@pytest.mark.parametrize("layout", [REPLAY_V033, REPLAY_LEGACY])
def test_replay_reply_layouts(layout: str) -> None:
    payload = _payload("vllm")
    frames = encode_replay(b"kv", 3, payload, layout)
    assert len(frames) == (4 if layout == REPLAY_V033 else 3)
    reply = decode_replay(frames)
    assert (reply.seq, reply.layout, reply.end) == (3, layout, False) and len(reply.batch.events) == 3
    assert reply.topic == (b"kv" if layout == REPLAY_V033 else b"")
    end = decode_replay(encode_replay(b"kv", END_SEQ, b"", layout))
    assert end.end and end.batch is None and end.layout == layout
    # As vLLM 0.33.0's ROUTER writes them (after the identity frame):
    assert decode_replay([b"", b"", (-1).to_bytes(8, "big", signed=True), b""]).end
    assert decode_replay([b"", b"", (4).to_bytes(8, "big"), payload]).seq == 4


@pytest.mark.parametrize("frames", [[b"x", b"\x00" * 8, b""], [b""], [b"", b"t", b"\x00" * 7, b""],
                                    [b"", b"t", b"\x00" * 8, b"\xc1"], [b"", b"a", b"b", b"c", b"d"]])
def test_bad_replay_replies(frames: list[bytes]) -> None:
    with pytest.raises(WireError):
        decode_replay(frames)


@pytest.mark.parametrize("form", ["map", "array", "vllm"])
def test_encoder_output_is_what_vllm_structs_decode(form: str) -> None:
    batch = KVEventBatch(3.0, [BlockStored([b"a" * 32], b"p" * 32, [1, 2], 2, None, "GPU", None, session_id="s"),
                               BlockRemoved([5], None), AllBlocksCleared()], 2)
    payload = encode_batch(batch, form=form)
    typed = msgspec.msgpack.decode(payload, type=structs(form)["EventBatch"])  # vLLM-shaped decoder
    assert typed.data_parallel_rank == 2 and [type(e).__name__ for e in typed.events] == [
        "BlockStored", "BlockRemoved", "AllBlocksCleared"]
    assert decode_batch(payload).batch == batch


def test_int_hash_is_low_64_bits_big_endian_and_dp_ports() -> None:
    digest = bytes(range(32))
    assert to_int_hash(digest) == int.from_bytes(digest[-8:], "big")
    assert offset_endpoint_port("tcp://127.0.0.1:5557", 0) == "tcp://127.0.0.1:5557"
    assert offset_endpoint_port("tcp://127.0.0.1:5557", 2) == "tcp://127.0.0.1:5559"
