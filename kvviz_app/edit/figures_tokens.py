"""The token strips of the "Edit one character" page: A's and B's tokens in rows, coloured by B's block
status, with the changed tokens marked. Plain data in, ``go.Figure`` out."""

from __future__ import annotations

import math
from collections.abc import Sequence

import plotly.graph_objects as go

from kvviz.analysis.prompt_compare import PromptComparison
from kvviz.util.utf8 import completed_chars
from kvviz_app.edit.figures_common import (
    A_LIGHT,
    BOUNDARY_COLOR,
    CHANGED_COLOR,
    FONT,
    STATUS_LIGHT,
    TOKENS_PER_ROW,
    byte_hover,
    cell_piece,
)
from kvviz_app.shell.i18n import texts
from kvviz_app.shell.style import OUTLINE_GREY

T = texts("edit")

_CODES = {"a": 0, "hit": 1, "miss": 2, "invalidated": 3, "partial": 4, "changed": 5}


EDGE_ROOM = 0.35  # cells


def token_strip_figure(
    pieces_a: Sequence[str],
    ids_a: Sequence[int],
    pieces_b: Sequence[str],
    ids_b: Sequence[int],
    changed_a: Sequence[int],
    changed_b: Sequence[int],
    comparison: PromptComparison,
    row_start: int = 0,
    row_end: int | None = None,
    width: int = TOKENS_PER_ROW,
) -> go.Figure:
    """Both prompts as a grid of ``width`` tokens per row, A's row directly above B's row for the same
    positions; thick lines at block boundaries. B's cells take their block's status colour, A's a
    neutral colour; changed tokens are magenta. Invisible markers make tokens clickable
    (customdata = [side, position])."""
    bs = comparison.block_size
    total_rows = max(math.ceil(len(pieces_a) / width), math.ceil(len(pieces_b) / width), 1)
    row_end = total_rows if row_end is None else max(row_start + 1, min(row_end, total_rows))
    rows = list(range(max(0, row_start), row_end))
    status_of = {p: blk.status for blk in comparison.blocks for p in range(blk.start, blk.end)}
    set_a, set_b = set(changed_a), set(changed_b)
    sides = (
        ("A", pieces_a, ids_a, ["changed" if p in set_a else "a" for p in range(len(pieces_a))]),
        ("B", pieces_b, ids_b, ["changed" if p in set_b else status_of.get(p, "partial") for p in range(len(pieces_b))]),
    )
    colors = [A_LIGHT, STATUS_LIGHT["hit"], STATUS_LIGHT["miss"], STATUS_LIGHT["invalidated"],
              STATUS_LIGHT["partial"], CHANGED_COLOR]
    scale = []
    for i, col in enumerate(colors):
        scale += [[i / len(colors), col], [(i + 1) / len(colors), col]]

    z, text, ylabels = [], [], []
    px, py, pdata, phover = [], [], [], []
    completes = {"A": completed_chars(pieces_a), "B": completed_chars(pieces_b)}
    for k, r in enumerate(rows):
        for s_i, (side, pieces, ids, cats) in enumerate(sides):
            y = 2 * k + s_i
            zr, tr = [], []
            for c in range(width):
                p = r * width + c
                if p < len(pieces):
                    zr.append(_CODES[cats[p]])
                    done = completes[side][p]
                    tr.append(cell_piece(pieces[p], done))
                    px.append(c)
                    py.append(y)
                    pdata.append([side, p])
                    phover.append(T.FIG_TOKEN_HOVER.format(side=side, pos=p, block=p // bs,
                                                           piece=byte_hover(pieces[p], done), id=ids[p]))
                else:
                    zr.append(None)
                    tr.append("")
            z.append(zr)
            text.append(tr)
            ylabels.append(f"{side} t{r * width}")
    fig = go.Figure()
    fig.add_trace(go.Heatmap(
        z=z, x=list(range(width)), y=list(range(len(z))), text=text, texttemplate="%{text}",
        textfont={"family": FONT, "size": 12, "color": "#111827"}, colorscale=scale, zmin=-0.5,
        zmax=len(colors) - 0.5, showscale=False, xgap=1, ygap=0, hoverinfo="skip",
    ))
    fig.add_trace(go.Scatter(
        x=px, y=py, customdata=pdata, mode="markers", name="tokens", showlegend=False,
        marker={"size": 18, "symbol": "square", "color": "#000000", "opacity": 0.0},
        selected={"marker": {"opacity": 0.25, "color": "#000000"}}, unselected={"marker": {"opacity": 0.0}},
        hovertext=phover, hoverinfo="text",
    ))
    line = {"color": BOUNDARY_COLOR, "width": 2.5}
    for k, r in enumerate(rows):
        top, bottom = 2 * k - 0.5, 2 * k + 1.5
        row_first = r * width
        if k > 0:  # between pairs: thick when a block starts here, else a thin separator
            thick = row_first % bs == 0
            fig.add_shape(type="line", x0=-0.5, x1=width - 0.5, y0=top, y1=top,
                          line=line if thick else {"color": "#ffffff", "width": 5})
        for c in range(1, width):
            if (row_first + c) % bs == 0:
                fig.add_shape(type="line", x0=c - 0.5, x1=c - 0.5, y0=top, y1=bottom, line=line)
    legend = [(T.FIG_A_TOKEN, A_LIGHT)] + [(T.STATUS_MEANING[s], STATUS_LIGHT[s]) for s in STATUS_LIGHT]
    legend.append((T.FIG_CHANGED, CHANGED_COLOR))
    for name, color in legend:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=name, hoverinfo="skip",
                                 marker={"size": 12, "symbol": "square", "color": color,
                                         "line": {"color": OUTLINE_GREY, "width": 1}}))
    fig.update_layout(
        height=70 + 21 * len(z) + 40, margin={"l": 60, "r": 10, "t": 10, "b": 10}, clickmode="event+select",
        dragmode=False, plot_bgcolor="#ffffff",
        legend={"orientation": "h", "y": -0.01, "yanchor": "top", "x": 0, "font": {"size": 12}},
        # a third of a cell of room on both sides: a wide cell text (⟨D0⟩→К is wider than a cell at 1024 px)
        # overflows its cell, and in the first and last column the plot area would clip it
        xaxis={"range": [-0.5 - EDGE_ROOM, width - 0.5 + EDGE_ROOM], "showticklabels": False, "showgrid": False, "zeroline": False,
               "fixedrange": True},
        yaxis={"autorange": "reversed", "tickvals": list(range(len(z))), "ticktext": ylabels, "showgrid": False,
               "zeroline": False, "tickfont": {"size": 12, "family": FONT}, "fixedrange": True},
    )
    return fig
