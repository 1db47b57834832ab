"""KV-size maths: the formula, dtypes, presets (the articles' figures), sliding/hybrid totals, MLA,
capacity, paging and formatting."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvviz.analysis.sizes import kv_capacity, kv_formula, kvsize
from kvviz.analysis.sizes.kv_formula import (
    all_layers_bytes_per_token,
    bytes_per_token,
    naive_bytes_per_token,
    total_bytes,
)
from kvviz.analysis.sizes.kvsize import MLA, KVSizeError, LayerKind, ModelShape, shape_from_counts
from kvviz.analysis.sizes.presets import (
    EXAMPLE_CONFIGS,
    PRESETS,
    article_checks,
    example_config_text,
    get_preset,
)
from kvviz.util import units
from kvviz.util.units import GIB, format_bytes, format_exact

LLAMA2 = shape_from_counts("llama-2-7b", 32, 32, 128)


# --- the formula and the articles' figures -----------------------------------------------------


def test_llama2_per_token_is_512_kib():
    assert bytes_per_token(LLAMA2, "fp16") == 524_288
    assert format_bytes(524_288) == "512 KiB"
    assert format_exact(524_288) == "524,288 B"
    assert kv_formula.formula_text(LLAMA2, "fp16") == "2 x 32 x 32 x 128 x 2 B = 524,288 B"


def test_llama2_thousand_tokens_is_exactly_500_mib():
    assert total_bytes(LLAMA2, "fp16", 1000) == 524_288_000 == 500 * 2**20
    assert format_bytes(524_288_000) == "500 MiB"


def test_llama2_hundred_requests_is_48_83_gib_which_the_articles_round_to_50():
    total = total_bytes(LLAMA2, "fp16", 1000, 100)
    assert total == 52_428_800_000
    assert format_bytes(total) == "≈48.83 GiB"
    assert Fraction(total, GIB) == Fraction(48828125, 1000000)


def test_every_preset_figure():
    expected_fp16 = {
        "llama-2-7b": 524_288,
        "qwen3.6-27b": 65_536,  # 16 full-attention layers of 64
        "qwen3.6-35b-a3b": 20_480,  # 10 of 40
        "smollm2-135m": 23_040,
        "llama-3-8b": 131_072,
        "mistral-7b": 131_072,
        "gpt2": 36_864,
        "falcon-7b": 8_192,
        "deepseek-v3": 70_272,  # 61 x (512 + 64) x 2
        "gemma-2-9b": 344_064,
        "qwen3-next-80b-a3b": 24_576,
    }
    assert {p.key for p in PRESETS} == set(expected_fp16)
    for preset in PRESETS:
        assert bytes_per_token(preset.shape(), "fp16") == expected_fp16[preset.key], preset.key


def test_articles_all_layer_figures_for_the_qwen_presets():
    q27 = get_preset("qwen3.6-27b")
    q35 = get_preset("qwen3.6-35b-a3b")
    assert all_layers_bytes_per_token(q27.shape(), "fp16") == 262_144 == q27.article_bytes_per_token
    assert format_bytes(262_144) == "256 KiB"
    assert all_layers_bytes_per_token(q35.shape(), "fp16") == 81_920 == q35.article_bytes_per_token
    assert format_bytes(81_920) == "80 KiB"
    s27 = q27.shape()
    assert (s27.num_layers, s27.num_kv_layers, s27.num_state_layers, s27.num_kv_heads, s27.head_dim) == (64, 16, 48, 4, 256)
    s35 = q35.shape()
    assert (s35.num_layers, s35.num_kv_layers, s35.num_kv_heads, s35.head_dim) == (40, 10, 2, 256)
    assert [i for i, k in enumerate(s35.layer_kinds) if k == LayerKind.FULL] == list(range(3, 40, 4))
    assert "Assumed" in q27.source  # the source note says what was not read directly


def test_article_checks_reproduce_and_flag_the_rounded_one():
    checks = article_checks()
    assert len(checks) == 5
    assert [c.exact for c in checks] == [True, True, False, True, True]
    rounded = checks[2]
    assert rounded.computed_bytes == 52_428_800_000 and rounded.params == {"bytes": 52_428_800_000}
    from kvviz_app.shell.i18n import texts
    T = texts("calculator")
    from kvviz.util.units import format_bytes

    note = T.ARTICLE_NOTES[rounded.code].format(bytes=rounded.params["bytes"], gb=52.4,
                                                human=format_bytes(rounded.params["bytes"]))
    assert "48.83 GiB" in note and "round" in note
    assert {c.code for c in checks} == set(T.ARTICLE_CLAIMS) == set(T.ARTICLE_NOTES)
    assert [c.params.get("full_layers") for c in checks[3:]] == [16, 10]


def test_smollm2_fp32_and_fp16():
    s = get_preset("smollm2-135m").shape()
    assert (s.num_layers, s.num_heads, s.num_kv_heads, s.head_dim, s.d_model) == (30, 9, 3, 64, 576)
    assert bytes_per_token(s, "fp32") == 46_080
    assert bytes_per_token(s, "fp16") == 23_040
    assert s.attention == "GQA" and s.group_size == 3


# --- attention kinds, dtypes, naive formula ----------------------------------------------------


@pytest.mark.parametrize(("heads", "kv", "kind"), [(32, 32, "MHA"), (32, 8, "GQA"), (71, 1, "MQA"), (1, 1, "MHA")])
def test_attention_kind(heads, kv, kind):
    assert shape_from_counts("m", 2, kv, 64, heads=heads).attention == kind


@pytest.mark.parametrize(("dtype", "b"), [("fp32", 4), ("fp16", 2), ("bf16", 2), ("fp8", 1), ("int8", 1),
                                           ("int4", Fraction(1, 2)), ("bfloat16", 2), ("torch.float32", 4)])
def test_dtype_bytes(dtype, b):
    assert kvsize.dtype_bytes(dtype) == b


def test_unknown_dtype():
    with pytest.raises(KVSizeError, match="unknown dtype"):
        kvsize.dtype_bytes("int3")


def test_int4_fractional_bytes_round_up_in_totals():
    s = ModelShape("odd", 1, 1, 1, 1, mla=MLA(2, 1))  # 3 values per token
    assert bytes_per_token(s, "int4") == Fraction(3, 2)
    assert units.as_number(bytes_per_token(s, "int4")) == 1.5
    assert total_bytes(s, "int4", 3) == 5  # 4.5 B rounds up
    assert format_exact(Fraction(3, 2)) == "1.5 B"


def test_naive_formula_overstates_gqa_by_the_group_size():
    s = get_preset("llama-3-8b").shape()
    assert naive_bytes_per_token(s, "fp16") == 524_288
    assert kv_formula.report(s, "fp16").naive_factor == 4
    falcon = get_preset("falcon-7b").shape()
    assert kv_formula.report(falcon, "fp16").naive_factor == 71


def test_naive_equals_exact_for_plain_mha():
    rep = kv_formula.report(LLAMA2, "fp16")
    assert rep.naive_bytes_per_token == rep.bytes_per_token and rep.naive_factor == 1


# --- MLA, sliding windows, hybrids ------------------------------------------------------------


def test_mla_latent_has_no_factor_two():
    s = get_preset("deepseek-v3").shape()
    assert s.attention == "MLA" and s.mla == MLA(512, 64)
    assert s.values_per_layer == 576
    assert bytes_per_token(s, "bf16") == 61 * 576 * 2
    assert kv_formula.formula_text(s, "bf16") == "61 x (512 + 64) x 2 B = 70,272 B"
    typed = shape_from_counts("mla", 27, 1, 192, heads=16, kv_lora_rank=512, qk_rope_head_dim=64)
    assert bytes_per_token(typed, "fp16") == 27 * 576 * 2


def test_sliding_window_caps_totals():
    s = get_preset("mistral-7b").shape()
    per = 2 * 8 * 128 * 2  # one layer, fp16
    assert bytes_per_token(s, "fp16") == 32 * per
    assert total_bytes(s, "fp16", 1000) == 32 * per * 1000
    assert total_bytes(s, "fp16", 100_000) == 32 * per * 4096
    assert total_bytes(s, "fp16", 100_000, 3) == 3 * 32 * per * 4096


def test_alternating_sliding_and_global_total():
    s = get_preset("gemma-2-9b").shape()
    per = 2 * 8 * 256 * 2
    assert (s.num_full_layers, s.num_sliding_layers, s.sliding_window) == (21, 21, 4096)
    assert s.layer_kinds[0] == LayerKind.SLIDING and s.layer_kinds[1] == LayerKind.FULL
    assert total_bytes(s, "fp16", 8192) == per * (21 * 8192 + 21 * 4096)
    assert total_bytes(s, "fp16", 100) == per * 42 * 100


def test_hybrid_total_counts_only_attention_layers():
    s = get_preset("qwen3.6-35b-a3b").shape()
    assert total_bytes(s, "fp16", 1000) == 10 * 2 * 2 * 256 * 2 * 1000
    groups = kv_formula.layer_groups(s, "fp16")
    assert [(g.kind, g.count, g.bytes_per_token) for g in groups] == [
        (LayerKind.FULL, 10, 20_480), (LayerKind.STATE, 30, 0)]


def test_model_without_per_token_kv():
    s = ModelShape("mamba", 4, 4, 4, 64, layer_kinds=(LayerKind.STATE,) * 4)
    rep = kv_formula.report(s, "fp16", 1000, 2)
    assert rep.bytes_per_token == 0 and rep.total_bytes == 0 and rep.naive_factor is None
    cap = kv_capacity.capacity(s, "fp16", GIB, 1000)
    assert cap.max_tokens is None and cap.max_requests is None and cap.max_context is None


# --- capacity and paging ----------------------------------------------------------------------


def test_capacity_for_a_budget():
    cap = kv_capacity.capacity(LLAMA2, "fp16", 80 * GIB, 4096, 16)
    assert cap.bytes_per_block == 16 * 524_288 == 8 * 2**20
    assert cap.blocks_per_request == 256
    # 80 GiB is 10,240 blocks of 8 MiB; vLLM keeps block 0 as its null block, so 10,239 hold tokens
    assert cap.null_block_bytes == 8 * 2**20
    assert cap.max_tokens == 10_239 * 16 == 163_824
    assert cap.max_requests == 39  # 40 x 256 blocks would need the null block too
    assert cap.max_context == 163_824
    cap = kv_capacity.capacity(LLAMA2, "fp16", 80 * GIB, 1000, 16)
    assert cap.blocks_per_request == 63 and cap.request_bytes_paged == 63 * 16 * 524_288
    assert cap.max_requests == (80 * GIB - 8 * 2**20) // (63 * 16 * 524_288)


def test_capacity_leaves_the_null_block_out():
    """A budget of exactly n blocks holds n - 1 blocks of tokens (kvviz.mirror.block_pool's null block)."""
    for n in (2, 3, 257):
        budget = n * 16 * 524_288
        cap = kv_capacity.capacity(LLAMA2, "fp16", budget, 16, 16)
        assert cap.max_requests == n - 1 and cap.max_tokens == (n - 1) * 16 and cap.max_context == (n - 1) * 16
        row = kv_capacity.budget_rows(LLAMA2, "fp16", 16, n - 1, budgets_gib=[Fraction(budget, GIB)])[0]
        assert row.max_requests == n - 1 and row.fits
        row = kv_capacity.budget_rows(LLAMA2, "fp16", 16, n, budgets_gib=[Fraction(budget, GIB)])[0]
        assert row.max_requests == n - 1 and not row.fits  # n requests need n blocks plus the null block
    tiny = kv_capacity.capacity(LLAMA2, "fp16", 16 * 524_288, 16, 16)  # one block: the null block alone
    assert tiny.max_requests == 0 and tiny.max_tokens == 0 and tiny.max_context == 0


def test_max_context_with_sliding_layers_only_is_unbounded_when_the_window_fits():
    s = get_preset("mistral-7b").shape()
    assert kv_capacity.max_context(s, "fp16", 80 * GIB) is None
    tiny = 4096 * bytes_per_token(s, "fp16") - 1
    # whole 16-token blocks below the window, less the null block: 256 - 1 - 1 blocks
    assert kv_capacity.max_context(s, "fp16", int(tiny)) == 4064


def test_paging_waste_is_below_one_block_per_request():
    cmp = kv_capacity.paging_comparison(LLAMA2, "fp16", 1000, 4000, 100, 16)
    assert cmp.contiguous_utilisation == pytest.approx(0.25)
    assert cmp.paged_waste == 100 * 8 * 524_288  # 1,008 - 1,000 tokens per request
    assert cmp.paged_waste < 100 * 16 * 524_288
    low, high = kv_capacity.PAGED_ATTENTION_UTILISATION
    assert (low, high) == (0.204, 0.382) and low <= cmp.contiguous_utilisation <= high
    with pytest.raises(KVSizeError, match="max_len"):
        kv_capacity.paging_comparison(LLAMA2, "fp16", 1000, 999)
    # the bound the calculator states: one partly filled block (15 of 16 slots) per request and layer
    bound = kv_capacity.paged_waste_bound(LLAMA2, "fp16", 16, 100)
    assert bound == 100 * 15 * 524_288 and cmp.paged_waste <= bound
    assert kv_capacity.paged_waste_bound(LLAMA2, "fp16", 1, 100) == 0  # one-token blocks waste nothing


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(PRESETS), st.sampled_from(kvsize.DTYPES), st.integers(1, 70_000),
       st.sampled_from([1, 8, 16, 256]), st.integers(1, 64))
def test_paged_waste_never_exceeds_its_bound(preset, dtype, tokens, block, batch):
    shape = preset.shape()
    cmp = kv_capacity.paging_comparison(shape, dtype, tokens, tokens, batch, block)
    assert 0 <= cmp.paged_waste <= kv_capacity.paged_waste_bound(shape, dtype, block, batch)


def test_budget_rows():
    rows = kv_capacity.budget_rows(LLAMA2, "fp16", 1000, 100)
    assert [r.budget_gib for r in rows] == [24, 80, 141]
    assert [r.fits for r in rows] == [False, True, True]
    assert rows[1].needed_bytes == 52_428_800_000


# --- validation -------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs", [dict(layers=0), dict(kv_heads=-1), dict(head_dim=0), dict(layers=10**9)])
def test_bad_counts(kwargs):
    args = dict(layers=32, kv_heads=8, head_dim=128) | kwargs
    with pytest.raises(KVSizeError):
        shape_from_counts("m", **args)


def test_kv_heads_above_heads_is_an_error_but_uneven_groups_only_warn():
    with pytest.raises(KVSizeError, match="cannot exceed"):
        shape_from_counts("m", 2, 9, 64, heads=8)
    s = shape_from_counts("m", 2, 8, 64, heads=30)
    assert s.warnings and "not a multiple" in s.warnings[0]
    assert "not a multiple" in kv_formula.report(s, "fp16").to_dict()["warnings"][0]


def test_sliding_layers_need_a_window_and_kinds_must_match_layers():
    with pytest.raises(KVSizeError, match="window"):
        ModelShape("m", 2, 2, 2, 8, layer_kinds=(LayerKind.SLIDING, LayerKind.FULL))
    with pytest.raises(KVSizeError, match="entries"):
        ModelShape("m", 3, 2, 2, 8, layer_kinds=(LayerKind.FULL,))


def test_report_to_dict_has_the_cli_keys():
    d = kv_formula.report(LLAMA2, "fp16", 1000, 100).to_dict()
    for key in ("bytes_per_token", "naive_bytes_per_token", "attention", "num_kv_layers", "total_bytes"):
        assert key in d
    assert d["total_bytes"] == 52_428_800_000 and d["bytes_per_token"] == 524_288


# --- formatting -------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "text"), [(900, "900 B"), (1024, "1 KiB"), (70_272, "68.625 KiB"),
                                             (1536, "1.5 KiB"), (2**30 * 3, "3 GiB"), (1_081_344, "≈1.03 MiB")])
def test_format_bytes(value, text):
    assert format_bytes(value) == text


def test_example_configs_cover_every_family():
    assert len(EXAMPLE_CONFIGS) >= 20
    assert example_config_text("gpt2.json").lstrip().startswith("{")
    with pytest.raises(KVSizeError):
        example_config_text("../secrets.json")


@settings(max_examples=40, deadline=None)
@given(layers=st.integers(1, 128), kv=st.integers(1, 64), group=st.integers(1, 8), head_dim=st.integers(1, 512),
       tokens=st.integers(1, 10**6), batch=st.integers(1, 256), dtype=st.sampled_from(kvsize.DTYPES))
def test_totals_are_tokens_times_per_token_for_full_attention(layers, kv, group, head_dim, tokens, batch, dtype):
    s = shape_from_counts("m", layers, kv, head_dim, heads=kv * group)
    per = bytes_per_token(s, dtype)
    assert per == 2 * layers * kv * head_dim * kvsize.dtype_bytes(dtype)
    assert total_bytes(s, dtype, tokens, batch) == math.ceil(per * tokens * batch)
    assert kv_formula.naive_bytes_per_token(s, dtype) == per * group
