"""Paged vs contiguous KV memory: one stream of requests, one fixed memory, two allocators.

Pure maths, no model. A seeded stream of requests (a shared system prompt, a prompt of random
length, an output of random length) is served by an iteration-level scheduler (FCFS, one decode
token per running request per step) over a KV memory of ``memory_tokens`` token slots, where one
slot holds one token's K and V for every layer.

* **Contiguous** (the pre-vLLM systems): every request gets one contiguous slab, placed first-fit in
  a linear address space, sized by a reservation policy (``max``: the model's maximum length,
  ``pow2``: the final length rounded up to a power of two, ``oracle``: exactly the final length).
  Waste: slots reserved for tokens not yet written, slots that will never be written (internal
  fragmentation), free holes too small for the next request although the free total would do
  (external fragmentation), and one private copy of the shared prefix per request.
* **Paged** (PagedAttention): fixed blocks of ``block_size`` slots from a pool, handed out one at a
  time as a sequence grows, with the full blocks of the shared prefix stored once (ref_cnt = number
  of holders). Waste is bounded by one partly filled block per request. When a growing request finds
  no free block, the most recently admitted request is preempted (its blocks freed, it goes back to
  the head of the queue and is recomputed later), as vLLM does.

Every step's memory is split into the categories of :data:`WASTE_KINDS`, which always sum to
``memory_tokens``. Utilisation is tokens stored / memory reserved, where memory reserved is every
allocated slot plus, while a request is waiting for memory, the free slots too (they are then
taken out of use, not idle).

This module holds the experiment's inputs (constants, ``PagingConfig``, the request stream); the two
allocators are ``kvviz.analysis.paging.alloc``, the scheduler loop and its results ``kvviz.analysis.paging.sim``.
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass

from kvviz.mirror.limits import MAX_BLOCK_SIZE, MIN_BLOCK_SIZE

LAYOUTS = ("contiguous", "paged")
RESERVATION_POLICIES = ("max", "pow2", "oracle")
RESERVATION_LABELS = {
    "max": "reserve the maximum length",
    "pow2": "reserve the final length rounded up to a power of two",
    "oracle": "reserve exactly the final length (knows the output length in advance)",
}

# The categories one token slot can be in at one step; they partition the memory.
WASTE_KINDS = ("stored", "duplicate", "reserved", "internal", "external", "free")
WASTE_LABELS = {
    "stored": "token states (useful)",
    "duplicate": "duplicate copies of the shared prefix",
    "reserved": "reserved for tokens not written yet",
    "internal": "internal fragmentation (never written)",
    "external": "external fragmentation (free, but no hole is big enough)",
    "free": "free",
}

# The PagedAttention paper's measurement of earlier systems (Kwon et al., SOSP 2023, figure 2).
PAPER_UTILISATION_BAND = (0.204, 0.382)
PAPER_SOURCE = (
    "Kwon et al., 'Efficient Memory Management for Large Language Model Serving with PagedAttention' "
    "(SOSP 2023): earlier systems kept 20.4%-38.2% of KV memory for actual token states"
)

# Bounds that keep one simulation well under a second and reject absurd input.
MAX_MEMORY_TOKENS = 1 << 20
MAX_REQUESTS = 2000
MAX_TOTAL_OUTPUT = 250_000


@dataclass(frozen=True)
class PagingConfig:
    """One experiment: the memory, the block size, and how the request stream is drawn."""

    memory_tokens: int = 8192
    block_size: int = 16
    num_requests: int = 40
    shared_prefix: int = 200
    prompt_min: int = 16
    prompt_max: int = 600
    output_min: int = 8
    output_max: int = 600
    max_model_len: int = 2048
    reservation: str = "max"
    share_prefix: bool = True
    seed: int = 0

    def validate(self) -> None:
        """Raise ValueError with a one-line message when the experiment makes no sense."""
        ints = {k: v for k, v in asdict(self).items() if k not in ("reservation", "share_prefix")}
        for name, value in ints.items():
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be an integer, got {value!r}")
        if self.reservation not in RESERVATION_POLICIES:
            raise ValueError(f"reservation must be one of {', '.join(RESERVATION_POLICIES)}")
        if not MIN_BLOCK_SIZE <= self.block_size <= MAX_BLOCK_SIZE:
            raise ValueError(f"block_size must be between {MIN_BLOCK_SIZE} and {MAX_BLOCK_SIZE} tokens")
        if not self.block_size <= self.memory_tokens <= MAX_MEMORY_TOKENS:
            raise ValueError(f"memory_tokens must be between block_size and {MAX_MEMORY_TOKENS:,}")
        if self.memory_tokens % self.block_size:
            raise ValueError("memory_tokens must be a multiple of block_size")
        if not 1 <= self.num_requests <= MAX_REQUESTS:
            raise ValueError(f"num_requests must be between 1 and {MAX_REQUESTS:,}")
        if self.shared_prefix < 0:
            raise ValueError("shared_prefix must be >= 0")
        if not 1 <= self.prompt_min <= self.prompt_max:
            raise ValueError("need 1 <= prompt_min <= prompt_max")
        if not 1 <= self.output_min <= self.output_max:
            raise ValueError("need 1 <= output_min <= output_max")
        longest = self.shared_prefix + self.prompt_max + self.output_max
        if longest > self.max_model_len:
            raise ValueError(
                f"shared_prefix + prompt_max + output_max = {longest:,} tokens exceeds "
                f"max_model_len = {self.max_model_len:,}"
            )
        if self.max_model_len > self.memory_tokens:
            raise ValueError(
                f"max_model_len = {self.max_model_len:,} does not fit in memory_tokens = {self.memory_tokens:,}"
            )
        if self.num_requests * self.output_max > MAX_TOTAL_OUTPUT:
            raise ValueError(
                f"num_requests x output_max must be at most {MAX_TOTAL_OUTPUT:,} tokens (keeps it interactive)"
            )


@dataclass(frozen=True)
class Request:
    """One request of the stream: its prompt (shared prefix included) and its true output length."""

    rid: int
    prompt_len: int
    output_len: int

    @property
    def final_len(self) -> int:
        return self.prompt_len + self.output_len


def make_requests(cfg: PagingConfig) -> list[Request]:
    """The seeded request stream: prompt = shared prefix + uniform[prompt_min, prompt_max] tokens."""
    rng = random.Random(cfg.seed)
    return [
        Request(
            rid=i,
            prompt_len=cfg.shared_prefix + rng.randint(cfg.prompt_min, cfg.prompt_max),
            output_len=rng.randint(cfg.output_min, cfg.output_max),
        )
        for i in range(cfg.num_requests)
    ]


def reservation_tokens(req: Request, cfg: PagingConfig) -> int:
    """Slab size a contiguous allocator reserves for ``req`` under ``cfg.reservation``."""
    if cfg.reservation == "max":
        return cfg.max_model_len
    if cfg.reservation == "pow2":
        return min(cfg.max_model_len, 1 << max(0, math.ceil(math.log2(req.final_len))))
    return req.final_len
