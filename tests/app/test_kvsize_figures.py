"""Calculator figures: head sharing follows the shape, bars and budgets carry the library's numbers."""

from __future__ import annotations

from kvviz.analysis.sizes import kv_capacity, kv_formula, kvsize
from kvviz.analysis.sizes.presets import get_preset
from kvviz.util import units
from kvviz_app.calculator import figures as F


def _line_groups(fig):
    return [t for t in fig.data if t.type == "scatter" and t.mode == "lines"]


def test_gqa_groups_consecutive_query_heads():
    shape = get_preset("llama-3-8b").shape()
    fig = F.head_sharing_figure(shape)
    groups = _line_groups(fig)
    assert len(groups) == 8
    for g in groups:
        assert sum(1 for x in g.x if x is None) == 4  # four query heads per KV head
    assert [F.kv_head_of(i, 32, 8) for i in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert "GQA: 32 query heads share 8 KV heads (4 per KV head)" in fig.layout.title.text


def test_mqa_mha_and_mla_titles_and_shapes():
    falcon = F.head_sharing_figure(get_preset("falcon-7b").shape())
    assert len(_line_groups(falcon)) == 1 and falcon.layout.title.text.startswith("MQA: 71")
    gpt2 = F.head_sharing_figure(get_preset("gpt2").shape())
    assert len(_line_groups(gpt2)) == 12 and gpt2.layout.title.text.startswith("MHA")
    mla = F.head_sharing_figure(get_preset("deepseek-v3").shape())
    assert len(_line_groups(mla)) == 1 and "576 values" in mla.layout.title.text
    assert any("latent (512 + 64)" in str(t.text) for t in mla.data)


def test_many_heads_are_capped_and_said_so():
    shape = kvsize.shape_from_counts("wide", 2, 4, 64, heads=400)
    fig = F.head_sharing_figure(shape)
    assert len(fig.data[-2].x) == F.MAX_HEADS_DRAWN
    assert any("of 400 query heads" in a.text for a in fig.layout.annotations)


def test_layer_strip_counts_kinds():
    fig = F.layer_strip_figure(get_preset("qwen3.6-35b-a3b").shape(), "fp16")
    names = sorted(t.name for t in fig.data)
    assert names == ["fixed-size state (30)", "full attention (10)"]


def test_bar_chart_highlights_the_selected_model_and_marks_all_layer_figures():
    rows = [F.BarRow(p.label, kv_formula.bytes_per_token(p.shape(), "fp16"), kv_formula.all_layers_bytes_per_token(p.shape(), "fp16"),
                     highlight=p.key == "qwen3.6-27b") for p in map(get_preset, ["llama-2-7b", "qwen3.6-27b", "gpt2"])]
    fig = F.bytes_per_token_bar(rows, "fp16")
    chosen = [t for t in fig.data if t.name == "selected model"][0]
    assert list(chosen.y) == ["Qwen3.6-27B"] and list(chosen.x) == [64.0]
    ticks = [t for t in fig.data if t.type == "scatter"][0]
    assert list(ticks.x) == [256.0]


def test_memory_and_paging_figures_use_library_totals():
    shape = get_preset("llama-2-7b").shape()
    fig = F.memory_vs_budget_figure(shape, "fp16", 1000, 100)
    here = fig.data[1]
    assert here.y[0] == kv_formula.total_bytes(shape, "fp16", 1000, 100) / units.GIB
    assert {s.y0 for s in fig.layout.shapes} == {24, 80, 141}
    cmp = kv_capacity.paging_comparison(shape, "fp16", 1000, 4000, 100)
    fig = F.paging_figure(cmp)
    assert "25.0% used" in list(fig.data[1].text)
