"""Figures of the block-table page's host tier: the host memory pool slot by slot and its LRU order.

Data in (``StepView`` with a ``HostState``), ``go.Figure`` out; every colour and number is read from the
replayed state and the step's events.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go

from kvviz.analysis.scenarios.play import StepView
from kvviz.mirror.events import EventKind
from kvviz.mirror.hashing import short_hash
from kvviz_app.block_table.figures import HASH_CHARS, pool_columns, tail_label
from kvviz_app.shell.cells import CELL_TEXT, discrete_heatmap, sized_layout, text_traces
from kvviz_app.shell.i18n import texts
from kvviz_app.shell.style import FREE_GREY, GREEN, HOST, HOST_LIGHT, MUTED, RED

T = texts("block_table")

HOST_COLOURS = {"host_only": HOST, "both": HOST_LIGHT, "empty": FREE_GREY}
HOST_OUTLINES = {"stored": "#4a044e", "loaded": GREEN, "dropped": RED}  # stored: darker than HOST, seen on both fills


def host_touched(view: StepView) -> dict[int, str]:
    """Host slot -> what this step did to it (a slot dropped and refilled in one step counts as stored)."""
    out: dict[int, str] = {}
    for kind, what in ((EventKind.HOST_EVICT, "dropped"), (EventKind.HOST_LOAD, "loaded"),
                       (EventKind.HOST_STORE, "stored")):
        for e in view.events:
            if e.kind is kind:
                out.update(dict.fromkeys(e.params.get("slots", ()), what))
    return out


def _host_state(view: StepView, h: bytes | None) -> str:
    if h is None:
        return "empty"
    return "both" if h in view.state.hash_to_blocks else "host_only"


def host_pool_figure(view: StepView) -> go.Figure:
    """Every host slot: held (only in host memory, or cached on the device too) or empty, with its short
    hash; outlined when this step copied a block here, loaded one back or dropped one."""
    host = view.state.host
    assert host is not None
    cols = pool_columns(host.num_blocks)
    rows = math.ceil(host.num_blocks / cols)
    keys = list(HOST_COLOURS)
    by_slot = host.hash_in_slot()
    touched = host_touched(view)
    z = [[None] * cols for _ in range(rows)]
    hover = [[""] * cols for _ in range(rows)]
    xs, ys, texts, fills, shapes = [], [], [], [], []
    for slot in range(host.num_blocks):
        r, c = divmod(slot, cols)
        h = by_slot.get(slot)
        state = _host_state(view, h)
        z[r][c] = keys.index(state)
        what = touched.get(slot)
        hover[r][c] = T.HOVER_HOST.format(slot=slot, state=T.HOST_STATE_LABELS[state],
                                          hash=short_hash(h, 16) or T.NO_HASH,
                                          touched=T.HOST_TOUCH_LABELS[what] if what else T.HOVER_NOT_TOUCHED)
        xs.append(c)
        ys.append(r)
        fills.append(HOST_COLOURS[state])
        texts.append(T.HOST_CELL.format(slot=slot, hash=short_hash(h, HASH_CHARS)) if h is not None
                     else T.HOST_EMPTY_CELL.format(slot=slot))
        if what is not None:
            shapes.append(dict(type="rect", x0=c - 0.48, x1=c + 0.48, y0=r - 0.46, y1=r + 0.46,
                               line=dict(color=HOST_OUTLINES[what], width=4)))
    fig = go.Figure(discrete_heatmap(z, list(HOST_COLOURS.values()), hover))
    text_traces(fig, xs, ys, texts, fills, size=CELL_TEXT)
    fig.update_layout(shapes=shapes, showlegend=False)
    fig.update_xaxes(visible=False, range=[-0.5, cols - 0.5])
    fig.update_yaxes(visible=False, autorange=False, range=[rows - 0.5, -0.5])
    return sized_layout(fig, 64 + 48 * rows, T.HOST_POOL_TITLE.format(held=len(host.lru), blocks=host.num_blocks))


def _queue_cells(lru_len: int, t1: int | None, per_row: int) -> list[tuple[int, int]]:
    """(row, column) of each position of the host order: wrapped every ``per_row``; under ARC (``t1`` not None)
    T2 starts on a row of its own under T1's."""
    if t1 is None:
        return [divmod(pos, per_row) for pos in range(lru_len)]
    t1_rows = math.ceil(t1 / per_row)
    return [divmod(pos, per_row) if pos < t1 else (t1_rows + (pos - t1) // per_row, (pos - t1) % per_row)
            for pos in range(lru_len)]


def host_queue_figure(view: StepView, per_row: int = 8) -> go.Figure:
    """Host memory's blocks in its policy's order, wrapped every ``per_row`` blocks: LRU's next to drop first;
    ARC's T1 (stored once) then T2 (reused) on rows of their own, the block dropped next framed in red."""
    host = view.state.host
    assert host is not None
    lru = host.lru
    fig = go.Figure()
    arc = host.t1 is not None
    title = (T.HOST_QUEUE_TITLE_ARC if arc else T.HOST_QUEUE_TITLE).format(n=len(lru))
    if not lru:
        fig.add_annotation(x=0.5, y=0.5, xref="paper", yref="paper", text=T.HOST_QUEUE_EMPTY, showarrow=False,
                           font=dict(size=13, color=MUTED))
        fig.update_xaxes(visible=False)
        fig.update_yaxes(visible=False)
        return sized_layout(fig, 110, title)
    per_row = min(per_row, max(len(lru), 8))
    cells = _queue_cells(len(lru), host.t1, per_row)
    rows = cells[-1][0] + 1
    keys = ["host_only", "both"]
    z = [[None] * per_row for _ in range(rows)]
    hover = [[""] * per_row for _ in range(rows)]
    xs, ys, texts, fills = [], [], [], []
    for pos, (h, slot) in enumerate(lru):
        r, c = cells[pos]
        state = _host_state(view, h)
        z[r][c] = keys.index(state)
        where = "" if not arc else " · " + (T.HOST_ARC_T1 if pos < host.t1 else T.HOST_ARC_T2)
        if pos == host.next_drop:
            where += "<br>" + T.HOST_DROPPED_NEXT
        hover[r][c] = T.HOVER_HOST_QUEUE.format(pos=pos + 1, n=len(lru), slot=slot,
                                                state=T.HOST_STATE_LABELS[state] + where, hash=short_hash(h, 16))
        xs.append(c)
        ys.append(r)
        texts.append(T.HOST_CELL.format(slot=slot, hash=short_hash(h, HASH_CHARS)))
        fills.append(HOST_COLOURS[state])
    fig.add_trace(discrete_heatmap(z, [HOST_COLOURS[k] for k in keys], hover))
    text_traces(fig, xs, ys, texts, fills, size=CELL_TEXT)
    r, c = cells[host.next_drop or 0]
    fig.add_shape(type="rect", x0=c - 0.5, x1=c + 0.5, y0=r - 0.5, y1=r + 0.5, line=dict(color=RED, width=3))
    fig.update_xaxes(visible=False, range=[-0.6, per_row - 0.4])
    if arc:  # two short row labels, T1 and T2, at each list's first row; the title says the red frame's meaning
        ticks = ([0] if host.t1 else []) + ([cells[host.t1][0]] if host.t1 < len(lru) else [])
        names = ([T.HOST_ARC_T1_TICK] if host.t1 else []) + ([T.HOST_ARC_T2_TICK] if host.t1 < len(lru) else [])
        fig.update_yaxes(autorange=False, range=[rows - 0.5, -0.5], tickvals=ticks, ticktext=names,
                         showgrid=False, zeroline=False, tickfont=dict(size=12, color=MUTED))
        return sized_layout(fig, 64 + 52 * rows, title)
    fig.add_annotation(x=0, y=-0.5, yanchor="bottom", text="▼ " + T.HOST_QUEUE_HEAD, showarrow=False,
                       xanchor="left", xshift=-18, font=dict(color=RED, size=12))
    tail_label(fig, len(lru), per_row, T.HOST_QUEUE_TAIL)
    fig.update_yaxes(visible=False, autorange=False, range=[rows - 0.5 + 0.45, -0.5 - 0.45])
    return sized_layout(fig, 80 + 52 * rows, title)
