"""The engine's paged attention (``kvviz.engine.attention``) on a tiny Llama: a chunk (or one decode token)
after a past reads it in place when its block table is a run of consecutive ids and through a block select
otherwise, with the same numbers either way and those of one unchunked forward of the model's own decoder."""

from __future__ import annotations

import pytest
import torch
from tiny_llm import reference_logits, tiny_lm

from kvviz.engine import EngineConfig, LLMEngine
from kvviz.engine.runner import SeqInput

BS = 4


def _chunked(table: list[int], ids: list[int], cut: int) -> torch.Tensor:
    """Logits ``[len(ids) - cut, vocab]`` of ``ids[cut:]`` computed after ``ids[:cut]``, both in ``table``."""
    lm = tiny_lm(seed=5)
    engine = LLMEngine(lm, EngineConfig(kv_cache_bytes=1 << 20, block_size=BS))
    engine.runner.execute([SeqInput(ids[:cut], 0, table, True)])
    return engine.runner.execute([SeqInput(ids[cut:], cut, table, True)], all_logits=True)


@pytest.mark.parametrize("cut", [13, 21], ids=["chunk", "decode"])
def test_a_chunk_after_a_past_reads_consecutive_and_scattered_blocks_alike(cut):
    ids = [(7 * i + 3) % 50 for i in range(22)]
    ref = reference_logits(tiny_lm(seed=5), ids)[cut:]  # [22 - cut, vocab]
    in_place = _chunked([1, 2, 3, 4, 5, 6], ids, cut)  # consecutive: read as a view
    selected = _chunked([9, 2, 14, 6, 11, 3], ids, cut)  # scattered: block select
    tol = 1e-5 * ref.abs().max().item()
    assert (in_place - ref).abs().max().item() <= tol
    assert (selected - ref).abs().max().item() <= tol
    assert (in_place - selected).abs().max().item() <= tol
