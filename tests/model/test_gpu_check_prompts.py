"""``make gpu-check`` compares a cached block's K/V between the GPU and the CPU engine, so its first prompt must
fill at least two blocks (its first run on an H200 stopped with an IndexError: the old 7-token prompt filled
none), and the second prompt must share whole blocks with the first (prefix-cache hits on both devices)."""

from __future__ import annotations

import pytest

from kvviz.engine import EngineConfig
from kvviz.engine.gpu_check import PROMPTS
from kvviz.model import load_tokenizer

pytestmark = pytest.mark.model


def test_the_prompts_fill_and_share_whole_blocks():
    tok = load_tokenizer()
    first, second = (tok(p, add_special_tokens=False).input_ids for p in PROMPTS)
    bs = EngineConfig().block_size
    assert len(first) >= 2 * bs
    shared = next((i for i, (a, b) in enumerate(zip(first, second, strict=False)) if a != b), min(len(first), len(second)))
    assert shared >= bs
