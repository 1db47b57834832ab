"""Block hashing speed: 1M tokens, block size 16, sha256_cbor.

``hash_1m_tokens_s`` goes through kvviz's hashing path (``hash_block_chain``: hash-function lookup by
name, salt/extra-key handling, the chain loop; the path the manager, the comparison and the CLI use).
``hash_reference_1m_tokens_s`` is a plain loop of vLLM's formula, ``sha256(cbor2.dumps((parent,
tuple(block), None), canonical=True))``, timed in the same run; ``hash_ratio`` = ours / reference.
Both produce the same final hash (checked). Each is the best of several interleaved runs.
``hash_records_1m_tokens_s`` adds building one ``BlockHashRecord`` per block (what pages display).
"""

from __future__ import annotations

import hashlib
import random
import time

import cbor2

from kvviz.mirror.hashing import hash_block_chain, hash_request_blocks, init_none_hash, sha256_cbor

NUM_TOKENS = 1_000_000
BLOCK_SIZE = 16
REPEATS = 7

TARGETS = [
    ("hash_ratio", "<= 1.1 (kvviz hashing path / plain loop of the formula, same run)",
     lambda r: r["hash_ratio"] <= 1.1),
]


def _reference(tokens: list[int], none_hash: bytes) -> bytes:
    parent = none_hash
    for start in range(0, len(tokens) - BLOCK_SIZE + 1, BLOCK_SIZE):
        parent = hashlib.sha256(
            cbor2.dumps((parent, tuple(tokens[start : start + BLOCK_SIZE]), None), canonical=True)
        ).digest()
    return parent


def _timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - start, out


def run(results: dict) -> None:
    rng = random.Random(0)
    tokens = [rng.randrange(49152) for _ in range(NUM_TOKENS)]
    none_hash = init_none_hash(sha256_cbor, "0")
    ours_s, ref_s = [], []
    for _ in range(REPEATS):
        t, chain = _timed(hash_block_chain, tokens, BLOCK_SIZE, "sha256_cbor", none_hash)
        ours_s.append(t)
        t, last = _timed(_reference, tokens, none_hash)
        ref_s.append(t)
        if chain[-1] != last or len(chain) != NUM_TOKENS // BLOCK_SIZE:
            raise AssertionError("kvviz chain differs from the reference formula")
    records_s, records = _timed(hash_request_blocks, tokens, BLOCK_SIZE, "sha256_cbor", none_hash)
    if records[-1].hash != chain[-1]:
        raise AssertionError("records differ from the chain")
    results["hash_1m_tokens_s"] = min(ours_s)
    results["hash_reference_1m_tokens_s"] = min(ref_s)
    results["hash_ratio"] = min(ours_s) / min(ref_s)
    results["hash_records_1m_tokens_s"] = records_s
