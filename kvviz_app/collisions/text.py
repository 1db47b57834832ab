"""Every string of the hash-collisions page and its figures (kvviz.experiments.security.collisions' demos)."""

COL_TITLE = "Hash collisions: why SHA-256"
COL_INTRO = (
    "A block is found by its hash alone. If two different blocks ever had the same hash, a request would "
    "be served **another prompt's K/V**, and the model would answer from someone else's text. So the hash "
    "must be collision-resistant, and the input it hashes must be unambiguous: vLLM hashes "
    "`(parent_hash, token_ids, extra_keys)` with SHA-256 (32 bytes), by default over the pickled tuple "
    "(`sha256`), or over canonical CBOR (`sha256_cbor`), which other languages and Python versions can "
    "reproduce."
)
PY_HASH = "Python's built-in hash is not a block identity"
PY_HASH_INTRO = (
    "Measured in two fresh Python processes with different `PYTHONHASHSEED` values (this server runs "
    "Python {version}):"
)
PY_COLUMNS = {"expr": "Expression", "run1": "Process 1", "run2": "Process 2", "same": "Same?"}
PY_SEEDS = "Process 1: PYTHONHASHSEED={a}; process 2: PYTHONHASHSEED={b}."
PY_NOTES = {
    "hash(None)": "Address-based before Python 3.12, a fixed constant from 3.12 on: a predictable chain root.",
    "hash((1, 2, 3))": "Tuples of ints are not randomised by PYTHONHASHSEED: token blocks hash the same everywhere.",
    "hash('abc')": "Strings and bytes are randomised per process: not reproducible across servers.",
    "hash(-1) == hash(-2)": "-1 is reserved as an error code in CPython, so -1 hashes to -2: a built-in collision.",
}
PY_HASH_TEXT = (
    "Only 64 bits: among n cached blocks the chance of some collision is about n²/2⁶⁵, and with a "
    "predictable root an attacker can search offline for a prompt that collides with a target. vLLM "
    "used `hash()` until a security advisory (GHSA-rm76-4mrf-v9r8): on Python 3.12 `hash(None)`, the "
    "chain's root, became a constant. The fix first randomised the root, then SHA-256 became the "
    "default (vLLM 0.10.2)."
)
NONE_HASH = "NONE_HASH and the seed"
NONE_HASH_TEXT = (
    "Block 0 has no parent, so it hashes with `NONE_HASH` in its place: `hash_fn(seed)`. The seed is "
    "`PYTHONHASHSEED` when set; otherwise SHA-256 uses the fixed seed `\"vllm-none-hash\"` and the fast "
    "non-cryptographic hashes random bytes. A fixed seed makes hashes reproducible across processes "
    "(servers sharing a K/V tier must agree); a random one makes every hash unpredictable, which matters "
    "while the hash is weak. With SHA-256 the root need not be secret; isolation is the salt's job."
)
NONE_COLUMNS = {"setting": "NONE_HASH from", "root": "NONE_HASH", "block0": "Block 0 hash", "last": "Last block hash"}
NONE_ROWS = {"seed0_a": "seed \"0\", process A", "seed0_b": "seed \"0\", process B",
             "random_a": "random, process A", "random_b": "random, process B"}
NONE_VERDICT = (
    "Same seed: identical hashes ({same}). Random root: every block hash differs ({differ}), so caches of "
    "two processes never match."
)
FORCED = "A forced collision"
FORCED_INTRO = (
    "Real SHA-256 collisions are out of reach (about 2¹²⁸ blocks for even odds). To see what one would "
    "do, the demo keeps only the first **{bits} bits** of SHA-256 over CBOR, then searches for a "
    "different first block for prompt B, changing its last {positions} tokens, until its truncated hash "
    "equals prompt A's."
)
FORCED_BITS = "Toy hash size (bits)"
FORCED_A = "Prompt A (the victim's, cached first)"
FORCED_B = "Prompt B (the attacker's)"
FORCED_RUN = "Search for a collision"
FORCED_FOUND = (
    "Collision after {tries:,} tries in {ms:,.0f} ms (expected about {expected:,}): B's block 0 now has the "
    "toy hash `{toy}` of A's block 0, though their full SHA-256 digests differ."
)
FORCED_NOT_FOUND = "No collision within {tries:,} tries; try fewer bits."
FORCED_SERVED = (
    "The pool keyed by the toy hash serves B **{hit} block(s) of A's K/V** (block ids {ids}). With the full "
    "SHA-256 the same B hits {sha_hit} block(s)."
)
FORCED_PIECES = "Tokens separated by |; · is a space. The forged tokens are whatever ids made the toy hash match."
FORCED_COLUMNS = {"index": "Block", "a": "Prompt A's tokens", "b": "Prompt B's tokens (forged)",
                  "toy_a": "A toy hash", "toy_b": "B toy hash", "sha_a": "A SHA-256", "sha_b": "B SHA-256"}
LEAK = "What the model answers with A's K/V"
LEAK_INTRO = (
    "B is prefilled twice on the real model: correctly, and as the colliding pool serves it (block 0's "
    "K/V taken from A, the rest computed on top). Greedy continuation, {n} tokens:"
)
LEAK_RUNNING = "Prefilling B twice on the model..."
LEAK_CORRECT = "B prefilled correctly"
LEAK_SERVED = "B served A's block"
LEAK_METRICS = "Max |logit difference| {diff:.2f}; next token changed: {changed}."
COSTS = "The price of each hash, measured here"
COSTS_INTRO = (
    "Hashing {blocks:,} blocks of {block_size} tokens through the chain, best of {repeats} runs. CBOR "
    "encoding alone is shown to separate its cost from the digest's."
)
COST_COLUMNS = {"name": "Hash", "digest": "Digest (bytes)", "ns_block": "ns per block", "ns_token": "ns per token",
                "ms_50k": "ms per 50k tokens", "birthday": "Blocks for a 50% collision chance", "safe": "Safe as an identity?"}
COSTS_AGAIN = "Measure again"
COST_TITLE = "Cost per block (measured)"
BIRTHDAY_TITLE = "Chance of any collision among n cached blocks"
BIRTHDAY_NOTE = "Computed (birthday bound 1 - exp(-n²/2^(b+1))), not measured."
SAFE = {"sha256": "yes (vLLM's default)", "sha256_cbor": "yes", "xxhash": "fast; not for untrusted tenants",
        "xxhash_cbor": "fast; not for untrusted tenants", "python_hash": "no", "cbor_only": "encoding only"}

# ----------------------------------------------------------------------------- figures (kvviz_app.security.figures)
FIG_NS = "{ns:,.0f} ns"
FIG_COST_HOVER = "%{y}: %{x:,.0f} ns per block<extra></extra>"
FIG_COST_AXIS = "ns per block (measured)"
FIG_BITS = "{bits}-bit"
FIG_BIRTHDAY_HOVER = "{bits}-bit: %{{x:.3g}} blocks, P = %{{y:.3g}}<extra></extra>"
FIG_BLOCKS_N = "cached blocks n"
FIG_P_COLLISION = "P(any collision)"
