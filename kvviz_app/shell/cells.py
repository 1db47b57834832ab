"""Drawing helpers shared by the engine pages' figures: cell grids as discrete heatmaps, cell text,
legend entries, the compact layout."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

import plotly.graph_objects as go

from kvviz_app.shell.style import (
    BLUE,
    GREEN,
    HOST,
    INK,
    OUTLINE_GREY,
    RED,
    TEAL,
    base_layout,
)

CELL_TEXT = 12  # px: chart text stays readable on a projector
DARK_FILLS = {GREEN, BLUE, TEAL, "#1d4ed8", "#0f766e", "#7c3aed", RED, HOST}


def visible_piece(piece: str) -> str:
    """A token's text with whitespace made visible (space ·, newline ↵, tab →): for token chips, captions and
    figure labels alike (a newline token would be a blank label)."""
    out = piece.replace(" ", "·").replace("\n", "↵").replace("\t", "→").replace("\r", "␍")
    return "".join(ch if ch.isprintable() or ch in "·↵→␍" else f"\\x{ord(ch):02x}" for ch in out) or "∅"


def sized_layout(fig: go.Figure, height: int, title: str | None = None) -> go.Figure:
    return base_layout(fig, height, title, top=12, title_size=14, legend=None, hoverlabel=dict(align="left"))


def legend_entries(fig: go.Figure, items: Sequence[tuple[str, str]], symbol: str = "square",
                    row: int | None = None, col: int | None = None) -> None:
    """Legend-only traces (the cells themselves are a heatmap, which has no legend)."""
    for name, colour in items:
        trace = go.Scatter(x=[None], y=[None], mode="markers", name=name, showlegend=True,
                           marker=dict(symbol=symbol, size=12, color=colour, line=dict(color=OUTLINE_GREY, width=1)))
        if row is None:
            fig.add_trace(trace)
        else:
            fig.add_trace(trace, row=row, col=col)


def text_traces(fig: go.Figure, xs: list, ys: list, texts: list[str], fills: list[str], size: int = 12,
                 **where) -> None:
    """Cell labels in white on dark fills and ink on light ones (heatmaps have one text colour)."""
    for dark in (True, False):
        idx = [i for i, f in enumerate(fills) if (f in DARK_FILLS) == dark]
        if not idx:
            continue
        fig.add_trace(go.Scatter(
            x=[xs[i] for i in idx], y=[ys[i] for i in idx], text=[texts[i] for i in idx], mode="text",
            textfont=dict(color="white" if dark else INK, size=size), hoverinfo="skip", showlegend=False,
        ), **where)


def discrete_heatmap(z: list[list[int | None]], colours: Sequence[str], hover: list[list[str]],
                      x: Sequence | None = None, y: Sequence | None = None) -> go.Heatmap:
    n = len(colours)
    scale = []
    for i, c in enumerate(colours):
        scale += [[i / n, c], [(i + 1) / n, c]]
    return go.Heatmap(z=z, x=x, y=y, zmin=-0.5, zmax=n - 0.5, colorscale=scale, showscale=False, xgap=3, ygap=3,
                      hovertext=hover, hovertemplate="%{hovertext}<extra></extra>", hoverongaps=False)


def excerpt(text: str, limit: int = 48) -> str:
    shown = text.replace("\n", "↵")
    if len(shown) > limit:
        shown = shown[: limit - 1] + "…"
    return escape(shown)
