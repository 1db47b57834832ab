"""The Engine (live) page's figures: integer ref_cnt ticks, visible whitespace tokens in the K/V heatmap,
and in presenter mode a title that leaves room for the legend above the plot."""

from __future__ import annotations

from kvviz_app.engine_view import figures as F
from kvviz_app.shell.style import LEGEND_ABOVE_LEFT, base_layout, set_presenter
from kvviz_app.shell.style import presenter_layer as _layer  # noqa: F401 - the layer base_layout applies


class _Step:
    def __init__(self, step: int) -> None:
        self.step, self.prefill_tokens, self.decode_tokens = step, 3, 1


def test_ref_cnt_colour_bar_ticks_are_whole_numbers():
    fig = F.pool_grid([0, 1, 2, 0, 1], [False, True, True, False, False])
    bar = fig.data[0].marker.colorbar
    assert bar.tickmode == "linear" and bar.tick0 == 0 and bar.dtick == 1


def test_whitespace_tokens_get_visible_heatmap_labels():
    values = [[0.0, 1.0]] * 4
    fig = F.block_heatmap(values, ["Hello", "\n", "\t", " "], "kv")
    labels = list(fig.data[0].y)
    assert labels[0] == "0: Hello"
    assert labels[1] == "1: ↵" and labels[2] == "2: →" and labels[3] == "3: ·"  # as the token chips show them


def _top_needed(fig) -> float:
    """Pixels above the plot that a title pinned to the top and a one-row legend above the plot need: each
    line 1.3x its font, the legend's 10 px of padding, 6 px above the title and between the two."""
    lines = 1 + fig.layout.title.text.count("<br>")
    title = fig.layout.title.font.size * 1.3 * lines
    legend = (fig.layout.legend.font.size or fig.layout.font.size) * 1.3 + 10
    return fig.layout.title.pad.t + title + 6 + legend


def test_presenter_mode_keeps_the_legend_off_the_title():
    set_presenter(True)
    try:
        fig = F.step_timeline([_Step(i) for i in range(3)])
        title = fig.layout.title
        assert (title.yref, title.y, title.yanchor) == ("container", 1, "top")  # pinned: not centred in the margin
        assert fig.layout.margin.t >= _top_needed(fig), (fig.layout.margin.t, _top_needed(fig))
        two = [F.go.Bar(x=[1], y=[1], name="a"), F.go.Bar(x=[1], y=[2], name="b")]  # a legend of two entries
        plain = base_layout(F.go.Figure(two), 200, "A title", legend=LEGEND_ABOVE_LEFT)
        assert plain.layout.margin.t >= _top_needed(plain)
        long = base_layout(F.go.Figure(two), 200, "A title long enough to wrap " * 4, legend=LEGEND_ABOVE_LEFT)
        assert long.layout.title.text.count("<br>") >= 1 and long.layout.title.pad.t > 6  # padded by its extra lines
        assert long.layout.margin.t >= _top_needed(long)
    finally:
        set_presenter(False)
    normal = F.step_timeline([_Step(1)])
    assert normal.layout.margin.t == 48  # the layout of a laptop screen is unchanged


def test_presenter_mode_keeps_no_room_for_a_legend_that_is_not_drawn():
    set_presenter(True)
    try:
        one = F.go.Figure(F.go.Scatter(x=[1], y=[1], showlegend=False))
        fig = base_layout(one, 200, "A title", legend=LEGEND_ABOVE_LEFT)
        assert fig.layout.margin.t == 48  # the title fits the base margin: no legend row is added under it
    finally:
        set_presenter(False)


def test_presenter_mode_widens_the_head_sharing_row_names_margin():
    """The calculator's row names ("KV-головы (кэшируются на токен)") were cut at 16 px on a projector."""
    from kvviz.analysis.sizes.kvsize import ModelShape
    from kvviz_app.calculator.figures import HEAD_LABEL_MARGIN, head_sharing_figure

    shape = ModelShape("llama-2-7b", num_layers=32, num_heads=32, num_kv_heads=32, head_dim=128)
    assert head_sharing_figure(shape).layout.margin.l == HEAD_LABEL_MARGIN
    set_presenter(True)
    try:
        assert head_sharing_figure(shape).layout.margin.l >= HEAD_LABEL_MARGIN * 16 / 12
    finally:
        set_presenter(False)
