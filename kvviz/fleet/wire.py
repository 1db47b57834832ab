"""vLLM's KV-cache event wire format (``vllm/distributed/kv_events.py``, 0.33.0), decoded and encoded.

A message is three ZeroMQ frames: topic, sequence number (8 bytes, big-endian) and a msgpack payload
``EventBatch(ts, events, data_parallel_rank)``. Events are tagged structs ``BlockStored``,
``BlockRemoved`` and ``AllBlocksCleared``, either as maps (msgspec's default; the tag is the ``type``
key) or as arrays (``array_like``; the tag is the first element, fields follow in declaration order).
vLLM 0.33.0 sends the batch as an array and its events as tagged maps (form ``vllm``); older
publishers and kvviz's demo may send maps throughout (``map``) or arrays throughout (``array``).

A replay reply (what a DEALER receives from the publisher's ROUTER) has two layouts: 0.33.0's
``[b"", topic, seq, payload]`` per batch, ended by ``[b"", b"", END_SEQ, b""]``, and the older
``[b"", seq, payload]`` ended by ``[b"", END_SEQ, b""]``. ``decode_replay`` reads both.
Block hashes are bytes, or ints (the digest's low 64 bits, big-endian) under
``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES``. Decoding never raises on well-formed msgpack of an unexpected
shape: unknown fields and unknown event kinds are counted and skipped; anything else is a ``WireError``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import msgspec

from kvviz.mirror.kv_events import (
    MEDIUM_GPU,
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    ExternalBlockHash,
    KVCacheEvent,
    KVEventBatch,
)

__all__ = ["MEDIUM_GPU", "AllBlocksCleared", "BlockRemoved", "BlockStored", "ExternalBlockHash", "KVCacheEvent",
           "KVEventBatch"]
END_SEQ = -1  # the replay stream's last message carries this (signed) sequence number and no payload
SEQ_BYTES = 8
FORM_VLLM, FORM_MAP, FORM_ARRAY = "vllm", "map", "array"  # batch array + event maps / maps / arrays
FORMS = (FORM_VLLM, FORM_MAP, FORM_ARRAY)
REPLAY_V033, REPLAY_LEGACY = "0.33", "legacy"  # [b"", topic, seq, payload] / [b"", seq, payload]

# Field order of each struct, as declared in vLLM (the array form depends on it).
BATCH_FIELDS = ("ts", "events", "data_parallel_rank")
STORED_FIELDS = ("block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium",
                 "lora_name", "extra_keys", "group_idx", "kv_cache_spec_kind", "kv_cache_spec_sliding_window",
                 "locality", "ownership", "session_id", "lookahead_token_ids")
REMOVED_FIELDS = ("block_hashes", "medium", "group_idx", "locality", "ownership")
# Fields vLLM declares without a default: msgspec's omit_defaults always writes them.
REQUIRED_FIELDS = {"BlockStored": set(STORED_FIELDS[:7]), "BlockRemoved": {"block_hashes", "medium"},
                   "AllBlocksCleared": set()}
CLEARED_FIELDS: tuple[str, ...] = ()
KIND_FIELDS = {"BlockStored": STORED_FIELDS, "BlockRemoved": REMOVED_FIELDS, "AllBlocksCleared": CLEARED_FIELDS}
KINDS = tuple(KIND_FIELDS)


class WireError(ValueError):
    """A frame or payload that is not a KV-event batch (counted as a decode error by the subscriber)."""




@dataclass(frozen=True, slots=True)
class EventBatch:
    """One decoded payload: vLLM's ``KVEventBatch`` and what decoding skipped (``unknown_kinds``:
    events of other kinds; ``unknown_fields``: fields this version of the schema does not know)."""

    batch: KVEventBatch
    unknown_kinds: int = 0
    unknown_fields: int = 0

    @property
    def events(self) -> list[KVCacheEvent]:
        return self.batch.events

    @property
    def data_parallel_rank(self) -> int | None:
        return self.batch.data_parallel_rank


@dataclass(frozen=True, slots=True)
class Message:
    """A decoded PUB message: topic, sequence number and batch."""

    topic: bytes
    seq: int
    batch: EventBatch


@dataclass(frozen=True, slots=True)
class ReplayReply:
    """One message of a replay reply: its sequence number, the batch (None for the end marker) and which
    layout it came in (``REPLAY_V033`` or ``REPLAY_LEGACY``)."""

    seq: int
    batch: EventBatch | None
    layout: str
    topic: bytes = b""  # 0.33.0's layout carries the publisher's topic; the older one does not

    @property
    def end(self) -> bool:
        return self.batch is None


@dataclass
class _Skipped:
    kinds: int = 0
    fields: int = 0
    names: set[str] = field(default_factory=set)


# ------------------------------------------------------------------ decoding
def _hash(value: Any, what: str) -> ExternalBlockHash:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise WireError(f"{what}: a block hash must be bytes or an int, got {type(value).__name__}")


def _opt_int(value: Any, what: str) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise WireError(f"{what} must be an int or null, got {type(value).__name__}")


def _opt_str(value: Any, what: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise WireError(f"{what} must be a string or null, got {type(value).__name__}")


def _hashes(value: Any, what: str) -> list[ExternalBlockHash]:
    if not isinstance(value, list):
        raise WireError(f"{what} must be a list")
    return [_hash(v, what) for v in value]


def _build(kind: str, values: dict[str, Any]) -> KVCacheEvent:
    if kind == "AllBlocksCleared":
        return AllBlocksCleared()
    if kind == "BlockRemoved":
        if "block_hashes" not in values:
            raise WireError("BlockRemoved without block_hashes")
        return BlockRemoved(_hashes(values["block_hashes"], "BlockRemoved.block_hashes"),
                            _opt_str(values.get("medium"), "medium"), _opt_int(values.get("group_idx"), "group_idx"),
                            _opt_str(values.get("locality"), "locality"), _opt_str(values.get("ownership"), "ownership"))
    for name in ("block_hashes", "token_ids", "block_size"):
        if name not in values:
            raise WireError(f"BlockStored without {name}")
    tokens = values["token_ids"]
    if not isinstance(tokens, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
        raise WireError("BlockStored.token_ids must be a list of ints")
    block_size = values["block_size"]
    if not isinstance(block_size, int) or isinstance(block_size, bool) or block_size < 1:
        raise WireError(f"BlockStored.block_size must be a positive int, got {block_size!r}")
    parent = values.get("parent_block_hash")
    extra = values.get("extra_keys")
    window = values.get("kv_cache_spec_sliding_window")
    return BlockStored(
        _hashes(values["block_hashes"], "BlockStored.block_hashes"),
        None if parent is None else _hash(parent, "parent_block_hash"),
        list(tokens), block_size,
        _opt_int(values.get("lora_id"), "lora_id"), _opt_str(values.get("medium"), "medium"),
        _opt_str(values.get("lora_name"), "lora_name"),
        [_freeze(e) for e in extra] if isinstance(extra, list) else None,
        _opt_int(values.get("group_idx"), "group_idx"),
        _opt_str(values.get("kv_cache_spec_kind"), "kv_cache_spec_kind"),
        _opt_int(window, "kv_cache_spec_sliding_window"),
        _opt_str(values.get("locality"), "locality"), _opt_str(values.get("ownership"), "ownership"),
        _opt_str(values.get("session_id"), "session_id"), _lookahead(values.get("lookahead_token_ids")),
    )


def _lookahead(value: Any) -> list[list[int]] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(
            isinstance(row, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in row)
            for row in value):
        raise WireError("BlockStored.lookahead_token_ids must be a list of lists of ints or null")
    return value


def _freeze(value: Any) -> Any:
    return tuple(_freeze(v) for v in value) if isinstance(value, list) else value


def _event(raw: Any, skipped: _Skipped) -> KVCacheEvent | None:
    """One event in map or array form; None (counted) for an unknown kind."""
    if isinstance(raw, dict):
        kind = raw.get("type")
        if not isinstance(kind, str):
            raise WireError("event map without a 'type' tag")
        values = {k: v for k, v in raw.items() if k != "type"}
    elif isinstance(raw, list) and raw and isinstance(raw[0], str):
        kind = raw[0]
        names = KIND_FIELDS.get(kind, ())
        values = dict(zip(names, raw[1:], strict=False))
        skipped.fields += max(0, len(raw) - 1 - len(names)) if kind in KIND_FIELDS else 0
    else:
        raise WireError("an event must be a tagged map or a tagged array")
    if kind not in KIND_FIELDS:
        skipped.kinds += 1
        skipped.names.add(kind[:40])
        return None
    if isinstance(raw, dict):
        skipped.fields += sum(1 for k in values if k not in KIND_FIELDS[kind])
    return _build(kind, values)


def decode_batch(payload: bytes) -> EventBatch:
    """The ``EventBatch`` in a payload (map or array form); ``WireError`` when it is not one."""
    try:
        raw = msgspec.msgpack.decode(payload)
    except (msgspec.DecodeError, ValueError, TypeError) as exc:
        raise WireError(f"payload is not msgpack: {exc}") from None
    skipped = _Skipped()
    if isinstance(raw, dict):
        ts, events, rank = raw.get("ts"), raw.get("events"), raw.get("data_parallel_rank")
        skipped.fields += sum(1 for k in raw if k not in BATCH_FIELDS)
    elif isinstance(raw, list) and len(raw) >= 2:
        ts, events = raw[0], raw[1]
        rank = raw[2] if len(raw) > 2 else None
        skipped.fields += max(0, len(raw) - 3)
    else:
        raise WireError("payload is not an EventBatch (map or array)")
    if isinstance(ts, bool) or not isinstance(ts, (int, float)):
        raise WireError("EventBatch.ts must be a number")
    if not isinstance(events, list):
        raise WireError("EventBatch.events must be a list")
    rank = _opt_int(rank, "data_parallel_rank")
    decoded = [e for e in (_event(r, skipped) for r in events) if e is not None]
    return EventBatch(KVEventBatch(float(ts), decoded, rank), skipped.kinds, skipped.fields)


def decode_seq(frame: bytes) -> int:
    """A sequence-number frame: 8 bytes, big-endian, signed (the replay end marker is -1)."""
    if len(frame) != SEQ_BYTES:
        raise WireError(f"sequence frame has {len(frame)} bytes, expected {SEQ_BYTES}")
    return int.from_bytes(frame, "big", signed=True)


def decode_message(frames: list[bytes]) -> Message:
    """A PUB message ``[topic, seq, payload]``."""
    if len(frames) != 3:
        raise WireError(f"message has {len(frames)} frames, expected 3 (topic, seq, payload)")
    return Message(bytes(frames[0]), decode_seq(frames[1]), decode_batch(frames[2]))


def decode_replay(frames: list[bytes]) -> ReplayReply:
    """One replay message as a DEALER receives it, in 0.33.0's layout ``[b"", topic, seq, payload]``
    (end: ``[b"", b"", END_SEQ, b""]``) or the older ``[b"", seq, payload]`` (end: ``[b"", END_SEQ, b""]``)."""
    if len(frames) == 4 and frames[0] == b"":
        layout, seq_frame, payload = REPLAY_V033, frames[2], frames[3]
    elif len(frames) == 3 and frames[0] == b"":
        layout, seq_frame, payload = REPLAY_LEGACY, frames[1], frames[2]
    else:
        raise WireError(f"replay reply has {len(frames)} frames, expected [b'', topic, seq, payload] "
                        "or [b'', seq, payload]")
    seq = decode_seq(seq_frame)
    topic = bytes(frames[1]) if layout == REPLAY_V033 else b""
    if seq == END_SEQ:
        return ReplayReply(seq, None, layout)
    return ReplayReply(seq, decode_batch(payload), layout, topic)


# ------------------------------------------------------------------ encoding (demo publisher)
def _event_fields(event: KVCacheEvent) -> tuple[str, list[Any]]:
    kind = type(event).__name__
    return kind, [_thaw(getattr(event, name)) for name in KIND_FIELDS[kind]]


def _thaw(value: Any) -> Any:
    return [_thaw(v) for v in value] if isinstance(value, (list, tuple)) else value


def _trim_defaults(kind: str, values: list[Any]) -> list[Any]:
    """An array-form event without its trailing default (None) fields, as omit_defaults writes it."""
    names = KIND_FIELDS[kind]
    n = len(values)
    while n and values[n - 1] is None and names[n - 1] not in REQUIRED_FIELDS[kind]:
        n -= 1
    return values[:n]


def encode_batch(batch: KVEventBatch, *, form: str = FORM_VLLM) -> bytes:
    """msgpack of ``batch`` as vLLM's msgspec encoder writes it (omit_defaults: fields declared with a
    default vanish when None). ``form``: ``vllm`` (0.33.0: the batch an array, events tagged maps),
    ``map`` (maps throughout) or ``array`` (arrays throughout, the tag first)."""
    if form not in FORMS:
        raise ValueError(f"unknown form {form!r}; valid: {', '.join(FORMS)}")
    events: list[Any] = []
    for event in batch.events:
        kind, values = _event_fields(event)
        if form == FORM_ARRAY:
            events.append([kind, *_trim_defaults(kind, values)])
        else:
            item = {"type": kind}
            item.update({n: v for n, v in zip(KIND_FIELDS[kind], values, strict=True)
                         if v is not None or n in REQUIRED_FIELDS[kind]})
            events.append(item)
    if form == FORM_MAP:
        raw: Any = {"ts": batch.ts, "events": events}
        if batch.data_parallel_rank is not None:
            raw["data_parallel_rank"] = batch.data_parallel_rank
    else:
        raw = [batch.ts, events] + ([] if batch.data_parallel_rank is None else [batch.data_parallel_rank])
    return msgspec.msgpack.encode(raw)


def encode_replay(topic: bytes, seq: int, payload: bytes, layout: str = REPLAY_V033) -> list[bytes]:
    """The frames a ROUTER sends after the client identity for one batch (``seq == END_SEQ``: the end
    marker, whose topic and payload are empty)."""
    if seq == END_SEQ:
        topic = payload = b""
    if layout == REPLAY_V033:
        return [b"", topic, encode_seq(seq), payload]
    return [b"", encode_seq(seq), payload]


def encode_seq(seq: int) -> bytes:
    """8-byte big-endian sequence frame (signed, so the end marker -1 fits)."""
    return seq.to_bytes(SEQ_BYTES, "big", signed=True)


def to_int_hash(block_hash: bytes) -> int:
    """vLLM's int form of a hash: the digest's low 64 bits read big-endian."""
    return int.from_bytes(block_hash, "big") & ((1 << 64) - 1)


def to_int_hashes(event: KVCacheEvent) -> KVCacheEvent:
    """``event`` with every block hash (and a store's parent) in vLLM's int form, as 0.33.0 publishes
    them under ``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1`` (its default; ``maybe_convert_block_hash``).
    An int hash stays as it is."""
    def conv(h: ExternalBlockHash) -> ExternalBlockHash:
        return to_int_hash(h) if isinstance(h, bytes) else h

    if isinstance(event, BlockStored):
        parent = event.parent_block_hash
        return replace(event, block_hashes=[conv(h) for h in event.block_hashes],  # type: ignore[misc]
                       parent_block_hash=None if parent is None else conv(parent))
    if isinstance(event, BlockRemoved):
        return replace(event, block_hashes=[conv(h) for h in event.block_hashes])  # type: ignore[misc]
    return event


def offset_endpoint_port(endpoint: str, rank: int) -> str:
    """The endpoint of data-parallel rank ``rank``: same host, port + rank (vLLM's rule for tcp)."""
    if rank == 0:
        return endpoint
    base, _, port = endpoint.rpartition(":")
    return f"{base}:{int(port) + rank}"
