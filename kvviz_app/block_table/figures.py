"""Figures of the block-table page: block tables, the physical pool, the LRU free queue, counters over
time and an animated pool.

Data in (``StepView``, ``ScenarioRun`` from kvviz.analysis), ``go.Figure`` out. Nothing is recomputed here:
every colour and number is read from the replayed state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from kvviz.analysis.scenarios.play import ScenarioRun, StepView
from kvviz.mirror.hashing import short_hash
from kvviz_app.shell.cells import (
    CELL_TEXT,
    discrete_heatmap,
    excerpt,
    legend_entries,
    sized_layout,
    text_traces,
)
from kvviz_app.shell.i18n import texts
from kvviz_app.shell.style import (
    AMBER,
    BLUE,
    DARK_RED,
    FREE_GREY,
    GREEN,
    HOST,
    HOST_LIGHT,
    INK,
    LIGHT_BLUE,
    MUTED,
    PALE_GREY,
    PURPLE,
    RED,
    TEAL,
    wrap_title,
)

T = texts("block_table")

SOURCE_COLOURS = {"hit": GREEN, "host": HOST, "new": BLUE, "partial": LIGHT_BLUE, "skipped": PALE_GREY}
POOL_COLOURS = {"used": BLUE, "shared": TEAL, "cached": AMBER, "free": FREE_GREY, "null": PALE_GREY}
EVENT_COLOURS = {"hit": GREEN, "touch": GREEN, "allocate": "#1d4ed8", "cache": PURPLE,
                 "free": MUTED, "evict": RED, "host_load": HOST, "host_store": HOST_LIGHT}
TABLE_OUTLINES = {"touch": "#14532d", "hit": "#14532d", "allocate": "#1e3a8a"}  # dark: visible on their fills
# When a block saw several events in one step, the outline shows the most telling one.
EVENT_PRIORITY = ("evict", "host_load", "touch", "hit", "allocate", "cache", "host_store", "free")
HASH_CHARS = 4  # pool cells are ~30 px wide at 1024 px: 4 hex digits fit at 12 px
JUMP_LEGEND_CHARS = 40  # a line of 12 px text under the free queue: its half of a 1024 px screen

# ----------------------------------------------------------------------------- block tables


def block_tables_figure(view: StepView) -> go.Figure:
    """One row per running request, one cell per logical block: the physical block that holds those
    tokens, coloured by where it came from (hit, computed, partial, null), outlined if touched now."""
    requests = view.requests
    width = max((len(r.rows) for r in requests), default=0)
    bs = view.scenario.block_size
    source_keys = list(SOURCE_COLOURS)
    z: list[list[int | None]] = []
    hover: list[list[str]] = []
    xs, ys, texts, fills = [], [], [], []
    shapes = []
    labels = []
    own: dict[tuple[str, int], list[str]] = {}  # what this step did to each request's blocks
    for e in view.events:
        for bid in e.block_ids:
            own.setdefault((e.request_id, bid), []).append(e.kind.value)
    for r_i, req in enumerate(requests):
        label = (T.ROW_LABEL_SALT.format(id=req.request_id, tokens=req.num_tokens, salt=req.salt) if req.salt
                 else T.ROW_LABEL.format(id=req.request_id, tokens=req.num_tokens))
        labels.append(label)
        row_z: list[int | None] = [None] * width
        row_h = [""] * width
        for cell in req.rows:
            source = cell.shown_source
            row_z[cell.index] = source_keys.index(source)
            block = cell.block_id if cell.block_id is not None else T.CELL_NULL
            row_h[cell.index] = T.HOVER_CELL.format(
                request=escape(req.request_id), first=cell.start + 1, last=cell.end, block=block,
                source=T.SOURCE_LABELS[source], hash=short_hash(cell.hash) or T.NO_HASH, ref=cell.ref_cnt,
                text=excerpt(cell.excerpt) if cell.excerpt else "",
            )
            if cell.block_id is None:
                text = T.CELL_NULL
            else:
                text = T.CELL_BLOCK.format(block=cell.block_id)
                if cell.ref_cnt > 1:
                    text += T.CELL_SHARED.format(ref=cell.ref_cnt)
            xs.append(cell.index)
            ys.append(r_i)
            texts.append(text)
            fills.append(SOURCE_COLOURS[source])
            kinds = own.get((req.request_id, cell.block_id), ()) if cell.block_id is not None else ()
            kind = next((k for k in ("touch", "hit", "allocate") if k in kinds), None)
            if kind is not None:
                shapes.append(dict(type="rect", x0=cell.index - 0.47, x1=cell.index + 0.47, y0=r_i - 0.44,
                                   y1=r_i + 0.44, line=dict(color=TABLE_OUTLINES[kind], width=3)))
        z.append(row_z)
        hover.append(row_h)
    fig = go.Figure()
    if requests:
        fig.add_trace(discrete_heatmap(z, list(SOURCE_COLOURS.values()), hover))
        text_traces(fig, xs, ys, texts, fills, size=12)
    shown = {c.shown_source for r in requests for c in r.rows}
    legend_entries(fig, [(T.SOURCE_LABELS[k], c) for k, c in SOURCE_COLOURS.items()
                         if k not in ("skipped", "host") or k in shown])
    fig.update_layout(shapes=shapes)
    ticks = list(range(width))
    # "tokens" over the span, on two lines and level: one line rotated 9 columns at 1024 px past the chart's top
    fig.update_xaxes(tickvals=ticks, ticktext=[T.AXIS_TOKENS.format(first=i * bs + 1, last=(i + 1) * bs)
                                               .replace(" ", "<br>", 1) for i in ticks], tickangle=0,
                     side="top", showgrid=False, zeroline=False, range=[-0.5, max(width, 4) - 0.5], tickfont=dict(size=12))
    fig.update_yaxes(tickvals=list(range(len(requests))), ticktext=labels, autorange="reversed", showgrid=False,
                     zeroline=False, range=[len(requests) - 0.5, -0.5] if requests else [0.5, -0.5])
    fig = sized_layout(fig, 126 + 46 * max(len(requests), 1), None)
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.02, x=0, xanchor="left"),
                      margin=dict(t=56, b=40))
    return fig


# ----------------------------------------------------------------------------- the pool


def pool_columns(num_blocks: int) -> int:
    """Cells per row of the pool grid: 7 to 9 for small pools (fewest rows, then the fullest last row,
    then 8: 25 blocks make 9+9+7, not 8+8+8 and a lone block), 16 for large ones."""
    if num_blocks > 64:
        return 16
    return min((7, 8, 9), key=lambda c: (-(-num_blocks // c), -num_blocks % c, abs(c - 8)))


def _pool_state(view_state, bid: int) -> str:
    state = view_state.state_of(bid)
    if state == "used" and view_state.ref_cnt[bid] > 1:
        return "shared"
    return state


def _pool_grid(state, touched: dict[int, tuple[str, ...]], cols: int):
    keys = list(POOL_COLOURS)
    rows = math.ceil(state.num_blocks / cols)
    z = [[None] * cols for _ in range(rows)]
    hover = [[""] * cols for _ in range(rows)]
    xs, ys, texts, fills, shapes = [], [], [], [], []
    for bid in range(state.num_blocks):
        r, c = divmod(bid, cols)
        st = _pool_state(state, bid)
        z[r][c] = keys.index(st)
        h = state.block_hash[bid]
        xs.append(c)
        ys.append(r)
        fills.append(POOL_COLOURS[st])
        if st == "null":  # greyed, with its own tooltip: never allocated, never in the free queue
            hover[r][c] = T.HOVER_NULL
            texts.append(T.NULL_CELL)
            continue
        kinds = touched.get(bid, ())
        touched_text = (T.HOVER_TOUCHED.format(kinds=", ".join(dict.fromkeys(T.TOUCH_LABELS.get(k, k) for k in kinds)))
                        if kinds else T.HOVER_NOT_TOUCHED)
        hover[r][c] = T.HOVER_POOL.format(block=bid, state=T.POOL_STATE_LABELS[st], ref=state.ref_cnt[bid],
                                          hash=short_hash(h, 16) or T.NO_HASH, touched=touched_text)
        texts.append(T.POOL_CELL.format(block=bid, hash=short_hash(h, HASH_CHARS) or "-", ref=state.ref_cnt[bid]))
        kind = next((k for k in EVENT_PRIORITY if k in kinds), None)
        if kind is not None:
            shapes.append(dict(type="rect", x0=c - 0.48, x1=c + 0.48, y0=r - 0.46, y1=r + 0.46,
                               line=dict(color=EVENT_COLOURS[kind], width=4)))
    return z, hover, xs, ys, texts, fills, shapes, rows


def pool_grid_figure(view: StepView, legend: bool = True) -> go.Figure:
    """Every physical block: state colour, short hash, ref_cnt; outlined when this step touched it.
    ``legend=False`` drops the colour legend (a page that explains the colours elsewhere, short on height)."""
    state = view.state
    cols = pool_columns(state.num_blocks)
    z, hover, xs, ys, texts, fills, shapes, rows = _pool_grid(state, view.touched, cols)
    fig = go.Figure(discrete_heatmap(z, list(POOL_COLOURS.values()), hover))
    text_traces(fig, xs, ys, texts, fills, size=CELL_TEXT)
    legend_entries(fig, [(T.POOL_STATE_LABELS[k], c) for k, c in POOL_COLOURS.items()])
    kinds_now = {k for ks in view.touched.values() for k in ks}
    for kind in EVENT_PRIORITY:
        if kind in kinds_now and kind != "hit":
            fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=T.TOUCH_LABELS[kind] + " now",
                                     marker=dict(symbol="square-open", size=13, color=EVENT_COLOURS[kind],
                                                 line=dict(width=3))))
    fig.update_layout(shapes=shapes)
    fig.update_xaxes(visible=False, range=[-0.5, cols - 0.5])
    fig.update_yaxes(visible=False, autorange=False, range=[rows - 0.5, -0.5])
    c = view.counters
    title = T.POOL_TITLE.format(k=view.step, used=c["used_blocks"], cached=c["cached_free_blocks"],
                                free=c["free_blocks"])
    fig = sized_layout(fig, 64 + 56 * rows + (40 if legend else 0), title)
    fig.update_layout(showlegend=legend,
                      legend=dict(orientation="h", yanchor="top", y=-0.02, x=0, xanchor="left", font=dict(size=12)),
                      margin=dict(b=50 if legend else 8))
    return fig


def jumped_to_head(view: StepView) -> list[int]:
    """Blocks this step freed without a hash: vLLM's ``free_blocks`` put them at the free-queue head."""
    return [b for e in view.events if e.kind.value == "free" for b in e.params.get("to_head", ())]


def tail_label(fig: go.Figure, n: int, per_row: int, text: str) -> None:
    """The queue's tail label under its last cell: ending at it when that cell is in the right half of the row,
    starting at it otherwise (ended at a cell near the left, a long label ran past the chart's left edge)."""
    last_r, last_c = divmod(n - 1, per_row)
    left = last_c < per_row / 2
    fig.add_annotation(x=last_c, y=last_r + 0.5, yanchor="top", text=("▲ " + text) if left else (text + " ▲"),
                       showarrow=False, xanchor="left" if left else "right", xshift=-18 if left else 18,
                       font=dict(color=MUTED, size=12))


def free_queue_figure(view: StepView, per_row: int = 16) -> go.Figure:
    """The free queue in eviction order, wrapped every ``per_row`` blocks; the head is marked."""
    state = view.state
    queue = list(state.free_queue)
    fig = go.Figure()
    title = T.QUEUE_TITLE.format(k=view.step, n=len(queue))
    if not queue:
        fig.add_annotation(x=0.5, y=0.5, xref="paper", yref="paper", text=T.QUEUE_EMPTY, showarrow=False,
                           font=dict(size=13, color=DARK_RED))
        fig.update_xaxes(visible=False)
        fig.update_yaxes(visible=False)
        return sized_layout(fig, 130, title)
    per_row = min(per_row, max(len(queue), 8))
    rows = math.ceil(len(queue) / per_row)
    keys = ["cached", "free"]
    z = [[None] * per_row for _ in range(rows)]
    hover = [[""] * per_row for _ in range(rows)]
    xs, ys, texts, fills = [], [], [], []
    jumped = set(jumped_to_head(view)) & set(queue)
    for pos, bid in enumerate(queue):
        r, c = divmod(pos, per_row)
        st = state.state_of(bid)
        z[r][c] = keys.index(st)
        h = state.block_hash[bid]
        hover[r][c] = T.HOVER_QUEUE.format(pos=pos + 1, n=len(queue), block=bid, state=T.POOL_STATE_LABELS[st],
                                           hash=("hash " + short_hash(h, 16)) if h else T.NO_HASH)
        xs.append(c)
        ys.append(r)
        texts.append(T.QUEUE_CELL.format(block=bid) + (f"<br>{short_hash(h, 4)}" if h else ""))
        fills.append(POOL_COLOURS[st])
    fig.add_trace(discrete_heatmap(z, [POOL_COLOURS["cached"], POOL_COLOURS["free"]], hover))
    text_traces(fig, xs, ys, texts, fills, size=CELL_TEXT)
    fig.add_shape(type="rect", x0=-0.5, x1=0.5, y0=-0.5, y1=0.5, line=dict(color=RED, width=3))
    fig.add_annotation(x=0, y=-0.5, yanchor="bottom", text="▼ " + T.QUEUE_HEAD, showarrow=False, xanchor="left",
                       xshift=-18, font=dict(color=RED, size=12))
    tail_label(fig, len(queue), per_row, T.QUEUE_TAIL)
    for pos, bid in enumerate(queue):  # the move vLLM's free_blocks makes: unhashed blocks jump to the head
        if bid in jumped:
            r, c = divmod(pos, per_row)
            fig.add_shape(type="rect", x0=c - 0.47, x1=c + 0.47, y0=r - 0.45, y1=r + 0.45,
                          line=dict(color=PURPLE, width=3, dash="dot"))
    # the legend line wrapped: one line of it ran past the chart's right edge in Russian at 1024 px
    legend = wrap_title("┅ " + T.QUEUE_JUMP_LEGEND, JUMP_LEGEND_CHARS) if jumped else ""
    lines = legend.count("<br>") + 1 if jumped else 0
    if jumped:
        fig.add_annotation(x=0, y=0, xref="paper", yref="paper", yanchor="top", xanchor="left", yshift=-4,
                           text=legend, align="left", showarrow=False, font=dict(color=PURPLE, size=12))
    fig.update_xaxes(visible=False, range=[-0.6, per_row - 0.4])
    fig.update_yaxes(visible=False, autorange=False, range=[rows - 0.5 + 0.45, -0.5 - 0.45])
    fig = sized_layout(fig, 80 + 52 * rows + 22 * lines, title)
    if jumped:
        fig.update_layout(margin=dict(b=12 + 18 * lines))
    return fig


# ----------------------------------------------------------------------------- over time


def timeline_figure(run: ScenarioRun, k: int, counters: Sequence[dict] | None = None) -> go.Figure:
    """Cumulative hit tokens, computed tokens and evictions after every step, with step ``k`` marked
    (``counters``: ``run.counters_at(i)`` for every step, when the caller already has them)."""
    steps = list(range(run.num_steps + 1))
    counters = list(counters) if counters is not None else [run.counters_at(i) for i in steps]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    colours = {"hit_tokens": GREEN, "computed_tokens": BLUE, "evictions": RED}
    for key, name in T.TIMELINE_SERIES.items():
        fig.add_trace(go.Scatter(x=steps, y=[c[key] for c in counters], name=name, mode="lines+markers",
                                 line=dict(color=colours[key], shape="hv", dash="dash" if key == "evictions" else None),
                                 marker=dict(size=5)), secondary_y=key == "evictions")
    if "host_hit_tokens" in counters[0]:  # a host tier: the tokens it served instead of a recompute
        fig.add_trace(go.Scatter(x=steps, y=[c["host_hit_tokens"] for c in counters], name=T.TIMELINE_HOST,
                                 mode="lines+markers", line=dict(color=HOST, shape="hv"), marker=dict(size=5)),
                      secondary_y=False)
    fig.add_vline(x=k, line=dict(color=INK, dash="dot"))
    fig.update_xaxes(title=T.TIMELINE_X, dtick=1 if run.num_steps <= 30 else None, showgrid=False)
    fig.update_yaxes(title=T.TIMELINE_Y, gridcolor="#eef0f3", rangemode="tozero", secondary_y=False)
    most = max(max(c["evictions"] for c in counters), 4)
    fig.update_yaxes(title=T.TIMELINE_Y2, showgrid=False, range=[0, most * 1.1], tickmode="linear", tick0=0,
                     dtick=math.ceil(most / 4), secondary_y=True, color=RED)
    fig = sized_layout(fig, 340, T.TIMELINE_TITLE)
    # legend under the x-axis title: beside the chart title it collided with it at 1024 px
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.3, x=0, xanchor="left"),
                      margin=dict(b=96))
    return fig


def pool_animation_figure(run: ScenarioRun) -> go.Figure:
    """The pool grid with one Plotly animation frame per step (its own play button and slider)."""
    cols = pool_columns(run.scenario.num_blocks)
    frames = []
    first = None
    for k in range(run.num_steps + 1):
        view = run.view_at(k)
        z, hover, xs, ys, texts, fills, shapes, rows = _pool_grid(view.state, view.touched, cols)
        data = [discrete_heatmap(z, list(POOL_COLOURS.values()), hover),
                go.Scatter(x=xs, y=ys, text=texts, mode="text", textfont=dict(size=CELL_TEXT, color=INK),
                           hoverinfo="skip")]
        layout = go.Layout(shapes=shapes, title=dict(text=f"{T.ANIMATION_TITLE} · {T.STEP_HEADER.format(k=k, n=run.num_steps)}"))
        frames.append(go.Frame(data=data, layout=layout, name=str(k)))
        if first is None:
            first = (data, shapes, rows)
    assert first is not None
    data, shapes, rows = first
    fig = go.Figure(data=data, frames=frames)
    fig.update_layout(shapes=shapes, showlegend=False)
    fig.update_xaxes(visible=False, range=[-0.5, cols - 0.5])
    fig.update_yaxes(visible=False, autorange=False, range=[rows - 0.5, -0.5])
    fig = sized_layout(fig, 150 + 60 * rows, f"{T.ANIMATION_TITLE} · {T.STEP_HEADER.format(k=0, n=run.num_steps)}")
    fig.update_layout(
        margin=dict(b=90),
        updatemenus=[dict(type="buttons", direction="left", x=0, y=-0.02, xanchor="left", yanchor="top",
                          showactive=False, buttons=[
                              dict(label=T.ANIMATION_PLAY, method="animate",
                                   args=[None, dict(frame=dict(duration=700, redraw=True), fromcurrent=True,
                                                    transition=dict(duration=0))]),
                              dict(label=T.ANIMATION_PAUSE, method="animate",
                                   args=[[None], dict(frame=dict(duration=0, redraw=False), mode="immediate")]),
                          ])],
        sliders=[dict(active=0, x=0.12, len=0.88, y=-0.02, yanchor="top", currentvalue=dict(prefix=T.ANIMATION_STEP),
                      steps=[dict(label=str(k), method="animate",
                                  args=[[str(k)], dict(frame=dict(duration=0, redraw=True), mode="immediate")])
                             for k in range(run.num_steps + 1)])],
    )
    return fig
