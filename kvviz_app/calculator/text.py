"""Every string of the KV-bytes calculator page and its figures, plus the LaTeX formula builders."""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvviz_app.shell.i18n.texts import Texts

TITLE = "KV-bytes calculator"
INTRO = (
    "How many bytes of K and V one token costs, for any architecture: MHA, GQA, MQA, MLA, "
    "sliding-window and hybrid models. Pick a preset, type the numbers, or paste a config.json."
)

# --- model input -------------------------------------------------------------------------------
INPUT_LABEL = "Model"
MODE_PRESET = "Preset"
MODE_TYPED = "Type numbers"
MODE_CONFIG = "config.json"
PRESET_LABEL = "Preset"
SOURCE = "Source: {source}"
TYPED_LAYERS = "Layers"
TYPED_HEADS = "Query heads"
TYPED_KV_HEADS = "KV heads"
TYPED_HEAD_DIM = "head_dim"
TYPED_D_MODEL = "d_model (0 = heads x head_dim)"
TYPED_SLIDING = "Sliding window on every layer"
TYPED_WINDOW = "Window (tokens)"
TYPED_MLA = "MLA (latent cache)"
TYPED_RANK = "kv_lora_rank"
TYPED_ROPE = "qk_rope_head_dim"
TYPED_NAME = "Your model"
UPLOAD_LABEL = "Upload a config.json"
PASTE_LABEL = "...or paste its contents"
PASTE_PLACEHOLDER = '{"model_type": "llama", "num_hidden_layers": 32, ...}'
PASTED_NAME = "the pasted config"  # names the pasted text in error messages
EXAMPLE_LABEL = "...or load an example config"
EXAMPLE_NONE = "(choose an example)"
CONFIG_EMPTY = "Upload or paste a config.json, or load one of the examples."
CONFIG_ERROR = "Cannot use this config: {error}"
UPLOAD_WINS = "Using the uploaded file {name}; clear it to use the pasted text."
INPUT_ERROR = "These numbers do not describe a model: {error}"
TYPED_OUT_OF_RANGE = (
    "{field}: {value} is out of range; type a whole number from {low} to {high}. "
    "Nothing below is computed until then."
)
CONFIG_READ = "Read as **{family}** (model_type `{model_type}`)."
CONFIG_NOTES = "What kvviz read from the config"
CONFIG_DTYPE = "The config declares {dtype} weights; the KV cache normally uses the same dtype."

# --- controls ----------------------------------------------------------------------------------
DTYPE_LABEL = "KV dtype"
DTYPE_HELP = "fp32 4 B, fp16/bf16 2 B, fp8/int8 1 B, int4 0.5 B per value"
CONTEXT_LABEL = "Context length (tokens per request)"
BATCH_LABEL = "Concurrent requests"

# --- results -----------------------------------------------------------------------------------
RESULT_TITLE = "Bytes per token"
M_PER_TOKEN = "KV per token"
M_PER_REQUEST = "One request ({tokens:,} tokens)"
M_TOTAL = "{batch:,} requests"
M_ATTENTION = "Attention"
M_EXACT = "{exact}"
ATTENTION_DETAIL = {
    "MHA": "every query head has its own K and V",
    "GQA": "{group} query heads share each KV head",
    "MQA": "all {heads} query heads share one KV head",
    "MLA": "one compressed latent per layer",
}
FORMULA_CAPTION = "The formula with this model's numbers (updates as you change the inputs)."
TOTAL_CAPTION = "Memory for {batch:,} requests of {tokens:,} tokens each."
ROUNDING = (
    "Exact bytes are shown beside binary units (1 KiB = 1,024 B, 1 MiB = 1,024 KiB, 1 GiB = 1,024 MiB); "
    "≈ marks a value rounded to 2 decimals. int4 can give half bytes per token; totals round up to whole bytes."
)
HYBRID_TITLE = "Two figures for this model"
HYBRID_BODY = (
    "**All layers counted:** {all_layers} per token ({all_exact}), the formula applied to all "
    "{layers} layers as the articles do.  \n"
    "**Config-exact:** {exact} per token ({exact_exact}): only the {kv_layers} layers that keep "
    "per-token K/V count; {state} layers ({state_kind}) keep a fixed-size state per request instead, "
    "which does not grow with the context."
)
ARTICLE_FIGURE = "**The articles' figure:** {figure} ({exact}). {note}"
SLIDING_NOTE = (
    "{sliding} of {layers} layers use a sliding window of {window:,} tokens: they add K/V per token only "
    "until the window is full. At {tokens:,} tokens one request holds **{request}** instead of the "
    "{unbounded} that full attention on every layer would need."
)
SLIDING_NOT_FULL = (
    "{sliding} of {layers} layers use a sliding window of {window:,} tokens: they add K/V per token only "
    "until the window is full. At {tokens:,} tokens the window is not full yet, so every layer still holds "
    "every token; beyond {window:,} tokens those layers stop growing."
)
STATE_KIND = "linear attention / Gated DeltaNet / Mamba"
NAIVE_TITLE = "Naive vs exact"
NAIVE_SAME = "Here the short form 2 x n_layers x d_model x bytes gives the same {naive}: this is MHA with d_model = heads x head_dim."
NAIVE_BODY = (
    "The short form 2 x n_layers x d_model x bytes gives **{naive}** ({naive_exact}), "
    "**{factor}x** the config-exact {exact}. It assumes one K and V per query head "
    "(d_model = heads x head_dim); {reason}"
)
NAIVE_REASON = {
    "MHA": "here d_model ({d_model:,}) differs from heads x head_dim ({hd:,}).",
    "GQA": "with GQA only {kv} KV heads are stored, not {heads}.",
    "MQA": "with MQA a single KV head is stored, not {heads}.",
    "MLA": "MLA stores one {values}-value latent per layer instead.",
}
NAIVE_STATE = " It also counts the {state} layers that keep no per-token KV."
WARNING = "Warning: {warning}"

# --- head sharing and layers -------------------------------------------------------------------
SHARING_TITLE = "Who reads which K and V"
SHARING_CAPTION = (
    "Each query head attends with the K and V of one KV head; only the KV heads are cached. "
    "Fewer KV heads means fewer bytes per token, whatever the number of query heads."
)
SHARING_MLA = (
    "MLA caches one latent vector per layer per token ({rank} + {rope} values); every query head "
    "up-projects it to its own K and V at attention time, so the cache does not grow with the heads."
)
LAYERS_CAPTION = "Per-layer kinds: blue layers keep K/V of every token, teal ones only a window, grey ones a fixed-size state."

# --- comparison --------------------------------------------------------------------------------
COMPARE_TITLE = "Across models"
COMPARE_CAPTION = (
    "Config-exact bytes per token at {dtype}; a black tick marks the all-layers figure where a model "
    "is hybrid. Orange: your model. The size follows the architecture, not the parameter count."
)

# --- memory and budgets ------------------------------------------------------------------------
MEMORY_TITLE = "Memory against GPU budgets"
MEMORY_CAPTION = "KV cache only: the weights and activations need their own share of the same memory."
BUDGET_COL = "Budget"
NEEDED_COL = "KV needed"
SHARE_COL = "Share of budget"
FITS_COL = "Fits"
MAXREQ_COL = "Max requests"
MEMORY_TABLE_CAPTION = (
    "Max requests: how many requests of {tokens:,} tokens fit each budget in {block}-token blocks, beside the "
    "null block (block 0, which vLLM never fills). Fits: all of them fit that way."
)
YES = "yes"
NO = "no"

# --- capacity and paging -----------------------------------------------------------------------
CAPACITY_TITLE = "Capacity and paging"
BUDGET_LABEL = "Budget for the KV cache"
BUDGET_CUSTOM = "custom"
BUDGET_OPTION = "{gib} GiB"
BUDGET_CUSTOM_LABEL = "Custom budget (GiB)"
BLOCK_LABEL = "Block size (tokens per block; vLLM's default is 16)"
RESERVE_LABEL = "Contiguous reservation per request (x context)"
RESERVE_OPTION = "{:g}x"
C_MAX_TOKENS = "Max tokens"
C_MAX_TOKENS_HELP = (
    "Token slots in the budget less the null block (block 0, which vLLM never fills): "
    "(budget - one block) / bytes per token, if every KV layer holds every token."
)
C_MAX_REQUESTS = "Max requests"
C_MAX_REQUESTS_NOTE = "of {tokens:,} tokens each"
C_MAX_CONTEXT = "Longest request"
C_UNBOUNDED = "unbounded"
C_UNBOUNDED_HELP = "No layer keeps every token, so one request's KV stops growing and fits."
C_MAX_CONTEXT_HELP = "The longest single request whose KV fits the budget in whole blocks, beside the null block."
C_BLOCKS_HELP = "ceil(context / block size) blocks per full-attention layer."
C_BLOCKS = "Blocks / request"
C_BLOCK_BYTES = "Bytes / block"
C_BLOCK_BYTES_HELP = "block_size x bytes per token, across every KV layer."
PAGING_BODY = (
    "Reserving {max_len:,} tokens per request up front uses **{contig:.1f}%** of the reserved memory "
    "for real tokens; paging in {block}-token blocks uses **{paged:.1f}%** (waste is at most one "
    "partly filled block per request and layer: {bound} here). The PagedAttention paper measured "
    "that earlier systems used only **20.4-38.2%** of their KV memory for tokens."
)
NO_KV = "This model keeps no per-token KV: capacity does not depend on the context."

# --- articles ----------------------------------------------------------------------------------
ARTICLES_TITLE = "The articles' figures, reproduced"
ARTICLE_CHECK = "- {mark} **{claim}**: kvviz computes {exact} ({human}); {note}."
ARTICLE_EXACT = "✅"
ARTICLE_CLOSE = "≈"
# kvviz.analysis.sizes.presets.article_checks, by code: what the articles say, and kvviz's note on it. In a note,
# {bytes} is exact bytes, {human} the same in binary units, {gb} decimal gigabytes.
ARTICLE_CLAIMS = {
    "llama_per_token": "Llama-2-7B: 2 x 32 x 32 x 128 x 2 = 524,288 B = 512 KiB per token",
    "llama_1k": "Llama-2-7B: 1,000 tokens ~ 500 MiB",
    "llama_100x1k": "Llama-2-7B: 100 requests x 1,000 tokens ~ 50 GiB",
    "qwen27_per_token": "Qwen3.6-27B: 64 layers x 4 KV heads x head_dim 256 = 256 KiB per token",
    "qwen35_per_token": "Qwen3.6-35B-A3B: 40 layers x 2 KV heads x head_dim 256 = 80 KiB per token",
}
ARTICLE_NOTES = {
    "llama_per_token": "exact",
    "llama_1k": "exact: 1,000 x 512 KiB = 512,000 KiB = 524,288,000 B = 500 MiB",
    "llama_100x1k": "the exact total is {bytes:,} B, {human} ({gb:.1f} GB in decimal units); the articles round it "
                    "to 50",
    "qwen27_per_token": "exact when every layer is counted; config-exact ({full_layers} full-attention layers) "
                        "{bytes:,} B = {human}",
    "qwen35_per_token": "exact when every layer is counted; config-exact ({full_layers} full-attention layers) "
                        "{bytes:,} B = {human}",
}

# --- embedded model ----------------------------------------------------------------------------
MODEL_TITLE = "Check against the real model"
MODEL_CAPTION = (
    "Runs the embedded SmolLM2-135M-Instruct on your text, adds up the bytes of every captured K and "
    "V tensor, and divides by the token count. The calculator's figure must match exactly."
)
MODEL_TEXT_LABEL = "Text to prefill"
MODEL_DEFAULT_TEXT = "The cat sits on the window and watches the rain."
MODEL_BUTTON = "Run the embedded model"
MODEL_LOADING = "Loading the model and running prefill..."
MODEL_ERROR = "The model could not run: {error}"
MODEL_EMPTY = "Type some text to prefill."
MODEL_MEASURED = "Measured KV bytes"
MODEL_TOKENS = "Tokens"
MODEL_MEASURED_PER_TOKEN = "Measured / tokens"
MODEL_CALC_PER_TOKEN = "Calculator"
MODEL_MATCH = "Exact match: {measured} / {tokens:,} tokens = {per} per token = the formula's {calc} ({dtype} on {device})."
MODEL_MISMATCH = "Mismatch: measured {per} per token, the formula says {calc}."
MODEL_SHAPE = "Model as loaded: {layers} layers, {heads} query heads, {kv} KV heads, head_dim {hd}, {dtype}."

# --- figures -----------------------------------------------------------------------------------
KIND_NAMES = {
    "full_attention": "full attention",
    "sliding_attention": "sliding window",
    "linear_attention": "fixed-size state",
}
FIG_LATENT = "latent ({rank} + {rope})"
FIG_HOVER_QUERY = "query head Q{i} reads {kv}"
FIG_QUERY_ROW = "query heads<br>(not cached)"
FIG_KV_ROW = "KV heads<br>(cached per token)"
FIG_LATENT_ROW = "latent<br>(cached per token)"
FIG_HEADS_CAPPED = "first {drawn} of {heads} query heads drawn"
FIG_TITLE_MHA = "MHA: {heads} query heads, {heads} KV heads (one each)"
FIG_TITLE_GQA = "GQA: {heads} query heads share {kv} KV heads ({group} per KV head)"
FIG_TITLE_MQA = "MQA: {heads} query heads share one KV head"
FIG_TITLE_MLA = "MLA: {heads} query heads read one latent of {values} values"
FIG_LAYER_FULL = "full attention, {per} per token"
FIG_LAYER_SLIDING = "sliding window ({window:,} tokens), {per} per token"
FIG_LAYER_STATE = "no per-token KV (fixed-size state)"
FIG_LAYER_AXIS = "layer"
FIG_LAYER_HOVER = "layer {i}: {kind}"
FIG_LAYERS_TITLE = "Layers"
FIG_BAR_EXACT = "config-exact"
FIG_BAR_CHOSEN = "selected model"
FIG_BAR_ALL_LAYERS = "all layers counted"
FIG_BAR_AXIS = "KiB per token ({dtype})"
FIG_BAR_TITLE = "KV bytes per token ({dtype})"
FIG_BAR_HOVER = "{label}: {exact} per token"
FIG_BAR_ALL_HOVER = "{label}: {exact} if every layer cached K/V"
FIG_NAIVE_AXIS = "KiB per token"
FIG_MEM_HOVER = "%{x} requests: %{y:.2f} GiB<extra></extra>"
FIG_MEM_HERE_HOVER = "{batch} x {tokens:,} tokens: {bytes}"
FIG_GIB = "{value} GiB"
UNIT_GIB = "GiB"
UNIT_MIB = "MiB"
FIG_NAIVE = "2 x L x d_model x b"
FIG_ALL_LAYERS = "all layers"
FIG_EXACT = "config-exact"
FIG_NAIVE_TITLE = "Short formula vs exact"
FIG_MEM_LINE = "KV memory"
FIG_MEM_HERE = "your setting"
FIG_MEM_X = "concurrent requests"
FIG_MEM_Y = "GiB"
FIG_MEM_TITLE = "KV memory vs concurrency at {tokens:,} tokens per request"
FIG_PAGE_CONTIG = "contiguous ({max_len:,} reserved)"
FIG_PAGE_PAGED = "paged ({block}-token blocks)"
FIG_PAGE_USED = "tokens"
FIG_PAGE_WASTE = "reserved, unused"
FIG_PAGE_UTIL = "{pct:.1f}% used"
FIG_PAGE_TITLE = "{batch:,} requests of {tokens:,} tokens"


# --- LaTeX -------------------------------------------------------------------------------------
# Words under the braces of the formulas (inside \text{}), and the byte unit.
TEX_K_AND_V = "K and V"
TEX_LAYERS = "layers"
TEX_KV_LAYERS_OF = "KV layers (of {n})"
TEX_KV_HEADS = "KV heads"
TEX_REQUESTS = "requests"
TEX_TOKENS = "tokens"
TEX_WINDOW = "window"
TEX_BYTE = "B"


def tex_num(t: Texts, value: int | Fraction | float) -> str:
    """A number for LaTeX with thin-comma thousands separators (``524{,}288``; Russian ``524\\,288``, ``0{,}5``)."""
    v = Fraction(value)
    text = f"{v.numerator:,}" if v.denominator == 1 else f"{float(v):,g}"
    if t.language == "ru":
        return text.replace(",", "\\,").replace(".", "{,}")
    return text.replace(",", "{,}")


def tex_bytes(t: Texts, human: str) -> str:
    """A formatted size (``512 KiB``, ``≈48.83 GiB``) as LaTeX."""
    approx = human.startswith("≈")
    number, _, unit = human.lstrip("≈").partition(" ")
    body = number.replace(",", "{,}").replace("\u202f", r"\,") + r"\ \text{" + unit + "}"
    return (r"\approx " if approx else "= ") + body


def formula_latex(t: Texts, *, kv_layers: int, layers: int, kv_heads: int, head_dim: int, bytes_per_value: Fraction,
                  dtype: str, per_token: Fraction, per_token_human: str,
                  mla: tuple[int, int] | None = None) -> str:
    """``2 x layers x kv_heads x head_dim x bytes = N B = human`` with labelled terms (MLA: latent form)."""
    layer_label = (r"\text{" + t.TEX_LAYERS + "}" if kv_layers == layers
                   else r"\text{" + t.TEX_KV_LAYERS_OF.format(n="}" + t.tex_num(layers) + r"\text{") + "}")
    b = r"\underbrace{" + t.tex_num(bytes_per_value) + r"\,\text{" + t.TEX_BYTE + r"}}_{\text{" + dtype + "}}"
    if mla is not None:
        rank, rope = mla
        body = (r"\underbrace{" + t.tex_num(kv_layers) + "}_{" + layer_label + r"} \times (\underbrace{" + t.tex_num(rank)
                + r"}_{\text{kv\_lora\_rank}} + \underbrace{" + t.tex_num(rope) + r"}_{\text{qk\_rope\_head\_dim}}) \times " + b)
    else:
        body = (r"\underbrace{2}_{\text{" + t.TEX_K_AND_V + r"}} \times \underbrace{" + t.tex_num(kv_layers) + "}_{" + layer_label
                + r"} \times \underbrace{" + t.tex_num(kv_heads) + r"}_{\text{" + t.TEX_KV_HEADS + r"}} \times \underbrace{"
                + t.tex_num(head_dim) + r"}_{\text{head\_dim}} \times " + b)
    total = t.tex_num(per_token) + r"\ \text{" + t.TEX_BYTE + "}"
    return body + " = " + total + " " + t.tex_bytes(per_token_human)


def total_latex(t: Texts, *, tokens: int, batch: int, per_token: Fraction, full: int, sliding: int, window: int | None,
                per_layer_bytes: Fraction, total: int, total_human: str) -> str:
    """Total KV for ``batch`` requests of ``tokens``: a product, or a per-layer sum when windows cap layers."""
    if sliding == 0:
        body = (r"\underbrace{" + t.tex_num(batch) + r"}_{\text{" + t.TEX_REQUESTS + r"}} \times \underbrace{"
                + t.tex_num(tokens) + r"}_{\text{" + t.TEX_TOKENS + r"}} \times " + t.tex_num(per_token)
                + r"\,\text{" + t.TEX_BYTE + "}")
    else:
        parts = []
        if full:
            parts.append(t.tex_num(full) + r" \times " + t.tex_num(tokens))
        parts.append(t.tex_num(sliding) + r" \times \min(\underbrace{" + t.tex_num(tokens) + r"}_{\text{" + t.TEX_TOKENS
                     + r"}},\ \underbrace{" + t.tex_num(window or 0) + r"}_{\text{" + t.TEX_WINDOW + "}})")
        body = (r"\underbrace{" + t.tex_num(batch) + r"}_{\text{" + t.TEX_REQUESTS + r"}} \times (" + " + ".join(parts)
                + r") \times " + t.tex_num(per_layer_bytes) + r"\,\text{" + t.TEX_BYTE + "}")
    return body + " = " + t.tex_num(total) + r"\ \text{" + t.TEX_BYTE + "} " + t.tex_bytes(total_human)

# kvviz.analysis.sizes.kvsize.ModelShape.warning_codes, by code.
SHAPE_WARNINGS = {
    "uneven_groups": "heads ({heads}) is not a multiple of kv_heads ({kv_heads}): query groups are uneven, which "
                     "real GQA models avoid; the byte count does not depend on it",
}
