"""Every string of the "Edit one character" page and its figures."""

from __future__ import annotations

from kvviz.util.plural import Plural

TITLE = "Edit one character"
INTRO = (
    "A prompt cache does not keep text: it keeps the **K and V tensors** of every token at every layer, in "
    "blocks of tokens. Each block is found by a **chained hash**: the hash of its own tokens *and* of its "
    "parent block's hash, so a block's identity carries the whole prefix before it. Change one character "
    "and the block holding it gets a new hash; that hash is the next block's parent, and so on to the "
    "end. Everything before the edit is reused; everything after it is computed again. Below, the real "
    "model (SmolLM2-135M) shows both: the engine's block chains, and the tensors that prove why."
)

# --- 1. the two prompts ----------------------------------------------------------------------------
STEP_INPUT = "1 · Two prompts: the original (A) and its edit (B)"
MODE_LABEL = "How to edit"
MODE_PRESET = "Preset"
MODE_CHAR = "Change one character"
MODE_FREE = "Free text"
MODE_HELP = (
    "Preset: ready-made pairs. Change one character: pick a position (slider, or click a token of A in "
    "the token view below) and a replacement. Free text: type both prompts."
)
PRESET_LABEL = "Preset"
CHAR_BASE_LABEL = "Original prompt (A)"
CHAR_POS_LABEL = "Position of the character to change"
CHAR_POS_HELP = "Character index in A, counted from 0. Clicking a token of A in the token view jumps here."
CHAR_REPL_LABEL = "Replace it with"
CHAR_REPL_HELP = "One character (any script, emoji, or a space). Leave empty to delete the character."
CHAR_AT = "Character {pos} of {total}: {desc}. Context: …{before}⟦{char}⟧{after}…"
CHAR_AT_END = "The position is at the end of the text: the replacement is appended."
CHAR_NOOP = "The replacement equals the current character, so A and B are the same prompt."
FREE_A_LABEL = "Original prompt (A)"
FREE_B_LABEL = "Edited prompt (B)"
SHOW_PROMPTS = "Show both prompts in full"
PROMPT_A_CAPTION = "Original (A)"
PROMPT_B_CAPTION = "Edited (B)"

SETTINGS_HEADER = "Engine settings"
BLOCK_SIZE_LABEL = "Block size (tokens)"
BLOCK_SIZE_HELP = (
    "Tokens per KV block. vLLM's default is 16. Only whole blocks are cached and matched, so a bigger "
    "block reuses less of a prompt whose change lies in the middle of a block."
)
HASH_LABEL = "Block hash function"
HASH_HELP = (
    "sha256 (SHA-256 over pickle) is vLLM's default; sha256_cbor is reproducible outside Python; xxhash "
    "and xxhash_cbor are its fast, non-cryptographic options; python_hash is Python's built-in hash, for "
    "comparison only."
)
HASH_UNSAFE = (
    "python_hash is unsafe for a shared cache: it is 64-bit (collisions become practical) and salted per "
    "process, so its hashes differ between processes unless PYTHONHASHSEED is fixed."
)
SEED_LABEL = "Hash seed (NONE_HASH)"
SEED_HELP = (
    "The first block's parent is NONE_HASH = hash(seed), as vLLM derives it from PYTHONHASHSEED. Empty = "
    "PYTHONHASHSEED unset: vLLM then uses \"vllm-none-hash\" for sha256/sha256_cbor and a random seed per "
    "process for xxhash/xxhash_cbor. A different seed changes every hash, but not which blocks match."
)
SETTINGS_NOTE = (
    "The hash function and seed change the hashes you see, not what matches: matching compares whole "
    "token prefixes. kvviz's engine runs A and B with this block size, algorithm and seed (the "
    "process-wide engine when they are its own, else an engine started for them)."
)

# --- input problems ---------------------------------------------------------------------------------
EMPTY_A = "Prompt A is empty. Type or paste some text (or pick a preset) to start."
EMPTY_B = "Prompt B is empty. Type the edited prompt (or pick a preset)."
INPUT_ERROR = "Cannot run the experiment: {error}"
IDENTICAL_REUSE = (
    "A and B are the same token sequence ({n:,} tokens). An engine reuses the {reused:,} tokens of its full "
    "blocks before the last token and recomputes the other {recompute:,}: the last token, whose logits it "
    "needs, and the rest of its block, since only whole blocks of {block_size} tokens are cached."
)
IDENTICAL_SHORT = (
    "A and B are the same token sequence, but {n:,} tokens do not make one full block of {block_size} "
    "tokens before the last token: an engine caches only whole blocks, so nothing is reused and all "
    "{n:,} tokens are recomputed. A smaller block size shows the reuse."
)
EDIT_BEYOND_LIMIT = (
    "The edit is at character {pos:,}, beyond the {limit:,}-token limit: only the first {kept:,} characters "
    "fit in {limit:,} tokens, so both prompts were cut before the edit and the model sees the same tokens. "
    "Move the edit before character {kept:,} (or shorten the text) to see its effect."
)
IDENTICAL_TEXT_ONLY = (
    "The texts differ ({desc}), but they tokenize to exactly the same tokens, so the cache cannot tell "
    "them apart."
)
NOTHING_COMMON = "A and B differ from their very first token: nothing can be reused, every block is computed."
TRUNCATED = "{notice} Both prompts are compared after this cut."
CONTROL_CHARS = "The prompts contain control or invisible characters ({names}); they are tokens like any other."
TOKEN_SPAN = "t{lo}–t{hi}"
TOKEN_ONE = "t{i}"
TOKEN_NONE = "none"
MS_VALUE = "{ms:,.1f} ms"
KL_VALUE = "{kl:.3g} nats"
BLOCK_REF = "#{i}"
LIST_SEPARATOR = ", "
LIST_MORE = " …"

# --- 2. what changed --------------------------------------------------------------------------------
STEP_CHANGE = "2 · What the edit did to the tokens"
CHANGE_CHAR_ONE = "One character changed at position {pos}: {removed} → {added}."
CHANGE_CHAR_INSERT = Plural("{count} character inserted at position {pos}: {added}.",
                            "{count} characters inserted at position {pos}: {added}.", count="count")
CHANGE_CHAR_DELETE = Plural("{count} character deleted at position {pos}: {removed}.",
                            "{count} characters deleted at position {pos}: {removed}.", count="count")
CHANGE_CHAR_MANY = "Characters {start}–{end} of A changed ({removed_count} removed, {added_count} added)."
CHANGE_TOKENS = (
    "In tokens: A's tokens {a_span} became B's tokens {b_span} (first changed token: {first})."
)
CHANGE_MULTI = (
    "**One character changed {count} tokens**: the tokenizer merges characters into tokens, so a single "
    "edit can re-split its neighbours."
)
CHANGE_SHIFT = Plural(
    "**Every later token moved by {shift:+d} position** ({moved} tokens). Their K/V depend on their "
    "position, so even identical later tokens can never be reused.",
    "**Every later token moved by {shift:+d} positions** ({moved} tokens). Their K/V depend on their "
    "position, so even identical later tokens can never be reused.",
    count="shift",
)
CHANGE_NO_SHIFT = (
    "The token count did not change, so every token after the edit keeps its position and its id: "
    "those blocks have the same tokens as before, and still cannot be reused."
)
CYRILLIC_NOTE = (
    "This model's tokenizer spends {ru:.2f} tokens per Cyrillic letter: prompt A has {tokens:,} tokens for "
    "{letters:,} letters, while an English sentence costs {en:.2f} tokens per letter ({en_tokens:,} tokens "
    "for {en_letters:,} letters), both measured now. Its vocabulary has few Russian pieces, so most letters "
    "are a token each and some are split into byte tokens (⟨D0⟩→П: the first byte of «П», completed by the "
    "next token). Every token has its own K and V: per letter of text, Russian needs about {ratio:.1f}× the "
    "KV cache of English on this model."
)
BYTE_TOKEN_NOTE = (
    " (byte {byte}: the first of the {n} bytes of one character{script}; the model predicts only the "
    "start of a letter, the next token completes it)"
)
BYTE_TOKEN_CYRILLIC = ", as every Russian letter starts with D0 or D1"
TOKENS_CAPTION = (
    "Rows of {width} tokens, A's row above B's row for the same positions; thick lines are block "
    "boundaries (every {block_size} tokens). Colours on B are the block's status; magenta marks the "
    "changed tokens. Hover a token for its id; click a token of A to edit it."
)
TOKENS_ROWS = "Rows shown (of {total})"
TOKENS_ROWS_SHOWN = Plural(
    "Rows {lo}–{hi} of {total} are shown (tokens {first:,}–{last:,}); {hidden} row is hidden: move the slider to see it.",
    "Rows {lo}–{hi} of {total} are shown (tokens {first:,}–{last:,}); {hidden} rows are hidden: move the slider to see them.",
    count="hidden")

# --- 3. what the engine reuses ----------------------------------------------------------------------
STEP_REUSE = "3 · What the engine can reuse, measured"
# A character in sentences about an edit: the character and its code point, then what it is (a letter of
# a script, a digit, ...); an invisible one by its Unicode name, the standard's identifier.
CHAR_LETTER = "{char} U+{code}, {case} {script} letter"
CHAR_OTHER = "{char} U+{code}, {kind}"
CHAR_INVISIBLE = "U+{code}, invisible: {name}"
CHAR_NOTHING = "nothing"
CHAR_SCRIPTS = {"CYRILLIC": "Cyrillic", "LATIN": "Latin", "GREEK": "Greek"}
CHAR_CASES = {"SMALL": "small", "CAPITAL": "capital"}
CHAR_KINDS = {"L": "letter", "N": "digit", "P": "punctuation", "S": "symbol", "M": "combining mark",
              "Z": "space", "C": "control character"}
M_COMMON = "Common prefix"
M_COMMON_HELP = "Leading tokens that are identical in A and B."
M_REUSED = "Reused"
M_REUSED_HELP = (
    "Whole cached blocks before the first changed block, at most num_tokens - 1: the engine always "
    "recomputes the last prompt token to get a query for the next-token logits."
)
M_RECOMPUTE = "To recompute"
M_RECOMPUTE_HELP = "Tokens of B that go through the model: the changed block and everything after it."
M_SAVED = "Tokens not recomputed"
M_SAVED_HELP = (
    "Tokens the engine reused / B's tokens. The milliseconds below are measured on the engine: the median "
    "compute of B recomputed in full minus the median compute of B on its reused prefix, each timed "
    "several times; shown only when the two sets of timings do not overlap."
)
M_SAVED_VALUE = "{pct:.0f}%"
M_SAVED_MS = "{ms:,.0f} ms saved"
TOKENS_UNIT = "{n:,} tokens"
M_REUSE_MS = "Measured: B on its reused blocks"
M_REUSE_MS_HELP = (
    "Median compute of the engine request for B when the blocks it shares with A are cached: the engine "
    "computes only the other tokens (first scheduled step to first token; queue waiting not counted)."
)
M_FULL_MS = "Measured: B recomputed in full"
M_FULL_MS_HELP = (
    "Median compute of the engine request for B under a fresh cache salt, so nothing is cached and every "
    "token is computed (first scheduled step to first token; queue waiting not counted)."
)
M_SPEEDUP = "{x:.1f}× faster"
M_WITHIN_NOISE = "within the noise"
MS_MEDIAN = "{ms:,.1f} ms"
TIMING_NOTE = (
    "Medians of {runs} engine requests each, alternating the two; spread (slowest − fastest): full "
    "{full_spread:,.1f} ms, on the reused blocks {reuse_spread:,.1f} ms. Compute only: the requests also "
    "waited {wait:,.1f} ms (median) in the engine's queue, not counted."
)
TIMING_NOISE = (
    "Too short to measure a difference on this machine: the timings of B recomputed in full and of B on "
    "its reused blocks overlap (medians {full:,.1f} ms and {reuse:,.1f} ms over {runs} runs each). "
    "Longer prompts, or an edit nearer their end, show the saving."
)
TIMING_RUNNING = "Timing B on the engine: recomputed in full, and on its reused blocks, several times each…"
# Compute times are given once, by the measured medians (M_REUSE_MS, M_FULL_MS): the note gives counts only
# (A's single first run, seconds on a cold or busy engine, read as a contradiction of B's medians).
ENGINE_NOTE = (
    "On kvviz's engine: A ran first ({a_state}); then B reused {reused:,} token(s), its block table "
    "starting with A's physical blocks {shared}, and computed the other {computed:,} token(s): their time "
    "is “{measured}” above."
)
A_STATE_CACHED = "all but its last {tokens:,} token(s) already cached"
A_STATE_COMPUTED = "computed now"
ENGINE_SHARED_NONE = "(none)"
ENGINE_SHORT = (
    "The engine reused {engine:,} tokens where the chains allow {chain:,}: some of A's blocks were evicted "
    "before B ran (the engine needed their memory for other requests)."
)

# --- 4. the chains ---------------------------------------------------------------------------------
STEP_CHAIN = "4 · The two block chains, and the cascade"
CHAIN_INTRO = (
    "Each block's hash = hash(parent hash, its own tokens). Left: A's chain, as the cache holds it. Right: "
    "B's chain, looked up block by block. Press **Play** (or drag the slider) to walk the cascade from the "
    "first changed block to the end."
)
CHAIN_TABLE = "Every block of B, with the reason for its status"
COL_BLOCK = "Block"
COL_SPAN = "Tokens"
COL_HASH_A = "A's hash"
COL_HASH_B = "B's hash"
COL_PARENT_B = "B's parent"
COL_STATUS = "Status"
COL_REUSED = "Reused"
COL_REASON = "Why"
STATUS_LABELS = {
    "hit": "hit",
    "miss": "miss",
    "invalidated": "invalidated",
    "partial": "partial",
}
STATUS_MEANING = {
    "hit": "hit: same chained hash as A's block, K/V reused",
    "miss": "miss: its own tokens changed (or A has no such block)",
    "invalidated": "invalidated: same tokens, but the parent hash changed",
    "partial": "partial: not a full block, never cached",
}

# --- 5. the proof ----------------------------------------------------------------------------------
STEP_PROOF = "5 · The proof, on the real model's K/V tensors"
PROOF_INTRO = (
    "Both prompts were prefilled in full and every layer's K and V captured. The map shows, per layer and "
    "token position, the largest difference between A's and B's tensors (over all KV heads and "
    "dimensions). Grey cells are **exactly zero**."
)
EDIT_RUNNING = "Sending A, then B, through kvviz's engine on the real model…"
PROOF_RUNNING = "Running the full prefills of the K/V maps and the wrong-reuse experiment on the real model…"
KV_LABEL = "Tensor"
KV_K = "K (keys)"
KV_V = "V (values)"
FACT_PREFIX = (
    "**Before the first changed token ({first}), every layer is identical (max |Δ| = {value})**: under "
    "causal attention a token's K/V depend only on the tokens before it, and those are the same."
)
FACT_PREFIX_NONE = "The prompts differ from token 0, so there is no shared prefix to check."
FACT_PREFIX_BROKEN = (
    "Positions before the first changed token differ by up to {value}: unexpected; this should be exactly 0."
)
FACT_LAYER0 = (
    "**After the edit, layer 0 is unchanged for the {count} tokens that kept their id and position (max "
    "|Δ| = {layer0}) while deeper layers differ (up to {deep})**: layer-0 K/V come from the token and its "
    "position alone; from layer 1 on, attention has mixed the changed token into every later one."
)
FACT_LAYER0_NONE = (
    "No token after the edit kept both its id and its position (the edit shifted them, or it is at the "
    "end), so the layer-0 fact has nothing to show here: try an edit that keeps the token count."
)
PROOF_PAD_NOTE = (
    "To compare bit for bit, A was run over exactly B's length (cut or padded at the end, which causal "
    "attention never lets reach earlier positions): both prompts go through identical tensor shapes, so "
    "floating-point rounding is identical and any difference comes from the tokens alone."
)
REUSE_EXACT_HEADER = "Reuse is exact"
REUSE_EXACT = (
    "On the engine, B computed on the {reused:,} reused tokens' blocks gives next-token logits within "
    "**{diff}** of B recomputed in full: float noise. Both predict {token}."
)
REUSE_IDENTICAL = (
    "On the engine, B computed on the {reused:,} reused tokens' blocks gives **bit-identical** next-token "
    "logits to B recomputed in full (max difference 0). Both predict {token}."
)
REUSE_EXACT_NONE = (
    "Nothing was reused (the first block changed), so the engine computed B in full: against the model's "
    "plain full prefill its logits differ by {diff}."
)
WRONG_HEADER = "Reuse the invalidated blocks anyway?"
WRONG_INTRO = (
    "An engine that keyed blocks by their own tokens only would reuse A's K/V for B's invalidated blocks "
    "({blocks}): same tokens, but computed after a different prefix. kvviz did exactly that and "
    "continued B from them:"
)
M_WRONG_DIFF = "Logit divergence"
M_WRONG_DIFF_HELP = "max |logits(wrong reuse) - logits(full prefill of B)| over the vocabulary."
M_WRONG_KL = "KL divergence"
M_WRONG_KL_HELP = "KL(correct || wrong) of the next-token distributions, in nats."
M_WRONG_NEXT = "Next token"
M_WRONG_NEXT_CHANGED = "changed"
M_WRONG_NEXT_SAME = "unchanged"
WRONG_NEXT_CHANGED = (
    "The wrong reuse predicts {wrong} instead of {correct}: K/V computed after A's prefix changed B's answer."
)
WRONG_NEXT_SAME = (
    "The top token survived ({correct}), but its probability moved from {p_ok:.1%} to {p_wrong:.1%}: the "
    "distribution is not B's. Exact means identical; this is not."
)
WRONG_CONCLUSION = (
    "Correct reuse differs from a full prefill by {exact}; wrong reuse by {wrong}. That gap is why the "
    "chain must break at the first changed block."
)
WRONG_NONE = (
    "B has no invalidated block (no later block has the same tokens at the same position as in A), so "
    "there is nothing to reuse wrongly. Presets «Кот сидит на окне» and «на зелёном» have some."
)

# --- the engine ------------------------------------------------------------------------------------
ENGINE_HEADER = "The engine that ran A and B"
ENGINE_INTRO = (
    "kvviz's serving engine holds every block's K and V in one paged memory; a prefix hit is a block table "
    "pointing at blocks another request filled. The Edit page's requests carry a cache salt of their own, "
    "so blocks cached by other pages never count as B's reuse (the chains above are drawn without it)."
)
ENGINE_SHARED = "The process-wide engine (the one every page and the API use), block size {block_size}."
ENGINE_OWN = (
    "An engine started for block size {block_size} and hash {hash} over the same model: an engine's block "
    "size and hash are fixed when it starts (vLLM's --block-size)."
)
ENGINE_BLOCKS = "Blocks"
ENGINE_BYTES = "K/V memory"
ENGINE_USAGE = "In use now"
ENGINE_HIT_RATE = "Prefix-cache hits"
ENGINE_HIT_VALUE = "{hits:,} of {queries:,} tokens"

# --- figures ---------------------------------------------------------------------------------------
FIG_TOKENS_A = "A (original)"
FIG_TOKENS_B = "B (edited)"
FIG_TOKEN_HOVER = "{side} · token {pos} · block {block}<br>{piece}<br>id {id}"
FIG_BYTE_HOVER = "byte {bytes}: the start of «{char}» (UTF-8 {utf8}); the next token completes it"
FIG_CHANGED = "changed token"
FIG_A_TOKEN = "A's tokens (cached)"
FIG_CHAIN_A = "A's chain (cached)"
FIG_CHAIN_B_SHORT = "B's chain (looked up)"
FIG_CHAIN_B_KEY = "Right, B's chain: each block as hash ← parent · status; red where it differs from A."
FIG_BLOCK_LABEL = "#{index} · {start}–{end} · {hash}"
FIG_BLOCK_PARTIAL = "#{index} · {start}–{end} · partial"
FIG_PARENT = "{parent}"
FIG_HOVER_A = "A · block {index}<br>hash {hash}<br>parent {parent}"
FIG_HOVER_B = "B · block {index}: {meaning}<br>{reason}"
FIG_BLOCK_LABEL_B = "#{index} · {hash} ← {parent} · {status}"  # the token span is on A's side
FIG_NO_HASH = "no hash"
FIG_CASCADE_SUMMARY = (
    "{hits} block(s) hit, then from block #{first}: {miss} miss, {invalidated} invalidated, {partial} partial. "
    "▶ Play walks the lookup."
)
FIG_GAP = Plural("… {count} more block: {summary} …", "… {count} more blocks: {summary} …", count="count")
FIG_NOT_CHECKED = "not checked yet"
FIG_CASCADE_START = "Blocks before #{first} are hits. Press Play: the lookup walks B's chain from block #{first}."
FIG_CASCADE_NONE = "A and B have the same full blocks: every block is a hit (except the recomputed last token)."
FIG_STEP = "Step {step}: block #{index}"
FIG_STEP_MISS = "Block #{index}: its own tokens changed → new hash {hash} → miss."
FIG_STEP_INVALIDATED = (
    "Block #{index}: same tokens as A's, but parent {parent} ≠ A's {parent_a} → new hash {hash} → invalidated."
)
FIG_STEP_PARTIAL = Plural("Block #{index}: only {count} token, a partial block is never cached.",
                          "Block #{index}: only {count} tokens, a partial block is never cached.", count="count")
FIG_STEP_HIT = "Block #{index}: same hash as A's → hit."
FIG_PLAY = "▶ Play"
FIG_PAUSE = "❚❚ Pause"
FIG_SLIDER = "Step: "
FIG_SLIDER_START = "start"  # the slider's first step: the state before the lookup walks
FIG_HEAT_TITLE = "max |Δ{which}| between A and B, per layer and position"
FIG_HEAT_X = "token position"
FIG_HEAT_Y = "layer"
FIG_HEAT_ZERO = "exactly 0"
FIG_HEAT_SCALE = "log10 max |Δ|"
FIG_HEAT_HOVER = "layer %{y}<br>position %{x}<br>max |Δ| = %{customdata:.3g}<extra></extra>"
FIG_HEAT_ZERO_HOVER = "layer %{y}<br>position %{x}<br>identical (0)<extra></extra>"
FIG_FIRST_CHANGE = "first changed token"
FIG_LAYER0 = "layer 0"
