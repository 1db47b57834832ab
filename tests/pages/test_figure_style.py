"""kvviz_app.shell.style.set_layout gives what Plotly's update_layout gives (merging subtrees the figure
already has, resetting on None), so every figure keeps its look with the faster path."""

from __future__ import annotations

import copy

import plotly.graph_objects as go
import pytest

from kvviz_app.shell.style import LEGEND_ABOVE_LEFT, base_layout, set_layout


def _drawn(fig: go.Figure) -> dict:
    """The figure's JSON without empty objects (Plotly draws {} and a missing key alike) or the template."""
    def prune(x):
        if isinstance(x, dict):
            return {k: prune(v) for k, v in x.items() if v != {} and k != "template"}
        return [prune(v) for v in x] if isinstance(x, list) else x
    return prune(fig.to_plotly_json())


def _figure() -> go.Figure:
    fig = go.Figure(go.Bar(x=[1, 2], y=[3, 4]))
    fig.layout.legend.traceorder = "reversed"  # a builder's own setting that a merge must keep
    fig.layout.xaxis.title.text = "tokens"
    fig.layout.title.text = "old title"
    return fig


@pytest.mark.parametrize("layout", [
    {"height": 300, "plot_bgcolor": "white"},
    {"legend": dict(LEGEND_ABOVE_LEFT)},  # merged into the existing legend: traceorder stays
    {"xaxis": {"gridcolor": "#eee"}, "yaxis": {"range": [0, 5]}},  # existing subtree and a new one
    {"title": None},  # None resets, as update_layout does
    {"title": {"text": "new", "x": 0}, "margin": {"l": 10, "r": 10, "t": 48, "b": 10}},
    {"xaxis_title_text": "ms", "separators": ", "},  # Plotly's underscore paths
])
def test_set_layout_matches_update_layout(layout):
    ref, fig = _figure(), _figure()
    ref.update_layout(**copy.deepcopy(layout))
    assert _drawn(set_layout(fig, copy.deepcopy(layout))) == _drawn(ref)


def test_base_layout_keeps_a_builders_legend_settings():
    fig = base_layout(_figure(), 200, "A title", legend=LEGEND_ABOVE_LEFT)
    assert fig.layout.legend.traceorder == "reversed" and fig.layout.legend.x == 0
    assert fig.layout.title.text == "A title" and fig.layout.height == 200
