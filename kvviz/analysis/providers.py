"""Provider cache policies as data, not the mirror: the products' rules (checkpoints, minimum length, lifetimes,
usage fields) around the one mechanism the mirror computes.

These are **policy, not mechanics**: product decisions of each provider, stated in their public
documentation. They change over time, so every value carries its source (a documentation page, spelled
out with its address in SOURCE_NAMES) and the date it was checked. The mechanics (only an identical prefix can be reused) are the same everywhere and live in
the block manager; vLLM itself has no time-to-live at all, only LRU eviction under memory pressure.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

AS_OF = "2026-11"
SOURCE_ANTHROPIC = "Anthropic docs, Prompt caching"
SOURCE_OPENAI = "OpenAI docs, Prompt caching"
SOURCE_ENGINE = "vLLM docs, Automatic Prefix Caching"
# The short source names above are spelled out (with their addresses) in SOURCE_NAMES.

# Anthropic's per-response usage fields, in the order a turn's prompt is laid out.
USAGE_FIELDS = ("cache_read_input_tokens", "cache_creation_input_tokens", "input_tokens")

# The documented range of the minimum cacheable prompt ("from about 500 to a few thousand tokens").
MIN_CACHEABLE_RANGE = (500, 4096)
MIN_CACHEABLE_DEFAULT = 1024  # an example inside the documented range; the real value depends on the model


@dataclass(frozen=True)
class PolicyValue:
    """One documented value: what it is, the value, where it comes from and when it was checked."""

    name: str
    value: str
    source: str
    as_of: str = AS_OF


@dataclass(frozen=True)
class CachePolicy:
    """How one serving stack decides where cache entries exist and how long they live.

    ``checkpoints`` is "explicit" (entries only where the client marks them), "automatic" (the server
    picks the points; kvviz places them at block boundaries, an assumption) or "blocks" (the engine
    caches every full block). ``ttl_s`` None means no time limit (LRU eviction under pressure only).
    """

    key: str
    provider: str
    label: str
    checkpoints: str
    ttl_s: float | None
    refresh_on_hit: bool
    min_cacheable_tokens: int
    ttl_counted_from: str
    values: tuple[PolicyValue, ...]
    is_policy: bool = True

    @property
    def sources_used(self) -> set[str]:
        """The source keys (of SOURCE_NAMES) its values cite; a value may cite several, ``;``-separated."""
        return {part.strip() for v in self.values for part in v.source.split(";")}

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["values"] = [asdict(v) for v in self.values]
        return out


_ANTHROPIC_VALUES = (
    PolicyValue("caching", "off by default; on where a cache_control mark is placed", SOURCE_ANTHROPIC),
    PolicyValue("checkpoints", "entries only at cache_control marks; mark the last block that stays the same",
                SOURCE_ANTHROPIC),
    PolicyValue("reuse", "up to the nearest checkpoint before the first difference", SOURCE_ANTHROPIC),
    PolicyValue("lifetime", "5 min by default, refreshed free on each hit; 1 h for a fee", SOURCE_ANTHROPIC),
    PolicyValue("lifetime counted from", "the start of the request, not the end of the answer", SOURCE_ANTHROPIC),
    PolicyValue("minimum cacheable prompt", "about 500 to a few thousand tokens, depending on the model",
                SOURCE_ANTHROPIC),
    PolicyValue("usage fields", "cache_creation_input_tokens, cache_read_input_tokens, input_tokens",
                SOURCE_ANTHROPIC),
    PolicyValue("JSON key order", "tool arguments serialised with unstable key order (Swift, Go) make a new "
                "prefix each time", SOURCE_ANTHROPIC),
)

_OPENAI_VALUES = (
    PolicyValue("caching", "automatic, no marks needed (manual marks only on recent models)", SOURCE_OPENAI),
    PolicyValue("checkpoints", "chosen by the server; kvviz assumes block boundaries", SOURCE_OPENAI),
    PolicyValue("lifetime (older models)", "about 5-10 min idle, up to an hour", SOURCE_OPENAI),
    PolicyValue("lifetime (newer models)", "30 min", SOURCE_OPENAI),
    PolicyValue("extended retention", "optional 24 h", SOURCE_OPENAI),
    PolicyValue("minimum cacheable prompt", "about 500 to a few thousand tokens, depending on the model",
                SOURCE_OPENAI),
)

_VLLM_VALUES = (
    PolicyValue("caching", "automatic prefix caching of every full block (16 tokens by default)", SOURCE_ENGINE),
    PolicyValue("lifetime", "no time limit; cached blocks are evicted LRU when the pool needs a free block",
                SOURCE_ENGINE),
    PolicyValue("minimum", "one full block", SOURCE_ENGINE),
)

POLICIES: dict[str, CachePolicy] = {
    p.key: p
    for p in (
        CachePolicy("vllm", "vLLM", "vLLM engine: every full block, no TTL (mechanics)", "blocks", None, False,
                    0, "-", _VLLM_VALUES, is_policy=False),
        CachePolicy("anthropic-5m", "Anthropic", "Anthropic cache_control, 5 min TTL", "explicit", 300.0, True,
                    MIN_CACHEABLE_DEFAULT, "request start", _ANTHROPIC_VALUES),
        CachePolicy("anthropic-1h", "Anthropic", "Anthropic cache_control, 1 h TTL (paid)", "explicit", 3600.0,
                    True, MIN_CACHEABLE_DEFAULT, "request start", _ANTHROPIC_VALUES),
        CachePolicy("openai-older", "OpenAI", "OpenAI automatic, older models (~5 min idle)", "automatic", 300.0,
                    True, MIN_CACHEABLE_DEFAULT, "last use", _OPENAI_VALUES),
        CachePolicy("openai-newer", "OpenAI", "OpenAI automatic, newer models (30 min)", "automatic", 1800.0,
                    True, MIN_CACHEABLE_DEFAULT, "last use", _OPENAI_VALUES),
        CachePolicy("openai-24h", "OpenAI", "OpenAI automatic, 24 h retention", "automatic", 86400.0, True,
                    MIN_CACHEABLE_DEFAULT, "last use", _OPENAI_VALUES),
    )
}
DEFAULT_POLICY = "anthropic-5m"


def get_policy(key: str) -> CachePolicy:
    """The policy named ``key``; ValueError with the valid names otherwise."""
    try:
        return POLICIES[key]
    except KeyError:
        raise ValueError(f"unknown policy {key!r}; choose one of {', '.join(POLICIES)}") from None


# What the short source names of the policies' values refer to: public documentation pages (checked on
# the date AS_OF gives). Links: data, the same in every language.
SOURCE_NAMES = {
    "Anthropic docs, Prompt caching": "https://docs.claude.com/en/docs/build-with-claude/prompt-caching",
    "OpenAI docs, Prompt caching": "https://platform.openai.com/docs/guides/prompt-caching",
    "vLLM docs, Automatic Prefix Caching": "https://docs.vllm.ai/en/latest/design/prefix_caching/",
}
