"""Figures of the KV-bytes calculator: head sharing, layer kinds, bytes per token across models,
naive vs exact, memory against GPU budgets, contiguous vs paged allocation.

Every builder takes kvviz.analysis.sizes.kvsize objects (or plain numbers) and returns a ``go.Figure``;
nothing is recomputed here that kvsize already computes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import plotly.graph_objects as go

from kvviz.analysis.sizes import kv_capacity, kv_formula
from kvviz.analysis.sizes.kv_capacity import PagingComparison
from kvviz.analysis.sizes.kvsize import LayerKind, ModelShape
from kvviz.util import units
from kvviz.util.units import format_bytes, format_exact
from kvviz_app.shell.i18n import current_lang, localize, texts
from kvviz_app.shell.style import BLUE, FREE_GREY, GREEN, INK, MUTED, ORANGE, PURPLE, RED, TEAL, base_layout

T = texts("calculator")

GREY = "#a3a3a3"
LIGHT_BLUE = "#bfdbfe"
GROUP_COLOURS = (BLUE, RED, GREEN, PURPLE, "#ea580c", "#0891b2", "#ca8a04", "#db2777")
KIND_COLOURS = {LayerKind.FULL: BLUE, LayerKind.SLIDING: TEAL, LayerKind.STATE: GREY}

MAX_HEADS_DRAWN = 128


def _loc_bytes(value) -> str:
    """units.format_bytes in the session's language (separators, КиБ/МиБ/ГиБ)."""
    return localize(format_bytes(value), current_lang())


def _loc_exact(value) -> str:
    return localize(format_exact(value), current_lang())


def _loc_value(value) -> str:
    return localize(units.format_value(value), current_lang())


def _positions(n: int) -> list[float]:
    if n == 1:
        return [0.5]
    return [i / (n - 1) for i in range(n)]


def kv_head_of(query_head: int, num_heads: int, num_kv_heads: int) -> int:
    """The KV head a query head reads: consecutive groups of ``heads / kv_heads`` (uneven if not divisible)."""
    return query_head * num_kv_heads // num_heads


def head_sharing_figure(shape: ModelShape) -> go.Figure:
    """Which query heads read which KV head (MHA / GQA / MQA), or the single latent (MLA)."""
    heads = shape.num_heads
    drawn = min(heads, MAX_HEADS_DRAWN)
    qx = _positions(drawn)
    small = drawn > 32
    fig = go.Figure()
    if shape.mla is not None:
        kv_count, kv_labels = 1, [T.FIG_LATENT.format(rank=shape.mla.kv_lora_rank, rope=shape.mla.qk_rope_head_dim)]
        owner = [0] * drawn
    else:
        drawn_kv = min(shape.num_kv_heads, MAX_HEADS_DRAWN)
        kv_count = drawn_kv
        kv_labels = [f"KV{j}" for j in range(drawn_kv)]
        owner = [min(kv_head_of(i, heads, shape.num_kv_heads), drawn_kv - 1) for i in range(drawn)]
    kx = _positions(kv_count)
    for j in range(kv_count):
        xs: list[float | None] = []
        ys: list[float | None] = []
        for i in range(drawn):
            if owner[i] == j:
                xs += [qx[i], kx[j], None]
                ys += [1.0, 0.0, None]
        colour = GROUP_COLOURS[j % len(GROUP_COLOURS)]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(color=colour, width=1 if small else 1.6),
                                 opacity=0.55, hoverinfo="skip", showlegend=False))
    q_colours = [GROUP_COLOURS[o % len(GROUP_COLOURS)] for o in owner]
    fig.add_trace(go.Scatter(
        x=qx, y=[1.0] * drawn, mode="markers+text" if not small else "markers",
        marker=dict(symbol="square", size=8 if small else 20, color=q_colours, line=dict(color="white", width=1)),
        text=_sparse_labels([f"Q{i}" for i in range(drawn)]), textposition="top center", textfont=dict(size=12),
        hovertext=[T.FIG_HOVER_QUERY.format(i=i, kv=kv_labels[owner[i]]) for i in range(drawn)],
        hoverinfo="text", showlegend=False,
    ))
    kv_colours = [GROUP_COLOURS[j % len(GROUP_COLOURS)] for j in range(kv_count)]
    kv_small = kv_count > 32
    fig.add_trace(go.Scatter(
        x=kx, y=[0.0] * kv_count,
        mode="markers" if kv_small else "markers+text",
        marker=dict(symbol="square", size=8 if kv_small else (34 if shape.mla else 24), color=kv_colours,
                    line=dict(color="white", width=1)),
        text=_sparse_labels(kv_labels), textposition="bottom center", textfont=dict(size=12),
        hovertext=kv_labels, hoverinfo="text", showlegend=False,
    ))
    fig.update_xaxes(visible=False, range=[-0.03, 1.03])
    fig.update_yaxes(visible=False, range=[-0.55, 1.45])
    # row names sit in the left margin (fixed pixels), so they never run into the heads at any width
    fig.add_annotation(x=0, y=1.0, xref="paper", yref="y", text=T.FIG_QUERY_ROW, showarrow=False, xshift=-8,
                       xanchor="right", yanchor="middle", align="right", font=dict(size=12, color=MUTED))
    fig.add_annotation(x=0, y=0.0, xref="paper", yref="y", text=T.FIG_LATENT_ROW if shape.mla else T.FIG_KV_ROW,
                       showarrow=False, xshift=-8,
                       xanchor="right", yanchor="middle", align="right", font=dict(size=12, color=MUTED))
    if drawn < heads:
        fig.add_annotation(x=1.03, y=1.0, xref="x", yref="y", text=T.FIG_HEADS_CAPPED.format(drawn=drawn, heads=heads),
                           showarrow=False, xanchor="right", yanchor="bottom", yshift=18, font=dict(size=12))
    fig = base_layout(fig, 300, head_sharing_title(shape))
    # the row names' margin grows with their font (16 px on a projector: 12 px's margin cut them)
    size = max(a.font.size or 12 for a in fig.layout.annotations)
    fig.update_layout(margin=dict(l=math.ceil(HEAD_LABEL_MARGIN * size / 12)))
    return fig


#: Left margin (px) of the head-sharing figure: room for its row names at 12 px.
HEAD_LABEL_MARGIN = 130
#: At most this many head labels per row: a 1024 px screen leaves about 560 px for 32 heads.
MAX_HEAD_LABELS = 8


def _sparse_labels(labels: list[str]) -> list[str]:
    """Every k-th label (first and last kept) so that at most MAX_HEAD_LABELS show; hover names them all."""
    step = max(1, math.ceil(len(labels) / MAX_HEAD_LABELS))
    return [lab if i % step == 0 or i == len(labels) - 1 and step == 1 else "" for i, lab in enumerate(labels)]


def head_sharing_title(shape: ModelShape) -> str:
    """One line naming the attention kind and the sharing, e.g. 'GQA: 32 query heads share 8 KV heads'."""
    if shape.mla is not None:
        return T.FIG_TITLE_MLA.format(heads=shape.num_heads, values=shape.mla.latent_dim)
    if shape.attention == "MHA":
        return T.FIG_TITLE_MHA.format(heads=shape.num_heads)
    if shape.attention == "MQA":
        return T.FIG_TITLE_MQA.format(heads=shape.num_heads)
    return T.FIG_TITLE_GQA.format(heads=shape.num_heads, kv=shape.num_kv_heads,
                                  group=_loc_value(shape.group_size))


def layer_strip_figure(shape: ModelShape, dtype: str) -> go.Figure:
    """One cell per layer, coloured by what it keeps per token (full, sliding window, fixed state)."""
    assert shape.layer_kinds is not None
    per_layer = kv_formula.bytes_per_layer_per_token(shape, dtype)
    fig = go.Figure()
    for kind in LayerKind:
        idx = [i for i, k in enumerate(shape.layer_kinds) if k == kind]
        if not idx:
            continue
        if kind == LayerKind.STATE:
            hover = T.FIG_LAYER_STATE
        elif kind == LayerKind.SLIDING:
            hover = T.FIG_LAYER_SLIDING.format(per=_loc_exact(per_layer), window=shape.sliding_window or 0)
        else:
            hover = T.FIG_LAYER_FULL.format(per=_loc_exact(per_layer))
        fig.add_trace(go.Bar(
            x=idx, y=[1] * len(idx), marker=dict(color=KIND_COLOURS[kind], line=dict(color="white", width=1)),
            name=f"{T.KIND_NAMES[kind]} ({len(idx)})", hovertext=[T.FIG_LAYER_HOVER.format(i=i, kind=hover) for i in idx],
            hoverinfo="text", width=0.92, showlegend=True,
        ))
    fig.update_layout(barmode="overlay", bargap=0)
    fig.update_xaxes(title=T.FIG_LAYER_AXIS, range=[-0.6, shape.num_layers - 0.4], showgrid=False,
                     tickmode="auto", nticks=min(shape.num_layers, 16))
    fig.update_yaxes(visible=False, range=[0, 1])
    return base_layout(fig, 170, T.FIG_LAYERS_TITLE)


@dataclass(frozen=True)
class BarRow:
    """One model in the bytes-per-token comparison."""

    label: str
    exact: Fraction
    all_layers: Fraction
    highlight: bool = False


def bytes_per_token_bar(rows: Sequence[BarRow], dtype: str) -> go.Figure:
    """Horizontal bars of config-exact bytes per token (KiB), with the all-layers figure where it differs."""
    rows = sorted(rows, key=lambda r: float(r.exact))
    fig = go.Figure()
    for chosen, name, colour in ((False, T.FIG_BAR_EXACT, BLUE), (True, T.FIG_BAR_CHOSEN, ORANGE)):
        part = [r for r in rows if r.highlight == chosen]
        if not part:
            continue
        fig.add_trace(go.Bar(
            y=[r.label for r in part], x=[float(r.exact) / 1024 for r in part], orientation="h",
            marker=dict(color=colour), name=name, text=[_loc_bytes(r.exact) for r in part],
            textposition="outside", cliponaxis=False,
            hovertext=[T.FIG_BAR_HOVER.format(label=r.label, exact=_loc_exact(r.exact)) for r in part], hoverinfo="text",
        ))
    kib = [float(r.exact) / 1024 for r in rows]
    diff = [r for r in rows if r.all_layers != r.exact]
    if diff:
        fig.add_trace(go.Scatter(
            y=[r.label for r in diff], x=[float(r.all_layers) / 1024 for r in diff], mode="markers",
            marker=dict(symbol="line-ns", size=16, line=dict(width=3, color=INK)), name=T.FIG_BAR_ALL_LAYERS,
            hovertext=[T.FIG_BAR_ALL_HOVER.format(label=r.label, exact=_loc_exact(r.all_layers)) for r in diff],
            hoverinfo="text",
        ))
    top = max([float(r.all_layers) / 1024 for r in rows] + kib + [1.0])
    fig.update_xaxes(title=T.FIG_BAR_AXIS.format(dtype=dtype), range=[0, top * 1.22], gridcolor=FREE_GREY)
    fig.update_yaxes(automargin=True, categoryorder="array", categoryarray=[r.label for r in rows])
    fig.update_layout(barmode="overlay")
    return base_layout(fig, 90 + 34 * len(rows), T.FIG_BAR_TITLE.format(dtype=dtype))


def naive_vs_exact_figure(report: kv_formula.KVReport) -> go.Figure:
    """The short formula, the all-layers formula and the config-exact figure side by side."""
    names = [T.FIG_NAIVE, T.FIG_ALL_LAYERS, T.FIG_EXACT]
    values = [report.naive_bytes_per_token, report.all_layers_bytes_per_token, report.bytes_per_token]
    colours = [ORANGE, LIGHT_BLUE, BLUE]
    fig = go.Figure(go.Bar(
        x=names, y=[float(v) / 1024 for v in values], marker=dict(color=colours),
        text=[_loc_bytes(v) for v in values], textposition="outside", cliponaxis=False,
        hovertext=[_loc_exact(v) for v in values], hoverinfo="text",
    ))
    top = max(float(v) / 1024 for v in values) or 1.0
    fig.update_yaxes(title=T.FIG_NAIVE_AXIS, range=[0, top * 1.2], gridcolor=FREE_GREY)
    return base_layout(fig, 300, T.FIG_NAIVE_TITLE)


def memory_vs_budget_figure(shape: ModelShape, dtype: str, tokens: int, batch: int,
                            budgets_gib: Sequence[float] = kv_capacity.GPU_BUDGETS_GIB) -> go.Figure:
    """KV memory (GiB) against concurrency for one context length, with GPU budget lines."""
    top_n = max(8, batch * 2)
    step = max(1, top_n // 200)
    ns = list(range(1, top_n + 1, step))
    gib = [kv_formula.total_bytes(shape, dtype, tokens, n) / units.GIB for n in ns]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=ns, y=gib, mode="lines", line=dict(color=BLUE, width=3), name=T.FIG_MEM_LINE,
                             hovertemplate=T.FIG_MEM_HOVER))
    here = kv_formula.total_bytes(shape, dtype, tokens, batch)
    fig.add_trace(go.Scatter(x=[batch], y=[here / units.GIB], mode="markers", name=T.FIG_MEM_HERE,
                             marker=dict(size=12, color=ORANGE, line=dict(color="white", width=2)),
                             hovertext=[T.FIG_MEM_HERE_HOVER.format(batch=batch, tokens=tokens, bytes=_loc_bytes(here))], hoverinfo="text"))
    for b in budgets_gib:
        fig.add_hline(y=b, line=dict(color=MUTED, dash="dash", width=1),
                      annotation_text=T.FIG_GIB.format(value=_loc_value(b)), annotation_position="top left",
                      annotation_font=dict(size=12, color="#374151"))
    ymax = max(max(gib), max(budgets_gib)) * 1.1
    fig.update_xaxes(title=T.FIG_MEM_X, gridcolor=FREE_GREY, range=[0, top_n])
    fig.update_yaxes(title=T.FIG_MEM_Y, gridcolor=FREE_GREY, range=[0, ymax])
    # the legend under the axis: above the plot it met the second line of a long (Russian) title
    fig = base_layout(fig, 370, T.FIG_MEM_TITLE.format(tokens=tokens))
    fig.update_layout(legend=dict(orientation="h", yref="container", y=0, yanchor="bottom", x=0, xanchor="left"),
                      margin=dict(b=40))
    return fig


def paging_figure(cmp: PagingComparison) -> go.Figure:
    """Two stacked bars: what contiguous reservation and paging allocate, split into used and wasted."""
    names = [T.FIG_PAGE_CONTIG.format(max_len=cmp.max_len), T.FIG_PAGE_PAGED.format(block=cmp.block_size)]
    used = [cmp.used_bytes, cmp.used_bytes]
    waste = [cmp.contiguous_waste, cmp.paged_waste]
    util = [cmp.contiguous_utilisation, cmp.paged_utilisation]
    unit = units.GIB if max(cmp.contiguous_bytes, 1) >= units.GIB else (1 << 20)
    unit_name = T.UNIT_GIB if unit == units.GIB else T.UNIT_MIB
    fig = go.Figure()
    fig.add_trace(go.Bar(y=names, x=[u / unit for u in used], orientation="h", name=T.FIG_PAGE_USED,
                         marker=dict(color=BLUE), hovertext=[_loc_bytes(u) for u in used], hoverinfo="text"))
    fig.add_trace(go.Bar(y=names, x=[w / unit for w in waste], orientation="h", name=T.FIG_PAGE_WASTE,
                         marker=dict(color=ORANGE), hovertext=[_loc_bytes(w) for w in waste], hoverinfo="text",
                         text=[T.FIG_PAGE_UTIL.format(pct=100 * u) for u in util], textposition="outside",
                         cliponaxis=False))
    fig.update_layout(barmode="stack", legend=dict(traceorder="normal"))
    total = max(cmp.contiguous_bytes, cmp.paged_bytes) / unit
    fig.update_xaxes(title=unit_name, range=[0, total * 1.45 or 1], gridcolor=FREE_GREY)
    fig.update_yaxes(automargin=True)
    return base_layout(fig, 230, T.FIG_PAGE_TITLE.format(batch=cmp.batch, tokens=cmp.tokens))
