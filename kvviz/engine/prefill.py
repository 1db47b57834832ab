"""Prefill for the pages: the prompt runs as one request in the process's engine and its K/V are read out of
the engine's blocks, when the engine serves the model; otherwise the model's own pass runs
(``kvviz.model.prefill``). The same ``PrefillResult`` either way; ``kv_source`` says which ran.

On the engine (``EngineLoop.capture_kv``): no prefix-cache read, so every position is computed, batched with
whatever else the engine runs. The model's own pass runs for a transformers-backend model, another model, or
a prompt longer than the engine holds. ``prefill_alone`` runs several prompts each with nothing else in its
passes, all the same way (bit-equal K/V for equal inputs).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from kvviz.engine.engine import engine_supports
from kvviz.engine.loop import EngineLoop, get_engine_loop, started_engine_loop
from kvviz.engine.request import RequestOutput
from kvviz.errors import CodedError
from kvviz.model.loader import LoadedModel, find_loaded_model
from kvviz.model.prefill import (
    KV_FROM_ENGINE,
    ForwardTiming,
    PrefillResult,
    next_pass,
    result_from,
    tokens_for,
)
from kvviz.model.prefill import prefill as own_pass
from kvviz.model.tokens import Tokenized, tokenize_ids

log = logging.getLogger("kvviz.engine")

#: ``prefill_alone``: how long to wait for a quiet engine before the model's own pass runs instead.
QUIET_TIMEOUT_S = 5.0


def engine_loop_for(lm: LoadedModel, num_tokens: int) -> EngineLoop | None:
    """The process's engine loop when it serves ``lm`` and holds ``num_tokens`` (started here when ``lm`` is
    the default model it would load); None when the model's own pass must run."""
    loop = started_engine_loop()
    if loop is None:
        if engine_supports(lm) is not None:
            return None
        try:
            if find_loaded_model() is not lm:
                return None
            loop = get_engine_loop()
        except CodedError as exc:  # a bad engine setting: the engine pages and the API say so
            log.warning("prefill runs on the model's own pass: the engine did not start (%s)", exc)
            return None
    engine = loop.engine
    return loop if engine.lm is lm and num_tokens < engine.max_model_len else None


def _engine_result(lm: LoadedModel, tok: Tokenized, out: RequestOutput) -> PrefillResult:
    """A finished capture request (``EngineLoop.capture_kv``) as a ``PrefillResult``."""
    if out.kv is None or out.logits is None:
        raise RuntimeError(f"the engine finished {out.request_id} without its K/V ({out.finish_reason})")
    m = out.metrics
    first = m.first_scheduled_time if m.first_scheduled_time is not None else m.arrival_time
    token = m.first_token_time if m.first_token_time is not None else first
    compute = round((token - first) * 1000.0, 3)
    timing = ForwardTiming(compute, round((first - m.arrival_time) * 1000.0, 3), compute,
                           max(1, m.max_step_requests), next_pass())
    return result_from(lm, tok, out.kv.keys, out.kv.values, out.logits, timing, reused=0, source=KV_FROM_ENGINE)


def _engine_prefill(lm: LoadedModel, loop: EngineLoop, tok: Tokenized) -> PrefillResult:
    """The prompt as one request in the engine, no prefix-cache read; its K/V read from its blocks."""
    return _engine_result(lm, tok, loop.capture_kv(tok.ids, skip_reading_prefix_cache=True))


def prefill(lm: LoadedModel, text: str | None = None, token_ids: list[int] | None = None,
            max_tokens: int | None = None, *, use_engine: bool = True) -> PrefillResult:
    """Run the whole prompt through the model, every position computed, and capture every layer's K and V:
    on the engine when it serves ``lm`` (module docstring), else in one pass of the model's own.

    Text longer than ``max_tokens`` (default 2,048) keeps its first tokens and carries a notice;
    ``use_engine=False`` runs the model's own pass even when the engine serves ``lm`` (comparisons).
    """
    tok = tokens_for(lm, text, token_ids, max_tokens)
    loop = engine_loop_for(lm, len(tok.ids)) if use_engine else None
    if loop is not None:
        return _engine_prefill(lm, loop, tok)
    return own_pass(lm, token_ids=tok.ids, max_tokens=max(1, len(tok.ids)))


def prefill_alone(lm: LoadedModel, prompts: Sequence[Sequence[int]],
                  quiet_timeout_s: float = QUIET_TIMEOUT_S) -> list[PrefillResult]:
    """Full prefills of several token-id prompts, each with nothing else in its passes and all the same way:
    on the engine, each in steps of its own once it is quiet (``EngineLoop.capture_kv_alone``), or, when it
    does not serve ``lm`` or stays busy for ``quiet_timeout_s``, on the model's own pass. So equal inputs of
    equal length give bit-equal K/V across them (in an engine step shared with other requests the products
    can differ in the last bits: other rows, other chunks)."""
    toks = [tokenize_ids(list(ids), model_name=lm.source.key, max_tokens=max(1, len(ids))) for ids in prompts]
    loop = engine_loop_for(lm, max(len(t.ids) for t in toks)) if toks else None
    if loop is not None:
        outs = loop.capture_kv_alone([t.ids for t in toks], timeout_s=quiet_timeout_s)
        if outs is not None:
            return [_engine_result(lm, t, out) for t, out in zip(toks, outs, strict=True)]
        log.info("the engine stayed busy for %.0f s: these prefills run on the model's own pass", quiet_timeout_s)
    return [own_pass(lm, token_ids=t.ids, max_tokens=max(1, len(t.ids))) for t in toks]


__all__ = ["QUIET_TIMEOUT_S", "engine_loop_for", "prefill", "prefill_alone"]
