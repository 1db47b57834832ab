"""``python -m kvviz reuse``: the "edit one character" experiment on the real model, as the page runs it."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kvviz.cli import CliError, add_block_size_flag, add_json_flag, check_model_option
from kvviz.mirror.hashing import DEFAULT_HASH, DEFAULT_SEED, HASH_FUNCTIONS


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "reuse",
        help="what prompt B reuses from prompt A's cached blocks, measured on the real model",
        description="Compare the block chains of prompts A and B, prefill B on top of A's cached K/V "
        "(only its non-reused part), a full prefill of B, and the wrong reuse of invalidated blocks. "
        "Prints exactly: num_tokens_a, num_tokens_b, first_changed_token, reused_tokens, "
        "recomputed_tokens, logits_max_abs_diff_reuse, logits_max_abs_diff_wrong_reuse, kl_wrong_reuse, "
        "next_token_changed_wrong_reuse, layer0_unchanged_after_edit, deep_layers_changed_after_edit, "
        "full_prefill_ms, reuse_prefill_ms (medians of repeated runs), prefill_timing (samples, spreads, and "
        "whether the saving is measurable or within the noise). Wrong-reuse keys are null when B has no "
        "invalidated block.",
    )
    p.add_argument("--a", required=True, help="the original prompt A")
    p.add_argument("--b", required=True, help="the edited prompt B")
    add_block_size_flag(p)
    p.add_argument("--model", default=None, help="'embedded' (default), a Hugging Face id, or a local folder")
    p.add_argument("--hash", default=DEFAULT_HASH, choices=sorted(HASH_FUNCTIONS), help="block hash function")
    p.add_argument("--seed", default=DEFAULT_SEED, help="NONE_HASH seed, as PYTHONHASHSEED (default: vLLM's resolution, 'vllm-none-hash' "
                   "for sha256/sha256_cbor, random per process for xxhash/xxhash_cbor)")
    p.add_argument("--max-tokens", type=int, default=None, help="token limit per prompt (default 2048)")
    add_json_flag(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the experiment; truncation notices go to stderr so stdout keeps exactly the listed keys."""
    check_model_option(args.model)
    from kvviz.errors import CodedError
    from kvviz.experiments.edit.inputs import edit_inputs
    from kvviz.experiments.edit.report import cli_summary, run_reuse_experiment
    from kvviz.model import InputError, ModelLoadError, load_model  # torch only when needed

    try:
        # the one check of the experiment's inputs, before paying for a model load
        inputs = edit_inputs(args.a, args.b, args.block_size, args.hash, args.seed, args.max_tokens)
        experiment = run_reuse_experiment(load_model(args.model), inputs)
    except (InputError, ModelLoadError, ValueError, CodedError) as exc:
        raise CliError(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__) from exc
    for notice in experiment.edit.notices:
        print(f"notice: {notice}", file=sys.stderr)
    return cli_summary(experiment)
