"""The two block chains of the "Edit one character" page, one row per block, with the cascade animation
(B's lookup walked from the first changed block). Plain data in, ``go.Figure`` out."""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import plotly.graph_objects as go

from kvviz.analysis.prompt_compare import PromptComparison
from kvviz.mirror.hashing import short_hash
from kvviz_app.edit.figures_common import (
    A_COLOR,
    B_X,
    BOUNDARY_COLOR,
    FONT,
    STATUS_COLORS,
    UNCHECKED_COLOR,
    first_changed_block,
)
from kvviz_app.shell.i18n import texts
from kvviz_app.shell.style import MUTED, wrap_title

T = texts("edit")
render_block_reason = texts("concepts").render_block_reason


@dataclass(frozen=True)
class ChainRow:
    """One row of the chain figure: a block index, or a gap standing for ``gap`` skipped blocks."""

    index: int | None
    gap: tuple[int, ...] = ()


MAX_ROWS = 24  # rows drawn on the page (longer chains keep their head, the change and the tail)
ROW_PX = 30  # one block row
FIXED_PX = 275  # the title, legend, headers and Play controls: a figure is FIXED_PX + ROW_PX x rows tall


def rows_fitting(height_px: int) -> int:
    """The most rows a chain figure draws in ``height_px`` without squeezing them (6 at the least: the
    head, a gap, the row before the change, the change, the tail)."""
    return max(6, (height_px - FIXED_PX) // ROW_PX)


def chain_rows(comparison: PromptComparison, max_rows: int = MAX_ROWS) -> list[ChainRow]:
    """Rows to draw: every block when they fit, else the head, the blocks around and after the first
    change (as many as fit) and the last two, with gap rows standing for the blocks left out."""
    n = len(comparison.blocks)
    if n <= max_rows:
        return [ChainRow(i) for i in range(n)]
    fc = first_changed_block(comparison)
    keep = {0, 1, n - 2, n - 1}
    if fc is not None:
        keep |= {max(0, fc - 1), fc}
        i = fc + 1
        while len(keep) < max_rows - 3 and i < n:
            keep.add(i)
            i += 1
    else:
        keep |= set(range(min(n, max_rows - 6)))
    rows: list[ChainRow] = []
    prev = -1
    for i in sorted(keep):
        if i > prev + 1:
            rows.append(ChainRow(None, tuple(range(prev + 1, i))))
        rows.append(ChainRow(i))
        prev = i
    return rows


def _gap_text(comparison: PromptComparison, gap: Sequence[int]) -> str:
    counts = Counter(comparison.blocks[i].status for i in gap)
    summary = ", ".join(f"{T.STATUS_LABELS[s]}: {c}" for s, c in counts.items())  # "label: count" reads in any language
    return T.FIG_GAP.format(count=len(gap), summary=summary)


def chain_figure(comparison: PromptComparison, max_rows: int = MAX_ROWS) -> go.Figure:
    """A's chain (left) and B's chain (right), one row per block, coloured by B's status, with an
    animation (Play / slider) that walks B's lookup from the first changed block to the end."""
    blocks = comparison.blocks
    rows = chain_rows(comparison, max_rows)
    fc = first_changed_block(comparison)
    ys = {row.index: -k for k, row in enumerate(rows) if row.index is not None}

    def label_a(i: int) -> str:
        b = blocks[i]
        if b.hash_a is None and not b.tokens_a:
            return "—"
        if b.hash_a is None:
            return T.FIG_BLOCK_PARTIAL.format(index=i, start=b.start, end=b.start + len(b.tokens_a) - 1)
        return T.FIG_BLOCK_LABEL.format(index=i, start=b.start, end=b.start + len(b.tokens_a) - 1,
                                        hash=short_hash(b.hash_a))

    def label_b(i: int, revealed: bool) -> str:
        b = blocks[i]
        parent = T.FIG_PARENT.format(parent=short_hash(b.parent_b))
        if not revealed:
            return T.FIG_BLOCK_LABEL_B.format(index=i, start=b.start, end=b.end - 1, hash="????????", parent=parent,
                                              status=T.FIG_NOT_CHECKED)
        own = short_hash(b.hash_b) if b.hash_b is not None else T.FIG_NO_HASH
        if b.hash_b is not None and b.hash_b != b.hash_a:
            own = f"<span style='color:{STATUS_COLORS['miss']}'>{own}</span>"
        if b.parent_a is not None and b.parent_b != b.parent_a:
            parent = f"<span style='color:{STATUS_COLORS['miss']}'>{parent}</span>"
        return T.FIG_BLOCK_LABEL_B.format(index=i, start=b.start, end=b.end - 1, hash=own, parent=parent,
                                          status=f"<b>{T.STATUS_LABELS[b.status]}</b>")

    idx = [row.index for row in rows if row.index is not None]
    y_idx = [ys[i] for i in idx]
    a_has = [i for i in idx if blocks[i].tokens_a]
    fig = go.Figure()
    # links: each chain is a line through its blocks (a parent -> child link per step)
    fig.add_trace(go.Scatter(x=[0.0] * len(a_has), y=[ys[i] for i in a_has], mode="lines", hoverinfo="skip",
                             line={"color": "#b6c6dc", "width": 3}, showlegend=False))
    fig.add_trace(go.Scatter(x=[B_X] * len(idx), y=y_idx, mode="lines", hoverinfo="skip",
                             line={"color": "#c4c8ce", "width": 3}, showlegend=False))
    fig.add_trace(go.Scatter(
        x=[0.0] * len(a_has), y=[ys[i] for i in a_has], mode="markers+text",
        text=[label_a(i) for i in a_has], textposition="middle right",
        marker={"size": 18, "symbol": "square", "color": [A_COLOR if blocks[i].hash_a else STATUS_COLORS["partial"] for i in a_has]},
        textfont={"family": FONT, "size": 12}, hoverinfo="text", showlegend=False,
        hovertext=[T.FIG_HOVER_A.format(index=i, hash=short_hash(blocks[i].hash_a, 16),
                                         parent=short_hash(blocks[i].parent_a, 16)) for i in a_has],
    ))

    def b_trace(revealed_upto: int | None, current: int | None) -> go.Scatter:
        """B's blocks; blocks with index >= revealed_upto are 'not checked yet'."""
        def shown(i: int) -> bool:
            return revealed_upto is None or i < revealed_upto

        return go.Scatter(
            x=[B_X] * len(idx), y=y_idx, mode="markers+text",
            text=[label_b(i, shown(i)) for i in idx], textposition="middle right",
            marker={
                "size": [26 if i == current else 18 for i in idx], "symbol": "square",
                "color": [STATUS_COLORS[blocks[i].status] if shown(i) else UNCHECKED_COLOR for i in idx],
                "line": {"color": [BOUNDARY_COLOR if i == current else "rgba(0,0,0,0)" for i in idx], "width": 2},
            },
            textfont={"family": FONT, "size": 12}, hoverinfo="text", showlegend=False,
            hovertext=[T.FIG_HOVER_B.format(index=i, meaning=T.STATUS_MEANING[blocks[i].status],
                                             reason=html.escape(render_block_reason(blocks[i].code,
                                                                                     blocks[i].params)))
                       for i in idx],
        )

    fig.add_trace(b_trace(None, None))
    b_index = len(fig.data) - 1
    gap_rows = [(k, row) for k, row in enumerate(rows) if row.index is None]
    if gap_rows:
        fig.add_trace(go.Scatter(
            x=[B_X / 2] * len(gap_rows), y=[-k for k, _ in gap_rows], mode="text",
            text=[f"<i>{_gap_text(comparison, row.gap)}</i>" for _, row in gap_rows],
            textfont={"size": 12, "color": MUTED}, hoverinfo="skip", showlegend=False,
        ))
    for status in ("hit", "miss", "invalidated", "partial"):  # short names: one legend line at 1024 px
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=T.STATUS_LABELS[status],
                                 marker={"size": 12, "symbol": "square", "color": STATUS_COLORS[status]}))
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=T.FIG_CHAIN_A,
                             marker={"size": 12, "symbol": "square", "color": A_COLOR}))

    # one short line per chain header (a wrapped header climbed into the legend in Russian at 1024 px);
    # what B's labels mean is the caption under the chart (FIG_CHAIN_B_KEY)
    header_b = T.FIG_CHAIN_B_SHORT
    # the headers hang from the plot area's top edge (the legend sits right above it), over 1.8 rows of room
    y_top = 1.8
    height = FIXED_PX - 90 + ROW_PX * len(rows)  # the Play controls' 90 px are added below
    fig.update_layout(
        height=height, margin={"l": 10, "r": 10, "t": 70, "b": 10}, plot_bgcolor="#ffffff",
        xaxis={"range": [-0.03, 2.0], "visible": False, "fixedrange": True},
        yaxis={"range": [-(len(rows) - 0.4), y_top], "visible": False, "fixedrange": True},
        legend={"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 0, "font": {"size": 12}},
        annotations=[
            {"x": 0.0, "y": 1, "xref": "x", "yref": "paper", "text": f"<b>{T.FIG_CHAIN_A}</b>", "showarrow": False,
             "xanchor": "left", "yanchor": "top"},
            {"x": B_X, "y": 1, "xref": "x", "yref": "paper", "text": f"<b>{header_b}</b>",
             "showarrow": False, "xanchor": "left", "yanchor": "top", "align": "left"},
        ],
    )
    steps = [i for i in idx if fc is not None and i >= fc]
    if not steps:
        fig.update_layout(title={"text": wrap_title(T.FIG_CASCADE_NONE, 64), "font": {"size": 13}, "x": 0.01,
                                 "y": 1, "yref": "container", "yanchor": "top", "pad": {"t": 10}},
                          margin={"t": 100})
        return fig

    def step_text(i: int) -> str:
        b = blocks[i]
        if b.status == "miss":
            return T.FIG_STEP_MISS.format(index=i, hash=short_hash(b.hash_b))
        if b.status == "invalidated":
            return T.FIG_STEP_INVALIDATED.format(index=i, parent=short_hash(b.parent_b),
                                                 parent_a=short_hash(b.parent_a), hash=short_hash(b.hash_b))
        if b.status == "partial":
            return T.FIG_STEP_PARTIAL.format(index=i, count=b.end - b.start)
        return T.FIG_STEP_HIT.format(index=i)

    frames = [go.Frame(name="start", data=[b_trace(fc, None)], traces=[b_index],
                       layout={"title": {"text": wrap_title(T.FIG_CASCADE_START.format(first=fc), 64)}})]
    for i in steps:
        frames.append(go.Frame(name=f"b{i}", data=[b_trace(i + 1, i)], traces=[b_index],
                               layout={"title": {"text": wrap_title(step_text(i), 64)}}))
    fig.frames = frames
    counts = Counter(blocks[i].status for i in range(fc, len(blocks)))
    summary = T.FIG_CASCADE_SUMMARY.format(
        first=fc, miss=counts.get("miss", 0), invalidated=counts.get("invalidated", 0),
        partial=counts.get("partial", 0), hits=fc)
    title = wrap_title(summary, 64)
    # Plotly lifts a multi-line title anchored at the top by its extra lines: pad it down by them; the
    # margin holds the padded title (about 18 px a line; Russian wraps to more lines) and the legend (36 px)
    lines = title.count("<br>") + 1
    pad = 10 + 18 * (lines - 1)
    top = pad + 18 * lines + 36
    fig.update_layout(
        title={"text": title, "font": {"size": 13}, "x": 0.01, "y": 1, "yref": "container",
               "yanchor": "top", "pad": {"t": pad}},
        margin={"l": 10, "r": 10, "t": top, "b": 70},
        height=height + 90,
        updatemenus=[{
            "type": "buttons", "direction": "left", "x": 0.0, "y": -0.01, "xanchor": "left", "yanchor": "top",
            "showactive": False, "pad": {"t": 4, "r": 8},
            "buttons": [
                {"label": T.FIG_PLAY, "method": "animate",
                 "args": [None, {"frame": {"duration": 900, "redraw": True}, "fromcurrent": False,
                                 "transition": {"duration": 0}, "mode": "immediate"}]},
                {"label": T.FIG_PAUSE, "method": "animate",
                 "args": [[None], {"frame": {"duration": 0, "redraw": False}, "mode": "immediate"}]},
            ],
        }],
        sliders=[{
            "active": len(frames) - 1, "x": 0.3, "len": 0.7, "y": -0.01, "yanchor": "top",
            "currentvalue": {"prefix": T.FIG_SLIDER, "font": {"size": 12}}, "pad": {"t": 4},
            "steps": [{"label": T.FIG_SLIDER_START if f.name == "start" else f"#{f.name[1:]}", "method": "animate",
                       "args": [[f.name], {"frame": {"duration": 0, "redraw": True}, "mode": "immediate",
                                           "transition": {"duration": 0}}]} for f in frames],
        }],
    )
    # the figure opens on the final state (the whole cascade); Play replays it from the start
    return fig
