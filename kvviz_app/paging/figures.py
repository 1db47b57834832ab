"""Figures of the paged-vs-contiguous page: where the memory goes, the memory layout at one step, the
state over time. Data in (kvviz.analysis.paging.sim results), ``go.Figure`` out; nothing is recomputed."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from kvviz.analysis.paging.experiment import LAYOUTS, PAPER_UTILISATION_BAND, WASTE_KINDS
from kvviz.analysis.paging.sim import LayoutResult, Snapshot
from kvviz_app.shell.i18n import texts
from kvviz_app.shell.style import BLUE, FREE_GREY, GREEN, INK, MUTED, ORANGE, TEAL, base_layout

T = texts("paging")

KIND_COLOURS = {
    "stored": GREEN,
    "duplicate": "#a855f7",
    "reserved": "#fbbf24",
    "internal": "#ef4444",
    "external": "#57534e",
    "free": FREE_GREY,
}
BLOCK_COLOURS = {"shared": TEAL, "full": GREEN, "partial": "#86efac", "free": FREE_GREY}
LAYOUT_COLOURS = {"contiguous": ORANGE, "paged": BLUE}
MAX_ROWS = 16


def _layout(fig: go.Figure, height: int, title: str | None = None) -> go.Figure:
    return base_layout(fig, height, title, title_top=56)


def rows_for(num_blocks: int) -> int:
    """Rows of the layout pictures: the largest divisor of the block count up to 16, so every row holds
    the same number of whole blocks (and the same slots in both pictures)."""
    return next(r for r in range(min(MAX_ROWS, num_blocks), 0, -1) if num_blocks % r == 0)


def waste_figure(results: dict[str, LayoutResult]) -> go.Figure:
    """100% stacked bars, one per layout: the memory's share in each state, with the paper's band."""
    fig = go.Figure()
    names = [T.LAYOUT_LABELS[name] for name in LAYOUTS]
    for kind in WASTE_KINDS:
        shares = [results[name].waste_share[kind] for name in LAYOUTS]
        fig.add_bar(
            y=names, x=shares, orientation="h", name=T.KIND_LABELS[kind], marker_color=KIND_COLOURS[kind],
            text=[T.SHARE_VALUE.format(share=s) if s >= 0.04 else "" for s in shares], textposition="inside",
            insidetextanchor="middle",
            hovertemplate=T.HOVER_WASTE.format(kind=T.KIND_LABELS[kind], help=T.KIND_HELP[kind]),
        )
    # The paper's band gets a row of its own under the two bars: drawn across the bars, its dashed edges ran
    # through their share labels (7.3%, 10.9%) at 1024 px. A trace with no width makes the row.
    low, high = PAPER_UTILISATION_BAND
    fig.add_bar(y=[T.PAPER_ROW.replace(" (", "<br>(")], x=[0], orientation="h", showlegend=False, hoverinfo="skip",
                marker_color="rgba(0,0,0,0)")
    row = len(LAYOUTS)  # category rows are numbered 0, 1, ... from the first
    fig.add_shape(type="rect", xref="x", yref="y", x0=low, x1=high, y0=row - 0.35, y1=row + 0.35, layer="above",
                  fillcolor="rgba(22,163,74,0.18)", line=dict(color=INK, width=1.5, dash="dash"))
    fig.add_annotation(x=high, y=row, xref="x", yref="y", xanchor="left", xshift=6, showarrow=False,
                       text=T.PAPER_BAND.format(low=low, high=high), font=dict(size=12))
    fig.update_layout(barmode="stack", xaxis=dict(range=[0, 1], tickformat=".0%"),
                      yaxis=dict(autorange="reversed"), uniformtext=dict(minsize=12, mode="hide"))
    # Room below the axis for a legend of two or three rows (Russian labels wrap at 1024-1400 px).
    fig = _layout(fig, 350, T.WASTE_TITLE)
    fig.update_layout(legend=dict(orientation="h", yref="container", y=0, yanchor="bottom", x=0, xanchor="left",
                                  traceorder="normal"),
                      margin=dict(b=110))
    return fig


def contiguous_layout_figure(snapshot: Snapshot, memory_tokens: int, rows: int, title: str | None = None) -> go.Figure:
    """The linear address space wrapped into ``rows`` rows; every span drawn exactly, coloured by state."""
    per_row = memory_tokens // rows
    pieces: dict[str, dict[str, list]] = {k: {"x": [], "base": [], "y": [], "hover": []} for k in WASTE_KINDS}
    for span in snapshot.spans:
        pos, end = span.start, span.start + span.length
        if span.request is None:
            hover = T.HOVER_HOLE.format(kind=T.KIND_LABELS[span.kind], start=span.start, end=end - 1,
                                        length=span.length)
        else:
            hover = T.HOVER_SPAN.format(request=span.request, kind=T.KIND_LABELS[span.kind], start=span.start,
                                        end=end - 1, length=span.length)
        while pos < end:
            row, offset = divmod(pos, per_row)
            take = min(end - pos, per_row - offset)
            p = pieces[span.kind]
            p["x"].append(take)
            p["base"].append(offset)
            p["y"].append(row)
            p["hover"].append(hover)
            pos += take
    fig = go.Figure()
    for kind in WASTE_KINDS:
        p = pieces[kind]
        if not p["x"]:
            continue
        fig.add_bar(
            x=p["x"], base=p["base"], y=p["y"], orientation="h", name=T.KIND_LABELS[kind],
            marker=dict(color=KIND_COLOURS[kind], line=dict(color="white", width=1.5)),
            customdata=p["hover"], hovertemplate="%{customdata}<extra></extra>", width=0.9,
        )
    fig.update_layout(barmode="overlay", bargap=0.05)
    fig.update_xaxes(range=[0, per_row], title=T.SLOT_AXIS, showgrid=False)
    fig.update_yaxes(range=[rows - 0.5, -0.5], title=T.ROW_AXIS, showgrid=False, dtick=max(1, rows // 8))
    fig = _layout(fig, 150 + 22 * rows, title)
    fig.update_layout(legend=dict(x=0, xanchor="left", y=1.0, yanchor="bottom"))
    return fig


def paged_layout_figure(snapshot: Snapshot, block_size: int, rows: int, title: str | None = None) -> go.Figure:
    """The block pool as a grid (one cell per block, same slot order as the contiguous picture)."""
    blocks = snapshot.blocks
    cols = len(blocks) // rows
    kinds = list(BLOCK_COLOURS)
    z, text = [], []
    for r in range(rows):
        z_row, t_row = [], []
        for c in range(cols):
            b = blocks[r * cols + c]
            z_row.append(kinds.index(b.kind))
            if b.kind == "shared":
                owner = T.OWNER_SHARED.format(ref=b.ref_cnt)
            elif b.request is not None:
                owner = T.OWNER_REQUEST.format(request=b.request)
            else:
                owner = T.OWNER_NONE
            t_row.append(T.HOVER_BLOCK.format(block=b.block_id, kind=T.BLOCK_KINDS[b.kind], used=b.used,
                                              size=block_size, ref=b.ref_cnt, owner=owner))
        z.append(z_row)
        text.append(t_row)
    n = len(kinds)
    scale = []
    for i, kind in enumerate(kinds):
        scale += [[i / n, BLOCK_COLOURS[kind]], [(i + 1) / n, BLOCK_COLOURS[kind]]]
    fig = go.Figure(go.Heatmap(
        z=z, customdata=text, hovertemplate="%{customdata}<extra></extra>", colorscale=scale,
        zmin=-0.5, zmax=n - 0.5, showscale=False, xgap=1 if cols <= 128 else 0, ygap=1,
    ))
    for kind in kinds:  # legend entries for the discrete colours
        fig.add_scatter(x=[None], y=[None], mode="markers", name=T.BLOCK_KINDS[kind],
                        marker=dict(size=10, symbol="square", color=BLOCK_COLOURS[kind]))
    fig.update_xaxes(title=T.BLOCK_AXIS, showgrid=False, range=[-0.5, cols - 0.5])
    fig.update_yaxes(title=T.ROW_AXIS, autorange="reversed", showgrid=False, dtick=max(1, rows // 8))
    fig = _layout(fig, 150 + 22 * rows, title)
    fig.update_layout(legend=dict(x=0, xanchor="left", y=1.0, yanchor="bottom"))
    return fig


def over_time_figure(results: dict[str, LayoutResult], memory_tokens: int, step: int | None = None) -> go.Figure:
    """Token states / memory and running requests per step, both layouts; the drawn step marked."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.6, 0.4])
    for name in LAYOUTS:
        recs = results[name].records
        steps = [r.step for r in recs]
        colour = LAYOUT_COLOURS[name]
        label = T.LAYOUT_LABELS[name]
        fig.add_scatter(x=steps, y=[r.slots["stored"] / memory_tokens for r in recs], mode="lines", name=label,
                        line=dict(color=colour), row=1, col=1, legendgroup=name,
                        hovertemplate=T.HOVER_STORED.format(layout=label))
        fig.add_scatter(x=steps, y=[r.running for r in recs], mode="lines", name=label, showlegend=False,
                        line=dict(color=colour, shape="hv"), row=2, col=1, legendgroup=name,
                        hovertemplate=T.HOVER_RUNNING.format(layout=label))
    low, high = PAPER_UTILISATION_BAND
    fig.add_hrect(y0=low, y1=high, fillcolor=INK, opacity=0.08, line_width=0, row=1, col=1)
    if step is not None:
        fig.add_vline(x=step, line=dict(color=MUTED, dash="dot"))
    fig.update_yaxes(title=T.TIME_UTIL_AXIS, tickformat=".0%", range=[0, 1.02], row=1, col=1)
    fig.update_yaxes(title=T.TIME_RUNNING_AXIS, rangemode="tozero", row=2, col=1)
    fig.update_xaxes(title=T.TIME_STEP_AXIS, row=2, col=1)
    return _layout(fig, 420, T.TIME_TITLE)
