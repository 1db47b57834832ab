"""Figures of the radix page: the radix tree beside the hash chain, and the reuse per request.

Data in (``RadixComparison`` from kvviz.analysis), ``go.Figure`` out; nothing recomputed.
"""

from __future__ import annotations

import math
from html import escape

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from kvviz.analysis.radix_compare import ChainNode, RadixComparison
from kvviz.mirror.hashing import short_hash
from kvviz.mirror.radix_engine import RadixState
from kvviz_app.shell.cells import DARK_FILLS, excerpt, legend_entries, sized_layout
from kvviz_app.shell.i18n import texts
from kvviz_app.shell.style import (
    AMBER,
    BLUE,
    GREEN,
    INK,
    LIGHT_BLUE,
    MUTED,
    OUTLINE_GREY,
    PALE_GREY,
    RED,
    TEAL,
)

R = texts("radix")

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
                                    text=excerpt(text, 60) if text else "")
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
    legend_entries(fig, legend, row=1, col=1)
    if not nodes:
        fig.add_annotation(x=0.5, y=0.5, xref="x domain", yref="y domain", text=R.TREE_EMPTY, showarrow=False)
    if not chain_items:
        fig.add_annotation(x=0.5, y=0.5, xref="x2 domain", yref="y2 domain", text=R.CHAIN_EMPTY, showarrow=False)
    fig = sized_layout(fig, 190 + 44 * (heights[0] + heights[1]))
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
    fig = sized_layout(fig, 180 + 66 * max(len(requests), 1), R.REUSE_TITLE.format(k=k))
    # the legend under the axis (the request labels leave the plot narrow, so it may stack five rows),
    # the title alone on top; Plotly anchors a title's first line, so each wrapped line needs its own room
    extra = 20 * (fig.layout.title.text or "").count("<br>")
    fig.update_layout(legend=dict(orientation="h", yref="container", y=0, yanchor="bottom", x=0, xanchor="left"),
                      margin=dict(t=56 + extra, b=120),
                      title=dict(y=1.0, yref="container", yanchor="top", pad=dict(t=8 + extra)))
    return fig


R_COLOURS = {"reused": GREEN, "tail": "#fb923c", "evicted": RED, "skipped": PALE_GREY,
             "computed": "#cbd5e1", "refused": "#111827"}
