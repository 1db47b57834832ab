"""The engine's last decoder layer computes only the rows that sample: every row's K/V are still written into
its blocks (bit for bit as when every row is computed), its O and MLP products see the sampled rows alone, and
the logits equal those of the full pass within float rounding; with the compiled kernel and with SDPA."""

from __future__ import annotations

import pytest
import torch
from tiny_llm import tiny_lm

from kvviz.engine import EngineConfig, LLMEngine, kernels
from kvviz.engine.runner import SeqInput
from kvviz.settings import settings

# a prompt's middle chunk (no logits), the last chunk of another after its cached past, and a decode token
IDS = [(7 * i + 3) % 60 + 1 for i in range(200)]
SEQS = [SeqInput(IDS[:90], 0, list(range(1, 7)), False),
        SeqInput(IDS[100:170], 100, list(range(7, 18)), True),
        SeqInput(IDS[:1], 40, list(range(18, 21)), True)]
SAMPLED_ROWS = [90 + 70 - 1, 90 + 70]


def _engine(lm) -> LLMEngine:
    return LLMEngine(lm, EngineConfig(kv_cache_bytes=8 << 20, block_size=16))


def _rows_seen(engine: LLMEngine, layer: int) -> list[int]:
    """Record how many rows the O projection of ``layer`` multiplies, step by step."""
    weights = engine.runner._weights().layers[layer]
    seen: list[int] = []
    inner = weights.o

    def counting(x: torch.Tensor) -> torch.Tensor:
        seen.append(x.shape[0])
        return inner(x)

    weights.o = counting
    return seen


@pytest.mark.parametrize("kernel", [True, False], ids=["kernel", "sdpa"])
def test_the_last_layer_computes_only_the_sampled_rows(kernel, monkeypatch):
    if kernel and (kernels.paged_attention_op() is None or not settings().attention_kernel):
        pytest.skip("the compiled kernel is not built here")
    if not kernel:
        monkeypatch.setenv("KVVIZ_ATTENTION_KERNEL", "0")
    lm = tiny_lm(seed=5, layers=3, heads=4, kv_heads=2, head_dim=64)
    full_engine, trim_engine = _engine(lm), _engine(lm)
    full = full_engine.runner.execute(SEQS, all_logits=True)  # [T, vocab]: every row through every layer
    first, last = _rows_seen(trim_engine, 0), _rows_seen(trim_engine, 2)  # (the two engines share one pack)
    trimmed = trim_engine.runner.execute(SEQS)  # [2, vocab]
    assert first == [161] and last == [2]
    assert trimmed.shape == (2, full.shape[1])
    tol = 1e-5 * full.abs().max().item()
    assert (trimmed - full[SAMPLED_ROWS]).abs().max().item() <= tol
    for layer in range(3):  # every row's K/V, in the last layer too, exactly as the full pass wrote them
        assert torch.equal(trim_engine.runner.memory.k[layer], full_engine.runner.memory.k[layer])
        assert torch.equal(trim_engine.runner.memory.v[layer], full_engine.runner.memory.v[layer])
