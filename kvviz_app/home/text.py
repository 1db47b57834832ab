"""Strings of the landing page (pages/home.py)."""

TITLE = "kvviz: prompt caching on a real model"
INTRO = (
    "When a language model reads a prompt, every layer computes a **Key** and a **Value** vector for "
    "every token. A prompt cache keeps exactly these tensors, not the text and not the answer, so the "
    "next request that starts with the same tokens skips that work. Each token's K/V depend on all the "
    "tokens before it, so only an **identical prefix** can be reused: change one character near the "
    "start and everything after it has to be computed again. kvviz shows both sides on a real model "
    "running on this machine."
)

PICTURE_HEADER = "One character, two chains"
PICTURE_CAPTION = (
    "The Edit page's first example, hashed here: prompts A and B have {tokens:,} tokens and differ in one "
    "letter at token {first:,}. Each row is a block of {size} tokens. B's first {reused:,} of {blocks:,} "
    "blocks hash exactly as A's, so an engine reuses their K/V; from the block holding the edit on, every "
    "hash differs and those tokens are computed again."
)

TEACHES_HEADER = "What you will see"
TEACHES = [
    "**What is cached.** Prefill reads the whole prompt in one compute-bound pass and leaves one K and "
    "one V per token per layer; queries are not kept. Decode then adds one token per step and re-reads "
    "the whole cache each time.",
    "**Why one character breaks it.** Under causal attention the K/V of token N depend on tokens 0..N-1. "
    "A matching chunk in the middle of two prompts is worthless; only a shared prefix counts, in every "
    "engine.",
    "**How an engine finds reusable work.** vLLM cuts the prompt into blocks (16 tokens by default) and "
    "chains their hashes like git commits: each block's hash includes its parent's. Lookup walks from the "
    "start and stops at the first miss, and only full blocks are ever a hit.",
    "**What it costs in memory.** Bytes per token = 2 (K and V) × layers × KV heads × head_dim × bytes "
    "per value. Llama-2-7B (32 layers, 32 KV heads, head_dim 128, fp16) needs 512 KiB per token; with "
    "grouped-query attention the embedded model needs far less, measured below.",
    "**The rule that follows.** Put stable content first (tools, instructions, documents) and volatile "
    "content last, so the longest possible prefix stays identical between requests.",
]

CARD_HEADER = "The model on this machine"
CARD_INTRO = (
    "Every number marked *measured* comes from this model's own K and V tensors: the byte count is "
    "numel × element size summed over all layers, not a formula."
)

TRY_HEADER = "Measure a prompt"
TRY_INTRO = (
    "Run a real prefill on your own text: kvviz tokenizes it, runs it through all layers, captures "
    "every K and V, and weighs them. Any Unicode works; input over {limit:,} tokens is truncated."
)
TRY_LABEL = "Prompt"
TRY_DEFAULT = (
    "You are a helpful assistant. Answer briefly.\n\nQuestion: why does changing the first word of a "
    "long prompt make the next request slower?"
)
TRY_BUTTON = "Run prefill"
TRY_RUNNING = "Running prefill..."
TRY_TOKENS = "Tokens"
TRY_KV = "KV cache (measured)"
TRY_KV_HELP = "{bytes:,} B = {per_token:,.0f} B per token × {tokens:,} tokens, over {layers} layers."
TRY_TIME = "Prefill time"
TRY_NEXT = "Most likely next token"
TRY_TOKENS_CAPTION = "The tokens the model saw (· is a space, ↵ a newline):"
TRY_SCALE = (
    "At this rate 1,000 tokens take {per_1k} of KV memory, and 100 concurrent requests of 1,000 tokens "
    "take {per_100k}."
)

PAGES_HEADER = "Pages"
PAGES_INTRO = "Each page works on its own; start anywhere."
MS_VALUE = "{ms:,.0f} ms"
