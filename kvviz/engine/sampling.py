"""SamplingParams and the Sampler: greedy, temperature, top-p, a per-request seeded generator, and
the logprobs of each sampled token.

Invariant: a request with a seed draws from its own ``torch.Generator``, created once and kept across
preemption, so its tokens do not depend on what else runs in the batch (vLLM's per-request generators).
Logprobs are of the raw model distribution (log_softmax of the logits before temperature and top-p),
vLLM 0.33.0's default ``logprobs_mode="raw_logprobs"``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kvviz.errors import CodedError

MAX_NEW_TOKENS = 32768
MAX_LOGPROBS = 20  # vLLM 0.33.0's ModelConfig.max_logprobs default (--max-logprobs)
SEED_RANGE = (-(2**63), 2**64 - 1)  # torch.Generator.manual_seed's range (a child of n adds its index)


@dataclass(frozen=True)
class TokenLogprob:
    """One sampled token's log-probability, its rank (1 = the most likely) and the ``top`` most likely
    tokens as ``(token_id, logprob)`` from the most likely down (vLLM's ``Logprob`` entries)."""

    token_id: int
    logprob: float
    rank: int
    top: tuple[tuple[int, float], ...] = ()


def token_logprob(row: torch.Tensor, token: int, k: int) -> TokenLogprob:
    """Raw logprobs of one position: ``row`` the logits ``[vocab]``, ``token`` the sampled id, ``k`` top."""
    logp = torch.log_softmax(row.float(), dim=-1)  # [vocab]
    chosen = logp[token]
    rank = int((logp > chosen).sum()) + 1
    top: tuple[tuple[int, float], ...] = ()
    if k > 0:
        values, ids = logp.topk(k)  # [k], most likely first
        top = tuple(zip(ids.tolist(), values.tolist(), strict=True))
    return TokenLogprob(int(token), float(chosen), rank, top)


@dataclass(frozen=True)
class SamplingParams:
    """How to pick each next token and when to stop (vLLM's names). ``temperature`` 0 is greedy;
    ``top_p`` keeps the smallest set of tokens whose probability reaches it; ``stop`` strings end the
    text (not included in it), as do ``stop_token_ids``; ``ignore_eos`` keeps generating past the
    end-of-sequence token; ``logprobs`` (0..MAX_LOGPROBS) asks for each sampled token's logprob and that
    many top alternatives."""

    max_tokens: int = 16
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    ignore_eos: bool = False
    logprobs: int | None = None
    stop_token_ids: tuple[int, ...] = ()
    return_logits: bool = False  # kvviz: each output carries the logits its new token was sampled from
    # vLLM 0.33.0's: no prefix-cache (or host-tier) lookup at admission, the whole prompt is computed; its
    # full blocks are still cached afterwards, and it is not counted in the prefix-cache queries and hits
    skip_reading_prefix_cache: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or not (
                1 <= self.max_tokens <= MAX_NEW_TOKENS):
            raise CodedError(f"max_tokens must be an integer in 1..{MAX_NEW_TOKENS}, got {self.max_tokens!r}",
                             "bad_max_tokens", value=repr(self.max_tokens)[:40], high=MAX_NEW_TOKENS)
        if isinstance(self.temperature, bool) or not isinstance(self.temperature, (int, float)) or not (
                0.0 <= float(self.temperature) <= 100.0):
            raise CodedError(f"temperature must be a number in 0..100, got {self.temperature!r}",
                             "bad_temperature", value=repr(self.temperature)[:40])
        if isinstance(self.top_p, bool) or not isinstance(self.top_p, (int, float)) or not (
                0.0 < float(self.top_p) <= 1.0):
            raise CodedError(f"top_p must be a number in (0, 1], got {self.top_p!r}", "bad_top_p",
                             value=repr(self.top_p)[:40])
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)
                                      or not SEED_RANGE[0] <= self.seed <= SEED_RANGE[1]):
            raise CodedError(f"seed must be an integer in -2**63..2**64-1, got {self.seed!r:.40}", "bad_seed",
                             value=repr(self.seed)[:40])
        if self.logprobs is not None and (isinstance(self.logprobs, bool) or not isinstance(self.logprobs, int)
                                          or not 0 <= self.logprobs <= MAX_LOGPROBS):
            raise CodedError(f"logprobs must be an integer in 0..{MAX_LOGPROBS}, got {self.logprobs!r:.40}",
                             "bad_logprobs", value=repr(self.logprobs)[:40], high=MAX_LOGPROBS)
        ids = tuple(self.stop_token_ids)
        if any(isinstance(t, bool) or not isinstance(t, int) or t < 0 for t in ids) or len(ids) > 1024:
            raise CodedError("stop_token_ids must be at most 1024 token ids (integers >= 0)", "bad_stop")
        object.__setattr__(self, "stop_token_ids", ids)
        stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)
        if any(not isinstance(s, str) or not s for s in stop) or len(stop) > 16:
            raise CodedError("stop must be at most 16 non-empty strings", "bad_stop")
        object.__setattr__(self, "stop", stop)
        if not isinstance(self.skip_reading_prefix_cache, bool):
            raise CodedError(f"skip_reading_prefix_cache must be true or false, got "
                             f"{self.skip_reading_prefix_cache!r:.40}", "bad_skip_reading_prefix_cache",
                             value=repr(self.skip_reading_prefix_cache)[:40])

    @property
    def greedy(self) -> bool:
        return float(self.temperature) == 0.0


def make_generator(params: SamplingParams) -> torch.Generator | None:
    """The request's own (CPU) generator when it has a seed (None: the engine's shared one)."""
    if params.greedy or params.seed is None:
        return None
    gen = torch.Generator()
    gen.manual_seed(params.seed)
    return gen


class Sampler:
    """Next tokens from last-position logits ``[R, vocab]``; one row per request, drawn on the CPU."""

    def __init__(self, seed: int = 0) -> None:
        self.shared = torch.Generator()
        self.shared.manual_seed(seed)

    def sample(self, logits: torch.Tensor, params: list[SamplingParams],
               generators: list[torch.Generator | None]) -> list[int]:
        logits = logits.float().cpu()
        out = logits.argmax(dim=-1).tolist()  # greedy rows as they are
        for i, p in enumerate(params):
            if not p.greedy:
                out[i] = self._draw(logits[i], p, generators[i] or self.shared)
        return out

    @staticmethod
    def _draw(row: torch.Tensor, p: SamplingParams, gen: torch.Generator) -> int:
        """Draw one token from softmax(row / temperature), cut to the top-p nucleus."""
        probs = torch.softmax(row / float(p.temperature), dim=-1)  # [vocab]
        if p.top_p < 1.0:
            sorted_p, order = probs.sort(descending=True)
            # drop a token when the tokens ranked above it already reach top_p (the first always stays)
            drop = (sorted_p.cumsum(0) - sorted_p) >= p.top_p
            sorted_p = sorted_p.masked_fill(drop, 0.0)
            pick = torch.multinomial(sorted_p, 1, generator=gen)
            return int(order[pick])
        return int(torch.multinomial(probs, 1, generator=gen))
