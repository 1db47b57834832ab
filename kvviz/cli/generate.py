"""``python -m kvviz generate``: generate with the engine (paged K/V, prefix caching, vLLM-v1 scheduling).

Prompts run one after the other (each once the previous finished, so a later one can hit an earlier one's
blocks) or, with ``--concurrent``, all at once. One JSON entry per prompt plus the engine's sizes and counters.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from kvviz.cli import (
    CliError,
    add_block_size_flag,
    add_json_flag,
    add_kv_offloading_eviction_flag,
    add_kv_offloading_flag,
    add_reserve_full_isl_flag,
    check_model_option,
)

if TYPE_CHECKING:  # types only: no torch or engine import at run time
    from kvviz.engine import EngineConfig, LLMEngine


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "generate", help="generate text with kvviz's engine (paged KV cache, prefix caching)",
        description="Generate with the engine: prompts run one after the other (a later one can reuse an "
        "earlier one's cached blocks) or all at once with --concurrent.")
    p.add_argument("--prompt", action="append", required=True, help="a prompt text (repeat for several)")
    p.add_argument("--max-tokens", type=int, default=16, help="new tokens per prompt at most (default 16)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling threshold (default 1)")
    p.add_argument("--seed", type=int, default=None, help="seed of each request's own generator")
    p.add_argument("--stop", action="append", default=[], help="stop string (repeat for several)")
    p.add_argument("--ignore-eos", action="store_true", help="keep generating past the end-of-sequence token")
    p.add_argument("--concurrent", action="store_true", help="submit every prompt at once")
    p.add_argument("--kv-cache-mib", type=int, default=None, help="K/V memory budget in MiB (default 256)")
    p.add_argument("--max-num-batched-tokens", type=int, default=2048, help="token budget per step (default 2048)")
    p.add_argument("--model", default=None, help="'embedded' (default), a Llama-family folder or hub id")
    p.add_argument("--device", default=None, help="auto (default), cpu, cuda, cuda:N or mps")
    p.add_argument("--dtype", default=None, help="auto (default), float32, bfloat16, float16")
    add_reserve_full_isl_flag(p)
    add_kv_offloading_flag(p)
    add_kv_offloading_eviction_flag(p)
    add_block_size_flag(p)
    add_json_flag(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> dict[str, Any]:
    check_model_option(args.model)
    from kvviz.errors import CodedError
    from kvviz.model import InputError, ModelLoadError
    from kvviz.model.tokens import clean_text

    try:
        for text in args.prompt:
            clean_text(text)
        return _generate(args)
    except (CodedError, InputError, ModelLoadError) as exc:
        raise CliError(str(exc)) from exc


def engine_config(args: argparse.Namespace) -> EngineConfig:
    """The ``EngineConfig`` the flags ask for (a bad value is a CodedError or InputError)."""
    from kvviz.engine import EngineConfig
    from kvviz.model.settings import check_count
    from kvviz.settings import kv_cache_bytes_default

    budget = kv_cache_bytes_default() if args.kv_cache_mib is None else check_count(
        "--kv-cache-mib", args.kv_cache_mib, 1, 1 << 20) << 20
    return EngineConfig(block_size=args.block_size, kv_cache_bytes=budget,
                        max_num_batched_tokens=args.max_num_batched_tokens,
                        scheduler_reserve_full_isl=args.scheduler_reserve_full_isl,
                        kv_offloading_size=args.kv_offloading_size,
                        kv_offloading_eviction_policy=args.kv_offloading_eviction_policy)


def _generate(args: argparse.Namespace) -> dict[str, Any]:
    from kvviz.engine import LLMEngine, SamplingParams
    from kvviz.model import load_model, tokenize

    params = SamplingParams(max_tokens=args.max_tokens, temperature=args.temperature, top_p=args.top_p,
                            seed=args.seed, stop=tuple(args.stop), ignore_eos=args.ignore_eos)
    config = engine_config(args)
    lm = load_model(args.model, device=args.device, dtype=args.dtype, backend="native")
    engine = LLMEngine(lm, config)
    prompts = [tokenize(text, args.model).ids for text in args.prompt]
    done: dict[str, Any] = {}
    for i, ids in enumerate(prompts):
        engine.add_request(f"prompt-{i}", ids, params)
        if not args.concurrent:
            _drain(engine, done)
    _drain(engine, done)
    results = [_entry(done[f"prompt-{i}"]) for i in range(len(prompts))]
    stats = engine.stats()
    return {"results": results, "concurrent": bool(args.concurrent),
            "engine": {"num_blocks": engine.num_blocks, "block_size": engine.block_size,
                       "kv_cache_bytes": engine.kv_cache_bytes, "device": str(lm.device), "dtype": lm.info.dtype,
                       "model": lm.info.name, **{k: v for k, v in stats.as_dict().items()
                                                  if k not in ("num_blocks", "block_size", "kv_cache_bytes")}}}


def _drain(engine: LLMEngine, done: dict[str, Any]) -> None:
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.finished:
                done[out.request_id] = out


def _entry(out) -> dict[str, Any]:
    m = out.metrics
    return {"request_id": out.request_id, "prompt_tokens": out.num_prompt_tokens, "cached_tokens": out.num_cached_tokens,
            "cached_tokens_by_source": out.cached_tokens_by_source,
            "token_ids": out.token_ids, "text": out.text, "finish_reason": out.finish_reason,
            "ttft_ms": None if m.ttft_s is None else round(m.ttft_s * 1000, 3),
            "tpot_ms": None if m.tpot_s is None else round(m.tpot_s * 1000, 3),
            "queue_wait_ms": None if m.queue_wait_s is None else round(m.queue_wait_s * 1000, 3),
            "e2e_ms": None if m.e2e_s is None else round(m.e2e_s * 1000, 3),
            "preempted": out.num_preemptions > 0, "num_preemptions": out.num_preemptions}
