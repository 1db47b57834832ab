"""Figures of the security chapter: a prompt's blocks by origin, the room feed, the salt's effect on the
hash chain, timing distributions, the attacker game, hash costs and the birthday bound. Data in (from
kvviz.experiments.room.room, kvviz.experiments.security.collisions and the model-side experiments of kvviz.experiments.security), ``go.Figure`` out; nothing recomputed."""

from __future__ import annotations

import math
from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from kvviz.experiments.room.records import Admission, FeedEntry
from kvviz.experiments.room.rows import status_key
from kvviz.experiments.security.collisions import HashCost, birthday_probability
from kvviz.mirror.hashing import BlockHashRecord, short_hash
from kvviz_app.security.room_labels import origin_label
from kvviz_app.shell.i18n import texts
from kvviz_app.shell.style import (
    AMBER,
    BLUE,
    FREE_GREY,
    GREEN,
    INK,
    LEGEND_ABOVE_RIGHT,
    MUTED,
    ORANGE,
    OUTLINE_GREY,
    PALE_GREY,
    RED,
    base_layout,
)

T = texts("security")
TC = texts("collisions")

STATUS_COLOURS = {"hit_other": GREEN, "hit_you": BLUE, "computed": ORANGE, "partial": "#d1d5db"}
GROUP_COLOURS = {"cached": GREEN, "uncached": RED}
CACHED_FILL = "#dcfce7"
MISSING_FILL = PALE_GREY


def _layout(fig: go.Figure, height: int, title: str | None = None) -> go.Figure:
    """The shared base layout with this chapter's margins and its legend just above the plot."""
    return base_layout(fig, height, title, top=20, title_top=56, legend={**LEGEND_ABOVE_RIGHT, "y": 1.02})


def _log_ticks(values: Sequence[float]) -> list[float]:
    """Tick values of a log axis over ``values``: the 1-2-5 series (1-1.5-2-3-...-9 when that shows fewer than
    three inside), from the last at or below the smallest to the first at or above the largest. Left to itself,
    Plotly labels a log axis spanning a decade or two with its minor digits at 9 px (under the charts' 12 px)."""
    positive = [v for v in values if v > 0]
    if not positive:
        return []
    lo, hi = min(positive), max(positive)
    decades = range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
    for mantissas in ((1, 2, 5), (1, 1.5, 2, 3, 4, 5, 6, 7, 8, 9)):  # the finer one when a span shows < 3 labels
        series = [round(m * 10.0 ** e, 12) for e in decades for m in mantissas]
        first = max((v for v in series if v <= lo), default=series[0])
        last = min((v for v in series if v >= hi), default=series[-1])
        ticks = [v for v in series if first <= v <= last]
        if sum(lo <= v <= hi for v in ticks) >= 3:
            break
    return ticks


def block_strip(adm: Admission, now: float) -> go.Figure:
    """One bar segment per logical block of an admitted prompt (width = its tokens), coloured by who
    computed it; hover shows the anonymised origin and the block hash."""
    fig = go.Figure()
    seen: set[str] = set()
    for b in adm.blocks:
        key = status_key(b.status, b.computed_by)
        age = now - b.computed_at if b.computed_at is not None else None
        origin = origin_label(b.computed_by, age) if b.status == "hit" else (T.WHO_YOU if b.status == "computed" else "")
        hover = (T.FIG_STRIP_HOVER.format(index=b.index, first=b.start, last=b.end - 1, status=T.STATUS_LABELS[key])
                 + (f"<br>{origin}" if origin else "")
                 + (T.FIG_STRIP_HASH.format(hash=short_hash(b.block_hash, 12)) if b.block_hash else ""))
        fig.add_bar(
            x=[b.end - b.start], y=[""], base=[b.start], orientation="h", marker_color=STATUS_COLOURS[key],
            marker_line=dict(color="white", width=2), name=T.STATUS_LABELS[key], legendgroup=key,
            showlegend=key not in seen, text=[str(b.index)], textposition="inside", insidetextanchor="middle",
            hovertemplate=hover + "<extra></extra>",
        )
        seen.add(key)
    fig.update_layout(barmode="overlay", bargap=0.15)
    fig.update_xaxes(title_text=T.FIG_TOKEN_POSITION, range=[0, max(adm.num_tokens, 1)], showgrid=False)
    fig.update_yaxes(showticklabels=False)
    return _layout(fig, 190, T.STRIP_TITLE)


def feed_chart(entries: Sequence[FeedEntry]) -> go.Figure:
    """Stacked bars per recent prompt (oldest left): tokens reused from the pool vs computed."""
    items = list(reversed(entries))
    labels = [f"#{e.prompt_no} {T.WHO_YOU if e.who == 'you' else T.WHO_OTHER}" for e in items]
    fig = go.Figure()
    fig.add_bar(x=labels, y=[e.hit_tokens for e in items], name=T.FIG_REUSED_TOKENS, marker_color=GREEN,
                hovertemplate=T.FIG_REUSED_HOVER)
    fig.add_bar(x=labels, y=[e.num_tokens - e.hit_tokens for e in items], name=T.FIG_COMPUTED_TOKENS,
                marker_color=ORANGE, hovertemplate=T.FIG_COMPUTED_HOVER)
    fig.update_layout(barmode="stack")
    fig.update_yaxes(title_text=T.FIG_TOKENS, gridcolor=FREE_GREY)
    fig.update_xaxes(tickangle=-30)
    return _layout(fig, 300, T.FEED_CHART_TITLE)


SALT_CHAIN_BLOCKS = 6  # blocks drawn per row: 8-hex-digit labels stay apart on a 1024 px screen (~590 px chart)


def salt_chain(plain: Sequence[BlockHashRecord], salted: Sequence[BlockHashRecord], plain_cached: Sequence[bool],
               salted_cached: Sequence[bool], salt_name: str, max_blocks: int = SALT_CHAIN_BLOCKS) -> go.Figure:
    """Two rows of chained blocks (no salt, salted), each headed by its name: each box shows its short hash,
    green when the room holds it; arrows are parent links. The salted row differs from block 0 on. At most
    ``max_blocks`` are drawn, and the figure says how many of how many."""
    fig = go.Figure()
    rows = [(T.SALT_COLUMNS["plain"], plain, plain_cached, 1.0), (T.FIG_WITH_SALT.format(salt=salt_name), salted, salted_cached, 0.0)]
    total = max(len([r for r in plain if r.full]), 1)
    n = min(max_blocks, total)
    for label, records, cached, y in rows:
        full = [r for r in records if r.full][:n]
        fig.add_annotation(x=-1.6, y=y + 0.42, text=f"<b>{label}</b>", showarrow=False, xanchor="left",
                           font=dict(size=12))
        fig.add_shape(type="rect", x0=-1.6, x1=-0.55, y0=y - 0.18, y1=y + 0.18, fillcolor="white",
                      line=dict(color=MUTED, dash="dot"))
        fig.add_annotation(x=-1.075, y=y, text=T.FIG_NONE_HASH, showarrow=False, font=dict(size=12, color=MUTED))
        for i, rec in enumerate(full):
            hit = bool(cached[i]) if i < len(cached) else False
            fig.add_shape(type="rect", x0=i - 0.4, x1=i + 0.4, y0=y - 0.3, y1=y + 0.3,
                          fillcolor=CACHED_FILL if hit else MISSING_FILL, line=dict(color=GREEN if hit else OUTLINE_GREY))
            fig.add_annotation(x=i, y=y + 0.08, text=f"<b>{short_hash(rec.hash)}</b>", showarrow=False,
                               font=dict(family="monospace", size=12))
            fig.add_annotation(x=i, y=y - 0.15, text=T.FIG_BLOCK.format(i=i), showarrow=False,
                               font=dict(size=12, color=MUTED))
            if rec.extra_keys and i == 0:  # the salt enters block 0's hash: said under its box, left-aligned
                fig.add_annotation(x=-0.4, y=y - 0.42, text=f"+ {T.SALT_EXTRA_KEY}", showarrow=False, xanchor="left",
                                   font=dict(size=12, color=MUTED))
            fig.add_annotation(x=i - 0.4, y=y, ax=(i - 0.6) if i else -0.55, ay=y, xref="x", yref="y", axref="x",
                               ayref="y", showarrow=True, arrowhead=2, arrowsize=1, arrowwidth=1, arrowcolor=MUTED, text="")
    if total > n:
        fig.add_annotation(x=n - 0.4, y=1.42, xanchor="right", text=T.FIG_CHAIN_SHOWN.format(last=n - 1, total=total),
                           showarrow=False, font=dict(size=12, color=MUTED))
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", marker=dict(color=CACHED_FILL, size=12, symbol="square",
                             line=dict(color=GREEN, width=1)), name=T.FIG_IN_POOL))
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", marker=dict(color=MISSING_FILL, size=12, symbol="square",
                             line=dict(color=OUTLINE_GREY, width=1)), name=T.FIG_NOT_IN_POOL))
    fig.update_xaxes(visible=False, range=[-1.7, max(n, 4) - 0.35])
    fig.update_yaxes(visible=False, range=[-0.6, 1.6])
    return _layout(fig, 270)


def timing_figure(results: Sequence[object]) -> go.Figure:
    """Violins (with every probe as a point and the median line) of the probe latencies, cached vs not
    cached, for each salt setting measured. ``results`` are ``SideChannelResult`` objects."""
    fig = go.Figure()
    for group, name in (("cached", T.GROUP_CACHED), ("uncached", T.GROUP_UNCACHED)):
        xs: list[str] = []
        ys: list[float] = []
        for r in results:
            values = r.latencies(group)  # type: ignore[attr-defined]
            xs += [T.SALT_ON if r.salted else T.SALT_OFF] * len(values)  # type: ignore[attr-defined]
            ys += values
        fig.add_trace(go.Violin(
            x=xs, y=ys, name=name, legendgroup=group, marker_color=GROUP_COLOURS[group], box_visible=True,
            meanline_visible=False, points="all", pointpos=0, jitter=0.3, spanmode="hard", scalemode="width",
            hovertemplate=T.FIG_LATENCY_HOVER.format(name=name),
        ))
    fig.update_layout(violinmode="group", violingap=0.25)
    every = [v for r in results for group in ("cached", "uncached") for v in r.latencies(group)]  # type: ignore[attr-defined]
    fig.update_yaxes(title_text=T.FIG_LATENCY_AXIS, type="log", gridcolor=FREE_GREY, tickvals=_log_ticks(every))
    fig = _layout(fig, 440, T.SC_RESULTS)
    # the legend below the plot: above it, a long (Russian) title ran into it at 1024 px
    return fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.12, xanchor="center", x=0.5),
                             margin_b=70)


def game_figure(results: Sequence[object]) -> go.Figure:
    """Per round, every candidate probe's latency (grey) and the secret's (star); one panel per salt
    setting. ``results`` are ``GameResult`` objects."""
    titles = [T.SALT_ON if r.salted else T.SALT_OFF for r in results]  # type: ignore[attr-defined]
    fig = make_subplots(rows=1, cols=max(1, len(results)), subplot_titles=titles, shared_yaxes=True)
    for col, r in enumerate(results, start=1):
        names = r.candidates  # type: ignore[attr-defined]
        ox: list[int] = []
        oy: list[float] = []
        otext: list[str] = []
        sx: list[int] = []
        sy: list[float] = []
        stext: list[str] = []
        for rnd in r.rounds:  # type: ignore[attr-defined]
            for i, ms in enumerate(rnd.latencies_ms):
                if i == rnd.secret:
                    sx.append(rnd.round + 1)
                    sy.append(ms)
                    stext.append(names[i])
                else:
                    ox.append(rnd.round + 1)
                    oy.append(ms)
                    otext.append(names[i])
        fig.add_trace(go.Scatter(x=ox, y=oy, mode="markers", marker=dict(color=OUTLINE_GREY, size=8), text=otext,
                                 name=T.FIG_OTHER_CANDIDATES, legendgroup="o", showlegend=col == 1,
                                 hovertemplate=T.FIG_OTHER_HOVER), row=1, col=col)
        fig.add_trace(go.Scatter(x=sx, y=sy, mode="markers", marker=dict(color=RED, size=14, symbol="star"),
                                 text=stext, name=T.FIG_SECRET, legendgroup="s", showlegend=col == 1,
                                 hovertemplate=T.FIG_SECRET_HOVER), row=1, col=col)
        fig.update_xaxes(title_text=T.FIG_ROUND, dtick=1, row=1, col=col)
    every = [ms for r in results for rnd in r.rounds for ms in rnd.latencies_ms]  # type: ignore[attr-defined]
    fig.update_yaxes(title_text=T.FIG_PROBE_AXIS, type="log", gridcolor=FREE_GREY, row=1, col=1)
    fig.update_yaxes(type="log", gridcolor=FREE_GREY, tickvals=_log_ticks(every))
    _layout(fig, 400, T.GAME_CHART_TITLE)
    # the panels' titles sit between the chart's title (one line or wrapped) and the plot: 24 px more for them
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.22, xanchor="left", x=0),
                      margin=dict(l=10, r=10, t=fig.layout.margin.t + 24, b=10))
    return fig


def game_accuracy_figure(results: Sequence[object]) -> go.Figure:
    """Share of rounds whose fastest probe was the secret, per salt setting, against chance."""
    labels = [T.SALT_ON if r.salted else T.SALT_OFF for r in results]  # type: ignore[attr-defined]
    acc = [r.accuracy for r in results]  # type: ignore[attr-defined]
    text = [f"{r.correct}/{len(r.rounds)}" for r in results]  # type: ignore[attr-defined]
    fig = go.Figure(go.Bar(x=labels, y=acc, text=text, textposition="outside",
                           marker_color=[RED if not r.salted else GREEN for r in results],  # type: ignore[attr-defined]
                           hovertemplate=T.FIG_ACC_HOVER, showlegend=False))
    if results:  # chance is named in the legend: as a label on its line it sat on a bar's "1/6" at chance
        chance = results[0].chance  # type: ignore[attr-defined]
        fig.add_hline(y=chance, line=dict(color=INK, dash="dash"))
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", line=dict(color=INK, dash="dash"),
                                 name=f"{T.CHANCE} {chance:.0%}", hoverinfo="skip"))
    fig.update_yaxes(range=[0, 1.15], tickformat=".0%", gridcolor=FREE_GREY)
    return _layout(fig, 300, T.GAME_ACC_TITLE)


def hash_cost_figure(costs: Sequence[HashCost]) -> go.Figure:
    """Measured ns per block for each hash (and CBOR encoding alone); unsafe hashes in red."""
    colours = [RED if c.unsafe else OUTLINE_GREY if c.name == "cbor_only" else BLUE for c in costs]
    fig = go.Figure(go.Bar(
        x=[c.ns_per_block for c in costs], y=[c.name for c in costs], orientation="h", marker_color=colours,
        text=[TC.FIG_NS.format(ns=c.ns_per_block) for c in costs], textposition="outside", showlegend=False,
        hovertemplate=TC.FIG_COST_HOVER, cliponaxis=False,
    ))
    fig.update_xaxes(title_text=TC.FIG_COST_AXIS, gridcolor=FREE_GREY,
                     range=[0, max((c.ns_per_block for c in costs), default=1) * 1.45])
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, 260, TC.COST_TITLE)


def birthday_figure(bits_list: Sequence[int] = (16, 32, 64, 128, 256)) -> go.Figure:
    """1 - exp(-n²/2^(b+1)) against the number of cached blocks n (log axis), one line per hash size."""
    ns = [10 ** (k / 4) for k in range(0, 4 * 24 + 1)]
    fig = go.Figure()
    palette = {16: OUTLINE_GREY, 32: AMBER, 64: RED, 128: BLUE, 256: GREEN}
    for bits in bits_list:
        fig.add_trace(go.Scatter(
            x=ns, y=[birthday_probability(n, bits) for n in ns], mode="lines", name=TC.FIG_BITS.format(bits=bits),
            line=dict(color=palette.get(bits, INK), width=2),
            hovertemplate=TC.FIG_BIRTHDAY_HOVER.format(bits=bits),
        ))
    fig.update_xaxes(type="log", title_text=TC.FIG_BLOCKS_N, exponentformat="power", gridcolor=FREE_GREY,
                     range=[0, math.log10(ns[-1])])
    fig.update_yaxes(title_text=TC.FIG_P_COLLISION, range=[0, 1.02], tickformat=".0%", gridcolor=FREE_GREY)
    _layout(fig, 340, TC.BIRTHDAY_TITLE)
    fig.update_layout(legend=dict(orientation="v", yanchor="middle", y=0.5, xanchor="left", x=1.02))
    return fig


__all__ = [
    "birthday_figure",
    "block_strip",
    "feed_chart",
    "game_accuracy_figure",
    "game_figure",
    "hash_cost_figure",
    "salt_chain",
    "status_key",
    "timing_figure",
]
