"""vLLM 0.33.0's KV-cache events as pure dataclasses (``vllm/distributed/kv_events.py``).

Field names, order and defaults follow vLLM's msgspec structs, so a codec can map them one to one
(vLLM tags each event with its class name). The block pool emits these beside kvviz's own step events;
a live vLLM publishes the same schema over ZeroMQ. No wire format here: the mirror stays codec-free.

Block hashes are ``bytes`` (vLLM's ``ExternalBlockHash`` is ``bytes | int``: an int when
``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES`` truncates them to 64 bits).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ExternalBlockHash = bytes | int
MEDIUM_GPU = "GPU"
MEDIUM_CPU = "CPU"
MEDIUM_STORAGE = "STORAGE"
LOCALITY_LOCAL = "LOCAL"  # relative to the publisher; None = unspecified
LOCALITY_REMOTE = "REMOTE"
# vLLM's KVCacheSpecKind values kvviz's block manager can be (it has one KV-cache group, index 0).
SPEC_FULL_ATTENTION = "full_attention"
SPEC_SLIDING_WINDOW = "sliding_window"


@dataclass(slots=True)
class BlockStored:
    """Full blocks entered the prefix cache: ``block_hashes`` in chain order, the first one's parent
    (None for a first block), their ``token_ids`` concatenated, and one untagged ``extra_keys`` entry per
    block; the KV-cache group and its spec; where the blocks live (``medium``, ``locality``, an offload
    tier's ``ownership``), the ``session_id`` of the request that stored them, and per block the
    lookahead tokens its hash covers (None when lookahead hashing is off)."""

    block_hashes: list[ExternalBlockHash]
    parent_block_hash: ExternalBlockHash | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None = None  # deprecated in vLLM in favour of lora_name
    medium: str | None = MEDIUM_GPU
    lora_name: str | None = None
    extra_keys: list[tuple[Any, ...] | None] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None
    locality: str | None = None
    ownership: str | None = None
    session_id: str | None = None
    lookahead_token_ids: list[list[int]] | None = None


@dataclass(slots=True)
class BlockRemoved:
    """Cached blocks lost their hash (evicted for reuse)."""

    block_hashes: list[ExternalBlockHash]
    medium: str | None = MEDIUM_GPU
    group_idx: int | None = None
    locality: str | None = None
    ownership: str | None = None


@dataclass(slots=True)
class AllBlocksCleared:
    """The whole prefix cache was dropped (``reset_prefix_cache``)."""


KVCacheEvent = BlockStored | BlockRemoved | AllBlocksCleared


@dataclass(slots=True)
class KVEventBatch:
    """The events of one engine step, as vLLM publishes them (``ts`` in seconds since the epoch)."""

    ts: float
    events: list[KVCacheEvent] = field(default_factory=list)
    data_parallel_rank: int | None = None


def event_to_dict(event: KVCacheEvent) -> dict[str, Any]:
    """JSON-ready form: ``{"type": <vLLM class name>, <fields>}``, hashes as hex."""

    def conv(v: Any) -> Any:
        if isinstance(v, bytes):
            return v.hex()
        if isinstance(v, (list, tuple)):
            return [conv(x) for x in v]
        return v

    out: dict[str, Any] = {"type": type(event).__name__}
    for name in type(event).__slots__:  # type: ignore[attr-defined]
        out[name] = conv(getattr(event, name))
    return out
