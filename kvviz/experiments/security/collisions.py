"""Why a block's identity is SHA-256 over canonical CBOR, shown with measurements.

- ``python_hash_facts``: what the built-in ``hash`` does in fresh processes with different
  ``PYTHONHASHSEED`` values (``hash(None)``, int tuples, strings, ``hash(-1) == hash(-2)``).
- ``none_hash_demo``: the same tokens hashed under a fixed seed twice and a random root twice.
- ``force_collision``: a toy hash (SHA-256 over CBOR cut to ``bits`` bits) lets a search find a
  different first block for prompt B with prompt A's toy hash; a block pool keyed by that toy hash then
  serves B A's block, while the full SHA-256 serves nothing.
- ``measure_hash_costs``: each hash function's cost per block on this machine, through the chain.
- ``birthday_probability``: the chance of any collision among n blocks for a b-bit hash (computed).

Pure Python, no torch (the model-side consequence of a collision is ``kvviz.experiments.security.collision_leak``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import cbor2

from kvviz.mirror import limits
from kvviz.mirror.block_pool import BlockPool
from kvviz.mirror.hashing import (
    DIGEST_SIZES,
    HASH_FUNCTIONS,
    UNSAFE_HASHES,
    HashFn,
    hash_block_chain,
    init_none_hash,
    random_seed,
    sha256_cbor,
    validate_token_ids,
)
from kvviz.mirror.manager import find_longest_cache_hit

#: The forced-collision demo's two prompts (model input, the same in every language, so the model's answer
#: shows which block it was served): A is cached first, B is forced onto A's block 0 under a toy hash.
DEFAULT_PROMPT_A = "My name is Alice Moreau and my bank PIN is 4471."
DEFAULT_PROMPT_B = "My name is Boris Ivanov and my bank PIN is 9902.\nQuestion: what is my name?\nAnswer: My name is"
MIN_TOY_BITS = 4
MAX_TOY_BITS = 24
DEFAULT_TOY_BITS = 16


def truncated_hash(bits: int) -> HashFn:
    """A deliberately weak hash: the first ``bits`` bits of ``sha256_cbor`` (rest zeroed), as bytes.
    Teaching only: it shows what a collision does, at a search cost of about 2**bits tries."""
    if isinstance(bits, bool) or not isinstance(bits, int) or not MIN_TOY_BITS <= bits <= MAX_TOY_BITS:
        raise ValueError(f"toy hash bits must be an integer in {MIN_TOY_BITS}..{MAX_TOY_BITS}, got {bits!r}")
    nbytes = (bits + 7) // 8
    mask = (0xFF << (8 * nbytes - bits)) & 0xFF

    def toy(obj: Any) -> bytes:
        digest = bytearray(hashlib.sha256(cbor2.dumps(obj, canonical=True)).digest()[:nbytes])
        digest[-1] &= mask
        return bytes(digest)

    toy.__name__ = f"sha256_cbor_{bits}bit"
    return toy


# ----------------------------------------------------------------------------- Python's hash


@dataclass(frozen=True)
class PythonHashRow:
    expr: str
    run1: str
    run2: str

    @property
    def same(self) -> bool:
        return self.run1 == self.run2


@dataclass(frozen=True)
class PythonHashFacts:
    """Values of a few ``hash`` expressions in two fresh processes (seeds ``seeds``)."""

    python_version: str
    seeds: tuple[str, str]
    rows: tuple[PythonHashRow, ...]

    def row(self, expr: str) -> PythonHashRow:
        return next(r for r in self.rows if r.expr == expr)


_HASH_EXPRS = ("hash(None)", "hash((1, 2, 3))", "hash('abc')", "hash(-1) == hash(-2)")
_CHILD = "import json; print(json.dumps([repr(eval(e)) for e in json.loads(input())]))"


def python_hash_facts(seeds: tuple[str, str] = ("1", "2"), timeout_s: float = 30.0) -> PythonHashFacts:
    """Run two fresh interpreters (this one's executable) with ``PYTHONHASHSEED`` = each seed and
    record the value of each expression. Measured, not asserted."""
    results: list[list[str]] = []
    for seed in seeds:
        env = dict(os.environ, PYTHONHASHSEED=str(seed))
        proc = subprocess.run([sys.executable, "-c", _CHILD], input=json.dumps(_HASH_EXPRS), env=env,
                              capture_output=True, text=True, timeout=timeout_s, check=True)
        results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    rows = tuple(PythonHashRow(e, results[0][i], results[1][i]) for i, e in enumerate(_HASH_EXPRS))
    version = ".".join(str(v) for v in sys.version_info[:3])
    return PythonHashFacts(version, (str(seeds[0]), str(seeds[1])), rows)


# ----------------------------------------------------------------------------- NONE_HASH


@dataclass(frozen=True)
class NoneHashDemo:
    """The same prompt's chain under four roots: seed "0" twice, a random root twice."""

    roots: dict[str, bytes]
    chains: dict[str, list[bytes]]

    @property
    def seeded_equal(self) -> bool:
        return self.chains["seed0_a"] == self.chains["seed0_b"]

    @property
    def random_all_differ(self) -> bool:
        a, b = self.chains["random_a"], self.chains["random_b"]
        return all(x != y for x, y in zip(a, b, strict=True))


def none_hash_demo(token_ids: Sequence[int], block_size: int = 16, hash_name: str = "sha256_cbor") -> NoneHashDemo:
    """Hash ``token_ids`` as two processes would with a fixed seed ("0") and with random roots."""
    tokens = validate_token_ids(token_ids)
    limits.block_size(block_size)
    if len(tokens) < block_size:
        raise ValueError(f"need at least one full block ({block_size} tokens), got {len(tokens)}")
    fn = HASH_FUNCTIONS[hash_name]
    roots = {"seed0_a": init_none_hash(fn, "0"), "seed0_b": init_none_hash(fn, "0"),
             "random_a": init_none_hash(fn, random_seed()), "random_b": init_none_hash(fn, random_seed())}
    chains = {k: hash_block_chain(tokens, block_size, fn, root) for k, root in roots.items()}
    return NoneHashDemo(roots, chains)


# ----------------------------------------------------------------------------- a forced collision


@dataclass(frozen=True)
class CollisionDemo:
    """A found (or not found) collision of B's block 0 with A's block 0 under a ``bits``-bit toy hash,
    and what a pool keyed by that hash then serves B."""

    bits: int
    block_size: int
    tokens_a: tuple[int, ...]
    tokens_b: tuple[int, ...]  # B after forging (equal to the original B when not found)
    tokens_b_original: tuple[int, ...]
    changed_positions: tuple[int, ...]
    found: bool
    tries: int
    search_ms: float
    toy_hashes_a: tuple[bytes, ...]
    toy_hashes_b: tuple[bytes, ...]
    sha_hashes_a: tuple[bytes, ...]
    sha_hashes_b: tuple[bytes, ...]
    served_block_ids: tuple[int, ...]  # A's physical blocks the toy-hash pool gives B
    a_block_ids: tuple[int, ...]
    sha_hit_blocks: int

    @property
    def expected_tries(self) -> int:
        return 2**self.bits

    @property
    def hit_blocks(self) -> int:
        return len(self.served_block_ids)

    def as_dict(self) -> dict[str, Any]:
        return {
            "bits": self.bits, "block_size": self.block_size, "found": self.found, "tries": self.tries,
            "expected_tries": self.expected_tries, "search_ms": round(self.search_ms, 3),
            "changed_positions": list(self.changed_positions),
            "tokens_a": list(self.tokens_a), "tokens_b": list(self.tokens_b),
            "tokens_b_original": list(self.tokens_b_original),
            "toy_hash_a_block0": self.toy_hashes_a[0].hex(), "toy_hash_b_block0": self.toy_hashes_b[0].hex(),
            "sha256_a_block0": self.sha_hashes_a[0].hex(), "sha256_b_block0": self.sha_hashes_b[0].hex(),
            "served_block_ids": list(self.served_block_ids), "a_block_ids": list(self.a_block_ids),
            "hit_blocks_toy": self.hit_blocks, "hit_blocks_sha256": self.sha_hit_blocks,
        }


def _cache_prompt(pool: BlockPool, hashes: Sequence[bytes], num_tokens: int, block_size: int) -> list[int]:
    """Allocate blocks for a prompt, cache its full blocks under ``hashes``, finish it (blocks stay cached)."""
    blocks = pool.get_new_blocks(-(-num_tokens // block_size), "A", num_tokens=num_tokens)
    pool.cache_full_blocks(blocks, hashes, 0, len(hashes), "A")
    pool.free_blocks(list(reversed(blocks)), "A")
    return [b.block_id for b in blocks]


def _served(pool: BlockPool, hashes: Sequence[bytes], num_tokens: int, block_size: int) -> list[int]:
    hit = find_longest_cache_hit(hashes, num_tokens - 1, block_size, pool.get_cached_block)
    return [b.block_id for b in hit]


def force_collision(
    tokens_a: Sequence[int],
    tokens_b: Sequence[int],
    *,
    bits: int = DEFAULT_TOY_BITS,
    block_size: int = 16,
    vocab_size: int = 49152,
    positions: int = 2,
    seed: str = "0",
    max_tries: int | None = None,
) -> CollisionDemo:
    """Search for a block 0 of B (its last ``positions`` tokens replaced, everything else kept) whose
    ``bits``-bit toy hash equals A's block 0, then show what pools keyed by the toy hash and by
    SHA-256 serve B after caching A. Deterministic (replacements are enumerated in order)."""
    toy = truncated_hash(bits)
    limits.block_size(block_size)
    a = validate_token_ids(tokens_a)
    b0 = validate_token_ids(tokens_b)
    if len(a) < block_size + 1 or len(b0) < block_size + 1:
        raise ValueError(f"both prompts need more than one block ({block_size} tokens) to show a served block")
    if not 1 <= positions <= min(3, block_size):
        raise ValueError("positions must be 1..3")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 2:
        raise ValueError(f"vocab_size must be an integer >= 2, got {vocab_size!r}")
    limit = max_tries if max_tries is not None else min(vocab_size**positions, 16 * 2**bits)
    root_toy = init_none_hash(toy, seed)
    target = toy((root_toy, a[:block_size], None))
    head = list(b0[:block_size])
    slots = list(range(block_size - positions, block_size))
    dumps, sha = cbor2.dumps, hashlib.sha256
    nbytes = len(target)
    mask = (0xFF << (8 * nbytes - bits)) & 0xFF
    found = False
    tries = 0
    start = time.perf_counter()
    candidate = list(head)
    for tries in range(1, limit + 1):  # noqa: B007 - tries is read after the loop
        n = tries - 1
        for slot in slots:
            candidate[slot] = n % vocab_size
            n //= vocab_size
        if candidate == list(a[:block_size]):
            continue
        digest = bytearray(sha(dumps((root_toy, tuple(candidate), None), canonical=True)).digest()[:nbytes])
        digest[-1] &= mask
        if bytes(digest) == target:
            found = True
            break
    search_ms = (time.perf_counter() - start) * 1000.0
    b = tuple(candidate) + b0[block_size:] if found else b0
    changed = tuple(i for i in slots if b[i] != b0[i]) if found else ()

    toy_a = hash_block_chain(a, block_size, toy, root_toy)
    toy_b = hash_block_chain(b, block_size, toy, root_toy)
    root_sha = init_none_hash(sha256_cbor, seed)
    sha_a = hash_block_chain(a, block_size, sha256_cbor, root_sha)
    sha_b = hash_block_chain(b, block_size, sha256_cbor, root_sha)
    blocks_needed = -(-len(a) // block_size) + 1
    toy_pool = BlockPool(blocks_needed, block_size=block_size)
    a_ids = _cache_prompt(toy_pool, toy_a, len(a), block_size)
    served = _served(toy_pool, toy_b, len(b), block_size)
    sha_pool = BlockPool(blocks_needed, block_size=block_size)
    _cache_prompt(sha_pool, sha_a, len(a), block_size)
    sha_hit = len(_served(sha_pool, sha_b, len(b), block_size))
    return CollisionDemo(bits, block_size, a, b, b0, changed, found, tries, search_ms, tuple(toy_a), tuple(toy_b),
                         tuple(sha_a), tuple(sha_b), tuple(served), tuple(a_ids), sha_hit)


# ----------------------------------------------------------------------------- costs


@dataclass(frozen=True)
class HashCost:
    """Measured cost of hashing a chain of blocks with one function (best of the runs)."""

    name: str
    digest_bytes: int
    ns_per_block: float
    block_size: int
    unsafe: bool

    @property
    def ns_per_token(self) -> float:
        return self.ns_per_block / self.block_size

    @property
    def ms_per_50k_tokens(self) -> float:
        return self.ns_per_token * 50_000 / 1e6

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "digest_bytes": self.digest_bytes, "ns_per_block": round(self.ns_per_block, 1),
                "ns_per_token": round(self.ns_per_token, 2), "ms_per_50k_tokens": round(self.ms_per_50k_tokens, 3),
                "birthday_blocks_50pct": birthday_blocks(self.digest_bytes * 8) if self.digest_bytes else None,
                "unsafe": self.unsafe}


def _cbor_only_chain(tokens: tuple[int, ...], block_size: int, root: bytes) -> None:
    dumps = cbor2.dumps
    for start in range(0, len(tokens) - block_size + 1, block_size):
        dumps((root, tokens[start : start + block_size], None), canonical=True)


def measure_hash_costs(num_blocks: int = 2000, block_size: int = 16, repeats: int = 5,
                       names: Sequence[str] | None = None) -> list[HashCost]:
    """Time ``hash_block_chain`` over ``num_blocks`` blocks for each hash function (best of ``repeats``),
    plus CBOR encoding alone (``cbor_only``). Token ids are a fixed pseudo-random sequence."""
    if isinstance(num_blocks, bool) or not isinstance(num_blocks, int) or not 1 <= num_blocks <= 1_000_000:
        raise ValueError(f"num_blocks must be an integer in 1..1000000, got {num_blocks!r}")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or not 1 <= repeats <= 100:
        raise ValueError(f"repeats must be an integer in 1..100, got {repeats!r}")
    limits.block_size(block_size)
    tokens = tuple((i * 2654435761) % 49152 for i in range(num_blocks * block_size))
    chosen = list(names) if names is not None else list(HASH_FUNCTIONS)
    out: list[HashCost] = []
    runs: list[tuple[str, Callable[[], object], int, bool]] = []
    for name in chosen:
        fn = HASH_FUNCTIONS[name]
        root = init_none_hash(fn, "0")
        runs.append((name, lambda fn=fn, root=root: hash_block_chain(tokens, block_size, fn, root),
                     DIGEST_SIZES.get(name, 0), name in UNSAFE_HASHES))
    root32 = init_none_hash(sha256_cbor, "0")
    runs.append(("cbor_only", lambda: _cbor_only_chain(tokens, block_size, root32), 0, False))
    for name, run, digest, unsafe in runs:
        best = math.inf
        for _ in range(repeats):
            start = time.perf_counter_ns()
            run()
            best = min(best, time.perf_counter_ns() - start)
        out.append(HashCost(name, digest, best / num_blocks, block_size, unsafe))
    return out


def birthday_probability(num_blocks: float, bits: int) -> float:
    """Chance that some two of ``num_blocks`` random ``bits``-bit hashes are equal: 1 - exp(-n²/2^(b+1))."""
    n = float(num_blocks)
    return -math.expm1(-(n * n) / 2.0 ** (bits + 1))


def birthday_blocks(bits: int, probability: float = 0.5) -> float:
    """Blocks at which the collision chance reaches ``probability``: sqrt(2^(b+1) ln(1/(1-p)))."""
    return math.sqrt(2.0 ** (bits + 1) * math.log(1.0 / (1.0 - probability)))


__all__ = [
    "CollisionDemo",
    "HashCost",
    "NoneHashDemo",
    "PythonHashFacts",
    "PythonHashRow",
    "birthday_blocks",
    "birthday_probability",
    "force_collision",
    "measure_hash_costs",
    "none_hash_demo",
    "python_hash_facts",
    "truncated_hash",
]
