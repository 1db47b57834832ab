"""A KV budget in blocks, the null block left out: the one rule (kvviz.analysis.sizes.kv_capacity.budget_blocks) behind
the calculator's capacity, the workload page's budget mark and both CLI commands."""

from __future__ import annotations

from fractions import Fraction

import pytest

from kvviz.analysis.sizes import kv_capacity, kv_formula
from kvviz.analysis.sizes.kvsize import KVSizeError
from kvviz.analysis.sizes.presets import get_preset
from kvviz.mirror.events import usable_blocks
from kvviz.util.units import GIB

MIB = 1 << 20


def test_whole_blocks_less_the_null_block():
    b = kv_capacity.budget_blocks(512 * 1024, 80 * GIB, 16)  # llama-2-7b fp16: 8 MiB a block
    assert (b.num_blocks, b.usable_blocks, b.token_slots) == (10_240, 10_239, 163_824)
    assert b.usable_blocks == usable_blocks(b.num_blocks) and b.usable_bytes == 10_239 * 8 * MIB


def test_a_part_of_a_block_holds_no_token():
    """4 MiB over 80 GiB is half a block: the engine sizes its pool in whole blocks, so it adds nothing
    (the calculator used to count those 4 MiB as 8 more token slots)."""
    shape = get_preset("llama-2-7b").shape()
    cap = kv_capacity.capacity(shape, "fp16", 80 * GIB + 4 * MIB, 1000, 16)
    assert (cap.num_blocks, cap.usable_blocks) == (10_240, 10_239)
    assert cap.max_tokens == 163_824 == cap.usable_blocks * 16


def test_an_odd_block_size_in_bytes():
    bpt = kv_formula.bytes_per_token(get_preset("deepseek-v3").shape(), "fp16")
    b = kv_capacity.budget_blocks(bpt, kv_capacity.gib_bytes(24), 512)
    assert b.num_blocks == (24 * GIB) // (bpt * 512) and b.usable_blocks == b.num_blocks - 1
    assert b.usable_bytes <= 24 * GIB - bpt * 512


def test_a_budget_under_one_block_has_no_usable_block():
    assert kv_capacity.budget_blocks(Fraction(1), 15, 16).usable_blocks == 0
    assert kv_capacity.budget_blocks(Fraction(1), 16, 16).usable_blocks == 0  # the one block is the null block
    assert kv_capacity.budget_blocks(Fraction(1), 32, 16).usable_blocks == 1


def test_gib_bytes_is_exact_for_the_number_given():
    assert kv_capacity.gib_bytes(80) == 80 * GIB and kv_capacity.gib_bytes(0.5) == GIB // 2


@pytest.mark.parametrize("bpt,budget,bs", [(0, GIB, 16), (1, -1, 16), (1, GIB, 0)])
def test_bad_input_is_a_coded_error(bpt, budget, bs):
    with pytest.raises(KVSizeError):
        kv_capacity.budget_blocks(bpt, budget, bs)
