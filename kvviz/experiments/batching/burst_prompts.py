"""The batching page's burst: prompts fed to the model (the same in every language). The system prompt
is the room presets' prefix (kvviz.experiments.room.presets), so the burst's cached prefills can share its blocks."""

DEMO_PROMPT = (
    "You are the workshop assistant for a hands-on session on prompt caching in large language model "
    "servers. Answer briefly, cite the block size when it matters, and say when you are unsure. "
    "Attendees ask about block hashes, cache salts, eviction and the cost of recomputing a prefix. "
)
DEMO_QUESTIONS = ("Question: what is a block?", "Question: why salt a cache?", "Question: what is evicted first?")
DEMO_FRESH = "A new conversation nobody has cached yet: summarise paged attention in two sentences, please. " * 2


def fresh_prompt(tag: str) -> str:
    """``DEMO_FRESH`` behind a per-burst tag: its first block differs from every earlier burst's, so it
    is computed from scratch each time (the same text again would hit the previous burst's blocks)."""
    return f"Conversation {tag}. {DEMO_FRESH}"
