"""Figures of the "Your traffic" page: the hit-rate curve, hit rate over time, reuse distances, the
shared-prefix tree, the block-pool comparison. Data in (kvviz.analysis and kvviz.analysis.workload results), ``go.Figure`` out."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from kvviz.analysis.workload.report import CurvePoint, PrefixNode
from kvviz_app.shell.i18n import current_lang, localize, texts
from kvviz_app.shell.style import (
    AMBER,
    BLUE,
    GREEN,
    INK,
    MUTED,
    ORANGE,
    PALE_GREY,
    PURPLE,
    TEAL,
    base_layout,
)

T = texts("workload")


def _x(point: CurvePoint, unit: str) -> float:
    if unit == "tokens":
        return point.capacity_tokens
    if unit == "bytes" and point.capacity_bytes is not None:
        return point.capacity_bytes
    return point.capacity_blocks


def curve_figure(points: Sequence[CurvePoint], infinite_rate: float, unit: str = "blocks",
                 marks: Sequence[tuple[str, CurvePoint]] = (), needs: Sequence[tuple[int, CurvePoint]] = (),
                 ttl_label: str | None = None) -> go.Figure:
    """Hit rate against capacity (log x), the infinite-cache line, labelled marks and 50%/90% markers."""
    fig = go.Figure()
    xs = [_x(p, unit) for p in points]
    fig.add_trace(go.Scatter(x=xs, y=[p.hit_rate for p in points], mode="lines", name=T.CURVE_LRU,
                             line=dict(color=BLUE, width=3),
                             hovertemplate="%{x:,.4s}: %{y:.1%}<extra></extra>"))
    if ttl_label is not None:
        fig.add_trace(go.Scatter(x=xs, y=[p.ttl_hit_rate for p in points], mode="lines",
                                 name=T.CURVE_TTL.format(ttl=ttl_label), line=dict(color=ORANGE, width=2, dash="dot"),
                                 hovertemplate="%{x:,.4s}: %{y:.1%}<extra></extra>"))
    fig.add_hline(y=infinite_rate, line=dict(color=GREEN, dash="dash"),
                  annotation=dict(text=T.CURVE_INFINITE.format(rate=infinite_rate), font=dict(color=GREEN)),
                  annotation_position="bottom right")
    for pct, p in needs:
        fig.add_trace(go.Scatter(x=[_x(p, unit)], y=[p.hit_rate], mode="markers+text", showlegend=False,
                                 marker=dict(color=TEAL, size=10, symbol="diamond"),
                                 text=[T.CURVE_NEED.format(pct=pct)], textposition="top left",
                                 textfont=dict(color=TEAL), hovertemplate="%{x:,.4s}: %{y:.1%}<extra></extra>"))
    for label, p in marks:
        x = _x(p, unit)
        fig.add_vline(x=x, line=dict(color=PURPLE, dash="dot", width=1))
        fig.add_trace(go.Scatter(x=[x], y=[p.hit_rate], mode="markers+text", showlegend=False,
                                 marker=dict(color=PURPLE, size=9), textposition="bottom right",
                                 text=[T.CURVE_MARK.format(label=label, rate=p.hit_rate)],
                                 textfont=dict(color=PURPLE), hovertemplate="%{x:,.4s}: %{y:.1%}<extra></extra>"))
    # dtick 1: a label per power of ten only (Plotly's small "2" and "5" labels are below 12 px)
    fig.update_xaxes(type="log", title=T.CURVE_AXIS.get(unit, unit), gridcolor=PALE_GREY, dtick=1,
                     exponentformat="SI" if unit == "bytes" else "none")
    fig.update_yaxes(title=T.CURVE_Y, tickformat=".0%", range=[0, 1.02], gridcolor=PALE_GREY)
    return base_layout(fig, 420, T.CURVE_TITLE)


def timeline_figure(xs: Sequence[float], lru: Sequence[float], infinite: Sequence[float], capacity: int,
                    x_title: str) -> go.Figure:
    """Hit rate per time slice at one capacity, next to the infinite cache."""
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=list(xs), y=list(infinite), mode="lines", name=T.TIMELINE_INFINITE,
                             line=dict(color=GREEN, dash="dash"), hovertemplate="%{x:.1f}: %{y:.1%}<extra></extra>"))
    fig.add_trace(go.Scatter(x=list(xs), y=list(lru), mode="lines+markers", name=T.TIMELINE_LRU.format(cap=capacity),
                             line=dict(color=BLUE), marker=dict(size=4),
                             hovertemplate="%{x:.1f}: %{y:.1%}<extra></extra>"))
    fig.update_xaxes(title=x_title, gridcolor=PALE_GREY)
    fig.update_yaxes(title=T.CURVE_Y, tickformat=".0%", range=[0, 1.02], gridcolor=PALE_GREY)
    return base_layout(fig, 320, T.TIMELINE_TITLE)


def histogram_figure(bins: Sequence[tuple[int, int, int]]) -> go.Figure:
    """Block lookups per log-spaced reuse-distance bin."""
    shown = [(lo, hi, c) for lo, hi, c in bins]
    labels = [T.BIN_ONE.format(lo=lo) if lo == hi else T.BIN_RANGE.format(lo=lo, hi=hi) for lo, hi, _ in shown]
    fig = go.Figure(go.Bar(x=labels, y=[c for _, _, c in shown], marker_color=AMBER,
                           hovertemplate="%{x}: %{y:,}<extra></extra>"))
    fig.update_xaxes(title=T.HIST_X, type="category", tickangle=-90)  # upright labels: no two boxes overlap
    fig.update_yaxes(title=T.HIST_Y, gridcolor=PALE_GREY)
    return base_layout(fig, 340, T.HIST_TITLE, legend=None)


def prefix_tree_figure(nodes: Sequence[PrefixNode]) -> go.Figure:
    """Icicle of shared-prefix blocks under one root: each block under the block before it, sized by the
    prompt tokens it saved (a child never saves more than its parent, so sizes nest)."""
    roots = [n for n in nodes if n.parent < 0]
    ids = ["root"] + [str(n.block) for n in nodes]
    parents = [""] + ["root" if n.parent < 0 else str(n.parent) for n in nodes]
    labels = [T.PREFIX_ROOT] + [T.PREFIX_NODE.format(label=n.label, depth=n.depth) for n in nodes]
    values = [sum(n.saved_tokens for n in roots)] + [n.saved_tokens for n in nodes]
    hits = [[sum(n.hits for n in roots)]] + [[n.hits] for n in nodes]
    colors = [PALE_GREY] + [TEAL if n.depth == 1 else "#5eead4" if n.depth == 2 else "#99f6e4" for n in nodes]
    child_sum: dict[str, int] = {}
    for parent, value in zip(parents, values, strict=True):
        child_sum[parent] = child_sum.get(parent, 0) + value
    nested = all(child_sum.get(i, 0) <= v for i, v in zip(ids, values, strict=True))  # odd hash_ids traces only
    fig = go.Figure(go.Icicle(
        ids=ids, parents=parents, labels=labels, values=values, customdata=hits,
        branchvalues="total" if nested else "remainder",
        hovertemplate=T.PREFIX_HOVER, marker=dict(colors=colors, line=dict(color="white", width=1)),
        tiling=dict(orientation="h"), maxdepth=6, textfont=dict(color=INK),
    ))
    return base_layout(fig, 520, None, legend=None, top=8)


def pool_figure(lru_rate: float, pool_rate: float, infinite_rate: float) -> go.Figure:
    """Two horizontal bars: pure LRU and the block pool at the same capacity, with the infinite line.
    Horizontal, so the two names stack on the y axis and never collide in a narrow column."""
    fig = go.Figure(go.Bar(y=[T.POOL_LRU, T.POOL_VLLM], x=[lru_rate, pool_rate], orientation="h",
                           marker_color=[BLUE, INK],
                           text=[T.RATE_VALUE.format(rate=lru_rate), T.RATE_VALUE.format(rate=pool_rate)],
                           textposition="auto", insidetextanchor="end",
                           hovertemplate="%{y}: %{x:.2%}<extra></extra>"))
    fig.add_vline(x=infinite_rate, line=dict(color=GREEN, dash="dash"), annotation_position="top",
                  annotation=dict(text=T.CURVE_INFINITE.format(rate=infinite_rate), font=dict(color=GREEN)))
    fig.update_xaxes(title=T.CURVE_Y, tickformat=".0%", range=[0, 1.02], gridcolor=PALE_GREY, dtick=0.25)
    fig.update_yaxes(tickfont=dict(color=MUTED), autorange="reversed", automargin=True)
    return base_layout(fig, 240, None, legend=None, top=28)


ROUTE_COLORS = {"round_robin": BLUE, "least_loaded": AMBER, "prefix": TEAL, "consistent_hash": PURPLE}


def routing_capacity_figure(rows: Sequence[dict], single: Sequence[tuple[int, float]], replicas: int) -> go.Figure:
    """Hit rate against the total capacity (x: blocks, log) at ``replicas`` replicas, one line per policy,
    and one cache of the same total (dashed grey) for reference."""
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[c for c, _ in single], y=[r for _, r in single], name=T.ROUTE_ONE_CACHE,
                             mode="lines", line=dict(color=MUTED, width=2, dash="dash"),
                             hovertemplate="C=%{x:,}: %{y:.1%}<extra></extra>"))
    for policy, label in T.ROUTE_POLICIES.items():
        mine = sorted((r for r in rows if r["policy"] == policy), key=lambda r: r["capacity_blocks"])
        if mine:
            fig.add_trace(go.Scatter(x=[r["capacity_blocks"] * replicas for r in mine],
                                     y=[r["hit_rate"] for r in mine], name=label, mode="lines+markers",
                                     line=dict(color=ROUTE_COLORS[policy], width=2),
                                     hovertemplate="C=%{x:,}: %{y:.1%}<extra></extra>"))
    # dtick 1: a label per power of ten only (Plotly's small "2" and "5" labels are below 12 px)
    fig.update_xaxes(title=T.ROUTE_CAP_X, type="log", dtick=1, gridcolor=PALE_GREY)
    fig.update_yaxes(title=T.CURVE_Y, tickformat=".0%", rangemode="tozero", gridcolor=PALE_GREY)
    below = dict(orientation="h", yref="container", y=0, yanchor="bottom", xanchor="left", x=0)
    return base_layout(fig, 400, T.ROUTE_CAP_TITLE.format(n=replicas), legend=below,
                       margin=dict(l=10, r=10, t=48, b=110))


def routing_figure(rows: Sequence[dict], metric: str, title: str, y_title: str) -> go.Figure:
    """One line per routing policy: ``metric`` (``hit_rate`` or ``load_imbalance``) against replicas."""
    colors = ROUTE_COLORS
    fig = go.Figure()
    for policy, label in T.ROUTE_POLICIES.items():
        mine = sorted((r for r in rows if r["policy"] == policy), key=lambda r: r["replicas"])
        if not mine:
            continue
        fmt = "%{y:.1%}" if metric == "hit_rate" else "%{y:.2f}"
        fig.add_trace(go.Scatter(x=[r["replicas"] for r in mine], y=[r[metric] for r in mine], name=label,
                                 mode="lines+markers", line=dict(color=colors[policy], width=2),
                                 hovertemplate=f"N=%{{x}}: {fmt}<extra></extra>"))
    fig.update_xaxes(title=T.ROUTE_X, type="log", dtick=0.30103, gridcolor=PALE_GREY)
    if metric == "hit_rate":
        fig.update_yaxes(title=T.CURVE_Y, tickformat=".0%", rangemode="tozero", gridcolor=PALE_GREY)
    else:
        fig.update_yaxes(title=y_title, rangemode="tozero", gridcolor=PALE_GREY)
    # at the bottom of the figure, inside its margin: never over the tick labels or the axis title
    below = dict(orientation="h", yref="container", y=0, yanchor="bottom", xanchor="left", x=0)
    return base_layout(fig, 400, title, legend=below, margin=dict(l=10, r=10, t=48, b=110))


TIER_COLORS = (BLUE, TEAL, AMBER, PURPLE, ORANGE)


def _blocks(n: int) -> str:
    return localize(f"{n:,}", current_lang())


def tier_figure(rows: Sequence[dict], hosts: Sequence[int]) -> go.Figure:
    """Hit rate against the device capacity (log x): the device tier alone, and for each host size the total
    (solid) and the host tier's share (dotted). ``rows`` are ``TwoTierGrid.rows()``."""
    fig = go.Figure()
    hover = "C=%{x:,}: %{y:.1%}<extra></extra>"
    base = sorted((r for r in rows if r["host_blocks"] == hosts[0]), key=lambda r: r["device_blocks"])
    fig.add_trace(go.Scatter(x=[r["device_blocks"] for r in base], y=[r["device_hit_rate"] for r in base],
                             name=T.TIER_DEVICE, mode="lines+markers", line=dict(color=INK, width=2, dash="dash"),
                             hovertemplate=hover))
    for i, host in enumerate(h for h in hosts if h > 0):
        mine = sorted((r for r in rows if r["host_blocks"] == host), key=lambda r: r["device_blocks"])
        color = TIER_COLORS[i % len(TIER_COLORS)]
        xs = [r["device_blocks"] for r in mine]
        fig.add_trace(go.Scatter(x=xs, y=[r["hit_rate"] for r in mine], mode="lines+markers",
                                 name=T.TIER_TOTAL.format(host=_blocks(host)), line=dict(color=color, width=3),
                                 hovertemplate=hover))
        fig.add_trace(go.Scatter(x=xs, y=[r["host_hit_rate"] for r in mine], mode="lines",
                                 name=T.TIER_HOST_ONLY.format(host=_blocks(host)), line=dict(color=color, width=2, dash="dot"),
                                 hovertemplate=hover))
    fig.update_xaxes(title=T.TIER_X, type="log", dtick=1, gridcolor=PALE_GREY)
    fig.update_yaxes(title=T.TIER_Y, tickformat=".0%", rangemode="tozero", gridcolor=PALE_GREY)
    below = dict(orientation="h", yref="container", y=0, yanchor="bottom", xanchor="left", x=0)
    return base_layout(fig, 460, T.TIER_HIT_TITLE, legend=below, margin=dict(l=10, r=10, t=48, b=130))


def tier_load_figure(rows: Sequence[dict], hosts: Sequence[int], per_second: bool) -> go.Figure:
    """The host tier's loads against the device capacity (log x), one line per host size: bytes a second of
    trace time when ``per_second``, else blocks loaded."""
    fig = go.Figure()
    key = "load_bytes_per_s" if per_second else "host_blocks_loaded"
    for i, host in enumerate(h for h in hosts if h > 0):
        mine = sorted((r for r in rows if r["host_blocks"] == host), key=lambda r: r["device_blocks"])
        fig.add_trace(go.Scatter(x=[r["device_blocks"] for r in mine], y=[r[key] or 0 for r in mine],
                                 mode="lines+markers", name=T.TIER_LOAD_HOST.format(host=_blocks(host)),
                                 line=dict(color=TIER_COLORS[i % len(TIER_COLORS)], width=2),
                                 hovertemplate="C=%{x:,}: %{y:,.4s}<extra></extra>"))
    fig.update_xaxes(title=T.TIER_X, type="log", dtick=1, gridcolor=PALE_GREY)
    fig.update_yaxes(title=T.TIER_LOAD_Y if per_second else T.TIER_LOAD_Y_BLOCKS, rangemode="tozero",
                     gridcolor=PALE_GREY, tickformat="~s")
    below = dict(orientation="h", yref="container", y=0, yanchor="bottom", xanchor="left", x=0)
    return base_layout(fig, 380, T.TIER_LOAD_TITLE, legend=below, margin=dict(l=10, r=10, t=48, b=100))
