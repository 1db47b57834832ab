"""Figures of the engine pages: block tables, the physical pool, the LRU free queue, counters over time,
an animated pool, and (radix page) the radix tree beside the hash chain and the reuse per request.

Data in (``StepView``, ``ScenarioRun``, ``RadixComparison`` from kvviz.core), ``go.Figure`` out. Nothing
is recomputed here: every colour and number is read from the replayed state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from kvviz.core.hashing import short_hash
from kvviz.core.radix_compare import ChainNode, RadixComparison, RadixState
from kvviz.core.scenario import ScenarioRun, StepView
from kvviz.figures.style import (
    AMBER,
    BLUE,
    DARK_RED,
    FREE_GREY,
    GREEN,
    INK,
    LIGHT_BLUE,
    MUTED,
    OUTLINE_GREY,
    PALE_GREY,
    PURPLE,
    RED,
    TEAL,
    base_layout,
)
from kvviz.text import engine as T
from kvviz.text import radix as R

SOURCE_COLOURS = {"hit": GREEN, "new": BLUE, "partial": LIGHT_BLUE, "skipped": PALE_GREY}
POOL_COLOURS = {"used": BLUE, "shared": TEAL, "cached": AMBER, "free": FREE_GREY, "null": PALE_GREY}
CELL_TEXT = 12  # px: chart text stays readable on a projector
EVENT_COLOURS = {"hit": GREEN, "touch": GREEN, "allocate": "#1d4ed8", "cache": PURPLE,
                 "free": MUTED, "evict": RED}
TABLE_OUTLINES = {"touch": "#14532d", "hit": "#14532d", "allocate": "#1e3a8a"}  # dark: visible on their fills
# When a block saw several events in one step, the outline shows the most telling one.
EVENT_PRIORITY = ("evict", "touch", "hit", "allocate", "cache", "free")
DARK_FILLS = {GREEN, BLUE, TEAL, "#1d4ed8", "#0f766e", "#7c3aed", RED}
HASH_CHARS = 4  # pool cells are ~30 px wide at 1024 px: 4 hex digits fit at 12 px


def _layout(fig: go.Figure, height: int, title: str | None = None) -> go.Figure:
    return base_layout(fig, height, title, top=12, title_size=14, legend=None, hoverlabel=dict(align="left"))


def _legend_entries(fig: go.Figure, items: Sequence[tuple[str, str]], symbol: str = "square",
                    row: int | None = None, col: int | None = None) -> None:
    """Legend-only traces (the cells themselves are a heatmap, which has no legend)."""
    for name, colour in items:
        trace = go.Scatter(x=[None], y=[None], mode="markers", name=name, showlegend=True,
                           marker=dict(symbol=symbol, size=12, color=colour, line=dict(color=OUTLINE_GREY, width=1)))
        if row is None:
            fig.add_trace(trace)
        else:
            fig.add_trace(trace, row=row, col=col)


def _text_traces(fig: go.Figure, xs: list, ys: list, texts: list[str], fills: list[str], size: int = 12,
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


def _discrete_heatmap(z: list[list[int | None]], colours: Sequence[str], hover: list[list[str]],
                      x: Sequence | None = None, y: Sequence | None = None) -> go.Heatmap:
    n = len(colours)
    scale = []
    for i, c in enumerate(colours):
        scale += [[i / n, c], [(i + 1) / n, c]]
    return go.Heatmap(z=z, x=x, y=y, zmin=-0.5, zmax=n - 0.5, colorscale=scale, showscale=False, xgap=3, ygap=3,
                      hovertext=hover, hovertemplate="%{hovertext}<extra></extra>", hoverongaps=False)


def _excerpt(text: str, limit: int = 48) -> str:
    shown = text.replace("\n", "↵")
    if len(shown) > limit:
        shown = shown[: limit - 1] + "…"
    return escape(shown)


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
                text=_excerpt(cell.excerpt) if cell.excerpt else "",
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
        fig.add_trace(_discrete_heatmap(z, list(SOURCE_COLOURS.values()), hover))
        _text_traces(fig, xs, ys, texts, fills, size=12)
    _legend_entries(fig, [(T.SOURCE_LABELS[k], c) for k, c in SOURCE_COLOURS.items() if k != "skipped"
                          or any(c.block_id is None for r in requests for c in r.rows)])
    fig.update_layout(shapes=shapes)
    ticks = list(range(width))
    fig.update_xaxes(tickvals=ticks, ticktext=[T.AXIS_TOKENS.format(first=i * bs + 1, last=(i + 1) * bs)
                                               for i in ticks],
                     side="top", showgrid=False, zeroline=False, range=[-0.5, max(width, 4) - 0.5], tickfont=dict(size=12))
    fig.update_yaxes(tickvals=list(range(len(requests))), ticktext=labels, autorange="reversed", showgrid=False,
                     zeroline=False, range=[len(requests) - 0.5, -0.5] if requests else [0.5, -0.5])
    fig = _layout(fig, 110 + 46 * max(len(requests), 1), None)
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.02, x=0, xanchor="left"),
                      margin=dict(t=40, b=40))
    return fig


# ----------------------------------------------------------------------------- the pool


def pool_columns(num_blocks: int) -> int:
    """Cells per row of the pool grid: 8 for small pools, up to 16 for large ones."""
    return 8 if num_blocks <= 64 else 16


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
    fig = go.Figure(_discrete_heatmap(z, list(POOL_COLOURS.values()), hover))
    _text_traces(fig, xs, ys, texts, fills, size=CELL_TEXT)
    _legend_entries(fig, [(T.POOL_STATE_LABELS[k], c) for k, c in POOL_COLOURS.items()])
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
    fig = _layout(fig, 64 + 56 * rows + (40 if legend else 0), title)
    fig.update_layout(showlegend=legend,
                      legend=dict(orientation="h", yanchor="top", y=-0.02, x=0, xanchor="left", font=dict(size=12)),
                      margin=dict(b=50 if legend else 8))
    return fig


def jumped_to_head(view: StepView) -> list[int]:
    """Blocks this step freed without a hash: vLLM's ``free_blocks`` put them at the free-queue head."""
    return [b for e in view.events if e.kind.value == "free" for b in e.params.get("to_head", ())]


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
        return _layout(fig, 130, title)
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
    fig.add_trace(_discrete_heatmap(z, [POOL_COLOURS["cached"], POOL_COLOURS["free"]], hover))
    _text_traces(fig, xs, ys, texts, fills, size=CELL_TEXT)
    fig.add_shape(type="rect", x0=-0.5, x1=0.5, y0=-0.5, y1=0.5, line=dict(color=RED, width=3))
    fig.add_annotation(x=0, y=-0.5, yanchor="bottom", text="▼ " + T.QUEUE_HEAD, showarrow=False, xanchor="left",
                       xshift=-18, font=dict(color=RED, size=12))
    last_r, last_c = divmod(len(queue) - 1, per_row)
    fig.add_annotation(x=last_c, y=last_r + 0.5, yanchor="top", text=T.QUEUE_TAIL + " ▲", showarrow=False,
                       xanchor="right", xshift=18, font=dict(color=MUTED, size=12))
    for pos, bid in enumerate(queue):  # the move vLLM's free_blocks makes: unhashed blocks jump to the head
        if bid in jumped:
            r, c = divmod(pos, per_row)
            fig.add_shape(type="rect", x0=c - 0.47, x1=c + 0.47, y0=r - 0.45, y1=r + 0.45,
                          line=dict(color=PURPLE, width=3, dash="dot"))
    if jumped:
        fig.add_annotation(x=0, y=0, xref="paper", yref="paper", yanchor="top", xanchor="left", yshift=-4,
                           text="┅ " + T.QUEUE_JUMP_LEGEND, showarrow=False, font=dict(color=PURPLE, size=12))
    fig.update_xaxes(visible=False, range=[-0.6, per_row - 0.4])
    fig.update_yaxes(visible=False, autorange=False, range=[rows - 0.5 + 0.45, -0.5 - 0.45])
    fig = _layout(fig, 80 + 52 * rows + (22 if jumped else 0), title)
    if jumped:
        fig.update_layout(margin=dict(b=30))
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
    fig.add_vline(x=k, line=dict(color=INK, dash="dot"))
    fig.update_xaxes(title=T.TIMELINE_X, dtick=1 if run.num_steps <= 30 else None, showgrid=False)
    fig.update_yaxes(title=T.TIMELINE_Y, gridcolor="#eef0f3", rangemode="tozero", secondary_y=False)
    most = max(max(c["evictions"] for c in counters), 4)
    fig.update_yaxes(title=T.TIMELINE_Y2, showgrid=False, range=[0, most * 1.1], tickmode="linear", tick0=0,
                     dtick=math.ceil(most / 4), secondary_y=True, color=RED)
    fig = _layout(fig, 300, T.TIMELINE_TITLE)
    fig.update_layout(legend=dict(orientation="h", yanchor="bottom", y=1.0, x=1, xanchor="right"))
    return fig


def pool_animation_figure(run: ScenarioRun) -> go.Figure:
    """The pool grid with one Plotly animation frame per step (its own play button and slider)."""
    cols = pool_columns(run.scenario.num_blocks)
    frames = []
    first = None
    for k in range(run.num_steps + 1):
        view = run.view_at(k)
        z, hover, xs, ys, texts, fills, shapes, rows = _pool_grid(view.state, view.touched, cols)
        data = [_discrete_heatmap(z, list(POOL_COLOURS.values()), hover),
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
    fig = _layout(fig, 150 + 60 * rows, f"{T.ANIMATION_TITLE} · {T.STEP_HEADER.format(k=0, n=run.num_steps)}")
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


# ----------------------------------------------------------------------------- radix vs chain

RADIX_COLOURS = {"locked": "#0f766e", "evictable": AMBER, "inner": "#99f6e4"}
CHAIN_COLOURS = {"used": BLUE, "shared": TEAL, "cached": AMBER, "partial": LIGHT_BLUE}


def _tree_rows(items: dict, parent_of: dict, order_key) -> dict:
    """Rows for a left-to-right tree: each leaf gets its own row, a node sits on its first child's row
    so a chain without branching stays on one line. ``items`` maps key -> item."""
    children: dict = {}
    roots = []
    for key in items:
        parent = parent_of.get(key)
        if parent is None or parent not in items:
            roots.append(key)
        else:
            children.setdefault(parent, []).append(key)
    rows: dict = {}
    next_row = 0

    def visit(key) -> int:
        nonlocal next_row
        kids = sorted(children.get(key, []), key=order_key)
        if not kids:
            rows[key] = next_row
            next_row += 1
            return rows[key]
        first = None
        for kid in kids:
            r = visit(kid)
            first = r if first is None else first
        rows[key] = first
        return first

    for root in sorted(roots, key=order_key):
        visit(root)
    return rows


class _Bars:
    """Bars of one subplot drawn as layout shapes, with one hover trace and one label trace per text
    colour (a trace per bar would make the figure slow to build and to draw)."""

    def __init__(self, row: int) -> None:
        self.row = row
        self.xref, self.yref = ("x", "y") if row == 1 else (f"x{row}", f"y{row}")
        self.shapes: list[dict] = []
        self.hover: tuple[list, list, list] = ([], [], [])
        self.labels: dict[bool, tuple[list, list, list]] = {True: ([], [], []), False: ([], [], [])}

    def add(self, x0: float, x1: float, y: float, colour: str, label: str, hover: str, dashed: bool = False,
            outline: str | None = None) -> None:
        self.shapes.append(dict(type="rect", xref=self.xref, yref=self.yref, x0=x0, x1=x1, y0=y - 0.32, y1=y + 0.32,
                                fillcolor=colour, line=dict(color=outline or "white", width=2 if outline else 1,
                                                            dash="dash" if dashed else "solid"), layer="below"))
        for xi in (x0 + (x1 - x0) * f for f in (0.15, 0.5, 0.85)):
            self.hover[0].append(xi)
            self.hover[1].append(y)
            self.hover[2].append(hover)
        if label:
            xs, ys, ts = self.labels[colour in DARK_FILLS]
            xs.append((x0 + x1) / 2)
            ys.append(y)
            ts.append(label)

    def draw(self, fig: go.Figure) -> None:
        xs, ys, hs = self.hover
        fig.add_trace(go.Scatter(x=xs, y=ys, hovertext=hs, hoverinfo="text", mode="markers", showlegend=False,
                                 marker=dict(size=14, opacity=0)), row=self.row, col=1)
        for dark, (lx, ly, lt) in self.labels.items():
            if lx:
                fig.add_trace(go.Scatter(x=lx, y=ly, text=lt, mode="text", hoverinfo="skip", showlegend=False,
                                         textfont=dict(size=12, color="white" if dark else INK)), row=self.row, col=1)


def _links(segments, row: int) -> list[dict]:
    xref, yref = ("x", "y") if row == 1 else (f"x{row}", f"y{row}")
    return [dict(type="line", xref=xref, yref=yref, x0=x, x1=x, y0=y0, y1=y1, layer="below",
                 line=dict(color=OUTLINE_GREY, width=1.5)) for x, y0, y1 in segments]


def radix_chain_figure(comparison: RadixComparison, k: int) -> go.Figure:
    """The radix tree (top) and the pool's hash chain (bottom) after step ``k`` on one token axis:
    tree nodes are token runs that branch exactly where prompts diverge; chain blocks are whole
    ``block_size`` runs; dotted lines mark block boundaries in both."""
    state: RadixState = comparison.radix_states[k]
    chain = comparison.chain_at(k)
    bs = comparison.scenario.block_size
    nodes = {n.id: n for n in state.nodes if n.parent_id is not None}
    parents = {n.id: n.parent_id for n in nodes.values()}
    radix_rows = _tree_rows(nodes, parents, order_key=lambda i: i)
    chain_items = {n.block_id: n for n in chain}
    hash_to_block: dict[bytes, int] = {}
    for n in chain:
        if n.hash is not None:
            hash_to_block.setdefault(n.hash, n.block_id)
    chain_parent = {n.block_id: hash_to_block.get(n.parent) if n.parent is not None else None for n in chain}
    chain_rows = _tree_rows(chain_items, chain_parent, order_key=lambda b: (chain_items[b].index, b))
    heights = [max(max(radix_rows.values(), default=0) + 1, 1), max(max(chain_rows.values(), default=0) + 1, 1)]
    max_x = max([bs] + [n.start + n.num_tokens for n in nodes.values()] + [c.end for c in chain])
    x_end = math.ceil(max_x / bs) * bs
    px_per_token = 900 / max(x_end, 1)  # a typical plot width; only decides which labels fit in their bar

    def fits(label: str, tokens: int) -> bool:
        return tokens * px_per_token >= 6.2 * len(label) + 6

    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.14, row_heights=heights,
                        subplot_titles=(R.TREE_TITLE.format(k=k, tokens=state.tree_tokens, capacity=state.capacity),
                                        R.CHAIN_TITLE.format(k=k, blocks=sum(1 for c in chain if c.hash is not None),
                                                             bs=bs)))
    lru_rank = {nid: i for i, nid in enumerate(state.lru_leaves)}
    tree_bars, chain_bars = _Bars(1), _Bars(2)
    segments = []
    for nid, node in nodes.items():
        y = radix_rows[nid]
        x0, x1 = node.start, node.start + node.num_tokens
        status = "locked" if node.lock_ref > 0 else ("evictable" if node.evictable else "inner")
        label = R.NODE_LABEL.format(id=nid, tokens=node.num_tokens, lock=node.lock_ref)
        if nid in lru_rank:
            label += R.NODE_LRU.format(rank=lru_rank[nid] + 1)
        if node.start == 0 and node.extra_key:
            label = R.NODE_SALT.format(salt=escape(node.extra_key)) + label
        for option in (R.NODE_SHORT.format(id=nid) + (R.NODE_LRU.format(rank=lru_rank[nid] + 1) if nid in lru_rank
                                                       else R.NODE_TOKENS.format(tokens=node.num_tokens)),
                       R.NODE_SHORT.format(id=nid), ""):
            if fits(label, node.num_tokens):
                break
            label = option
        text = comparison.text_of(node.start, node.tokens_preview, node.num_tokens)
        hover = R.HOVER_NODE.format(id=nid, first=x0 + 1, last=x1, tokens=node.num_tokens, lock=node.lock_ref,
                                    access=node.last_access, status=R.NODE_STATUS[status],
                                    lru=(R.HOVER_LRU.format(rank=lru_rank[nid] + 1) if nid in lru_rank else ""),
                                    salt=escape(node.extra_key) if node.extra_key else R.NO_SALT,
                                    text=_excerpt(text, 60) if text else "")
        tree_bars.add(x0, x1, y, RADIX_COLOURS[status], label, hover)
        parent = node.parent_id
        if parent in nodes and radix_rows[parent] != y:
            segments.append((x0, radix_rows[parent], y))
    shapes = _links(segments, 1)
    segments = []
    for bid, blk in chain_items.items():
        y = chain_rows[bid]
        if blk.hash is None:
            key = "partial"
        elif blk.ref_cnt > 1:
            key = "shared"
        elif blk.ref_cnt == 1:
            key = "used"
        else:
            key = "cached"
        label = R.BLOCK_LABEL.format(block=bid, hash=short_hash(blk.hash, 4) if blk.hash else R.PARTIAL_SHORT,
                                     ref=blk.ref_cnt)
        if blk.queue_pos is not None:
            label += R.BLOCK_QUEUE.format(pos=blk.queue_pos + 1)
        if not fits(label, blk.end - blk.start):
            label = f"#{bid}" if blk.queue_pos is None else f"#{bid} Q{blk.queue_pos + 1}"
        orphan = blk.parent is not None and chain_parent.get(bid) is None
        chain_bars.add(blk.start, blk.end, y, CHAIN_COLOURS[key], label, _chain_hover(blk, key), dashed=orphan,
                       outline=RED if orphan else None)
        parent = chain_parent.get(bid)
        if parent is not None and chain_rows[parent] != y:
            segments.append((blk.start, chain_rows[parent], y))
    shapes += _links(segments, 2)
    for row in (1, 2):
        xref, yref = ("x", "y domain") if row == 1 else ("x2", "y2 domain")
        shapes += [dict(type="line", xref=xref, yref=yref, x0=b, x1=b, y0=0, y1=1, layer="below",
                        line=dict(color="#d1d5db", width=1, dash="dot")) for b in range(0, x_end + 1, bs)]
    tree_bars.draw(fig)
    chain_bars.draw(fig)
    fig.update_layout(shapes=shapes + tree_bars.shapes + chain_bars.shapes)
    for row, n in ((1, heights[0]), (2, heights[1])):
        fig.update_yaxes(visible=False, autorange=False, range=[n - 0.5, -0.6], row=row, col=1)
        fig.update_xaxes(range=[-1, x_end + 1], tickvals=list(range(0, x_end + 1, bs)), showgrid=False, row=row,
                         col=1, showticklabels=row == 2, tickfont=dict(size=12))
    fig.update_xaxes(title=dict(text=R.AXIS_TOKENS, font=dict(size=12)), row=2, col=1)
    legend = [(R.LEGEND_TREE[s], c) for s, c in RADIX_COLOURS.items()]
    legend += [(R.LEGEND_CHAIN[s], c) for s, c in CHAIN_COLOURS.items()]
    _legend_entries(fig, legend, row=1, col=1)
    if not nodes:
        fig.add_annotation(x=0.5, y=0.5, xref="x domain", yref="y domain", text=R.TREE_EMPTY, showarrow=False)
    if not chain_items:
        fig.add_annotation(x=0.5, y=0.5, xref="x2 domain", yref="y2 domain", text=R.CHAIN_EMPTY, showarrow=False)
    fig = _layout(fig, 190 + 44 * (heights[0] + heights[1]))
    fig.update_layout(legend=dict(orientation="h", yanchor="bottom", y=1.06, x=1, xanchor="right", font=dict(size=12)),
                      margin=dict(t=100, b=40))
    for ann in fig.layout.annotations[:2]:
        ann.update(x=0, xanchor="left", font=dict(size=13))
    return fig


def _chain_hover(blk: ChainNode, key: str) -> str:
    return R.HOVER_BLOCK.format(block=blk.block_id, first=blk.start + 1, last=blk.end, index=blk.index,
                                status=R.BLOCK_STATUS[key], ref=blk.ref_cnt,
                                hash=short_hash(blk.hash, 16) or R.PARTIAL_HASH,
                                parent=short_hash(blk.parent, 16) if blk.parent else R.NONE_HASH_LABEL,
                                queue=(R.HOVER_QUEUE_POS.format(pos=blk.queue_pos + 1) if blk.queue_pos is not None
                                       else ""),
                                request=escape(blk.request_id or "?"))


def reuse_figure(comparison: RadixComparison, k: int) -> go.Figure:
    """For every request that arrived by step ``k``: what the radix tree, the block pool and the
    sliding-window search reuse (token axis), with the partial tail the block pool cannot reuse."""
    requests = comparison.requests_until(k)
    bs = comparison.scenario.block_size
    fig = go.Figure()
    cats: dict[str, dict[str, list]] = {key: {"y0": [], "y1": [], "x": [], "base": [], "hover": []}
                                        for key in R.REUSE_PARTS}
    ylab0: list[str] = []
    ylab1: list[str] = []

    def add(part: str, req_label: str, engine: str, start: int, end: int, hover: str) -> None:
        if end <= start:
            return
        c = cats[part]
        c["y0"].append(req_label)
        c["y1"].append(R.ENGINE_LABELS[engine])
        c["base"].append(start)
        c["x"].append(end - start)
        c["hover"].append(hover)

    for r in reversed(requests):
        label = R.REQUEST_LABEL.format(id=r.request_id, step=r.step)
        n = r.num_tokens
        for engine in ("window", "pool", "radix"):
            ylab0.append(label)
            ylab1.append(R.ENGINE_LABELS[engine])
        # radix
        if r.radix_tokens is None:
            add("refused", label, "radix", 0, n, R.HOVER_REFUSED)
        else:
            add("reused", label, "radix", 0, r.radix_tokens, R.HOVER_PART["reused"].format(n=r.radix_tokens))
            add("computed", label, "radix", r.radix_tokens, n, R.HOVER_PART["computed"].format(n=n - r.radix_tokens))
        # pool
        if r.pool_tokens is None:
            add("refused", label, "pool", 0, n, R.HOVER_REFUSED)
        else:
            p = r.pool_tokens
            for b in range(0, p, bs):
                add("reused", label, "pool", b, b + bs, R.HOVER_BLOCK_HIT.format(first=b + 1, last=b + bs))
            aligned = r.aligned_radix_tokens if r.radix_tokens is not None else p
            lost_start = max(p, aligned) if r.radix_tokens is not None else p
            if r.radix_tokens is not None and aligned > p:
                add("evicted", label, "pool", p, aligned, R.HOVER_PART["evicted"].format(n=aligned - p))
            if r.radix_tokens is not None and r.radix_tokens > lost_start:
                add("tail", label, "pool", lost_start, r.radix_tokens,
                    R.HOVER_PART["tail"].format(n=r.radix_tokens - lost_start, bs=bs))
                add("computed", label, "pool", r.radix_tokens, n, R.HOVER_PART["computed"].format(n=n - r.radix_tokens))
            else:
                add("computed", label, "pool", max(p, lost_start), n, R.HOVER_PART["computed"].format(n=n - max(p, lost_start)))
        # window
        if r.window_tokens is None:
            add("refused", label, "window", 0, n, R.HOVER_REFUSED)
        else:
            ids = r.window_block_ids
            for i, bid in enumerate(ids):
                if bid is None:
                    add("skipped", label, "window", i * bs, (i + 1) * bs, R.HOVER_PART["skipped"].format(first=i * bs + 1,
                                                                                                        last=(i + 1) * bs))
                else:
                    add("reused", label, "window", i * bs, (i + 1) * bs,
                        R.HOVER_BLOCK_HIT.format(first=i * bs + 1, last=(i + 1) * bs))
            add("computed", label, "window", r.window_tokens, n, R.HOVER_PART["computed"].format(n=n - r.window_tokens))
    if ylab0:  # fixes the row order (a multicategory axis orders rows by first appearance)
        fig.add_trace(go.Bar(y=[ylab0, ylab1], x=[0] * len(ylab0), orientation="h", showlegend=False,
                             hoverinfo="skip", marker=dict(color="rgba(0,0,0,0)")))
    for part, c in cats.items():
        if not c["x"]:
            continue
        fig.add_trace(go.Bar(
            y=[c["y0"], c["y1"]], x=c["x"], base=c["base"], orientation="h", name=R.REUSE_PARTS[part],
            marker=dict(color=R_COLOURS[part], line=dict(color="white", width=1),
                        pattern=dict(shape="/" if part in ("skipped", "tail") else "", fillmode="overlay",
                                     fgcolor=MUTED if part == "skipped" else "#9a3412", size=6, solidity=0.25)),
            hovertext=c["hover"], hovertemplate="%{hovertext}<extra></extra>",
        ))
    fig.update_layout(barmode="overlay", bargap=0.25)
    fig.update_xaxes(title=R.AXIS_TOKENS, gridcolor="#eef0f3", dtick=bs, zeroline=False)
    fig.update_yaxes(type="multicategory")
    if not requests:
        fig.add_annotation(x=0.5, y=0.5, xref="paper", yref="paper", text=R.REUSE_EMPTY, showarrow=False)
        fig.update_yaxes(visible=False)
    fig = _layout(fig, 160 + 66 * max(len(requests), 1), R.REUSE_TITLE.format(k=k))
    # legend under the title, left-aligned, so neither covers the other when it wraps
    fig.update_layout(legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0, xanchor="left"),
                      margin=dict(t=110), title=dict(y=1.0, yref="container", yanchor="top", pad=dict(t=8)))
    return fig


R_COLOURS = {"reused": GREEN, "tail": "#fb923c", "evicted": RED, "skipped": PALE_GREY,
             "computed": "#cbd5e1", "refused": "#111827"}
