"""Figures of the Engine (live) page: the step timeline, the block pool's ref_cnt grid and a block's K/V."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from kvviz_app.shell.cells import visible_piece
from kvviz_app.shell.i18n import texts
from kvviz_app.shell.style import (
    BLUE,
    FREE_GREY,
    HOST,
    INK,
    LEGEND_ABOVE_LEFT,
    MUTED,
    PURPLE,
    TEAL,
    base_layout,
)

T = texts("engine_view")
#: Under the plot, in the traces' order: a two-row legend above it would run into the title at 1024 px.
LEGEND_BELOW = dict(orientation="h", yanchor="top", y=-0.3, xanchor="left", x=0, traceorder="normal")
#: Beside the plot: the per-request chart's slanted ids take the space under it.
LEGEND_RIGHT = dict(orientation="v", yanchor="top", y=1, xanchor="left", x=1.02, traceorder="normal")


def step_timeline(steps: Sequence) -> go.Figure:
    """Stacked bars, one per step: prefill-chunk tokens and decode tokens (``StepRecord``s)."""
    x = [s.step for s in steps]
    fig = go.Figure([
        go.Bar(x=x, y=[s.prefill_tokens for s in steps], name=T.FIG_PREFILL, marker_color=BLUE),
        go.Bar(x=x, y=[s.decode_tokens for s in steps], name=T.FIG_DECODE, marker_color=PURPLE),
    ])
    return base_layout(fig, 300, T.FIG_STEPS_TITLE, legend=LEGEND_ABOVE_LEFT, barmode="stack",
                       xaxis=dict(title=T.FIG_STEP_AXIS), yaxis=dict(title=T.FIG_TOKENS_AXIS))


def pool_grid(ref_cnt: Sequence[int], cached: Sequence[bool], columns: int = 32) -> go.Figure:
    """A grid of physical blocks 1..N-1 coloured by ref_cnt, cached blocks outlined."""
    ids = list(range(1, len(ref_cnt)))
    xs = [(i - 1) % columns for i in ids]
    ys = [(i - 1) // columns for i in ids]
    fig = go.Figure(go.Scatter(
        x=xs, y=ys, mode="markers", text=[T.FIG_BLOCK_HOVER.format(id=i) for i in ids],
        customdata=[ref_cnt[i] for i in ids], hovertemplate="%{text}: ref_cnt %{customdata}<extra></extra>",
        marker=dict(symbol="square", size=14, color=[ref_cnt[i] for i in ids], cmin=0,
                    cmax=max(2, max(ref_cnt, default=0)), colorscale=[[0, FREE_GREY], [1, BLUE]],
                    line=dict(color=INK, width=[1.5 if cached[i] else 0 for i in ids]),
                    colorbar=dict(title="ref_cnt", thickness=10, tickmode="linear", tick0=0, dtick=1)),
    ))
    rows = max(ys, default=0) + 1
    return base_layout(fig, 60 + 18 * rows, T.FIG_POOL_TITLE, legend=None,
                       xaxis=dict(visible=False), yaxis=dict(visible=False, autorange="reversed"))


def block_heatmap(values, tokens: Sequence[str], title: str) -> go.Figure:
    """``values`` ``[block_size, kv_heads * head_dim]`` (nested lists) as a heatmap, rows labelled by token."""
    pieces = list(tokens) + [""] * (len(values) - len(tokens))
    labels = [f"{i}: {visible_piece(t)}" if t else str(i) for i, t in enumerate(pieces)]
    fig = go.Figure(go.Heatmap(z=values, y=labels, colorscale="RdBu", zmid=0, colorbar=dict(thickness=10)))
    return base_layout(fig, 120 + 16 * len(values), title, legend=None,
                       xaxis=dict(title=T.FIG_KV_X), yaxis=dict(title=T.FIG_KV_Y, autorange="reversed"))


def tiers_bars(t) -> go.Figure:
    """Two horizontal stacked bars, device pool and host memory (a ``TierView``): held blocks by kind, then free."""
    y = [T.FIG_TIER_DEVICE, T.FIG_TIER_HOST]
    in_use = t.device_held - t.device_cached
    parts = [
        (T.FIG_HELD_CACHED_IN_HOST, [t.cached_in_host, 0], TEAL),
        (T.FIG_HELD_CACHED, [t.device_cached - t.cached_in_host, 0], BLUE),
        (T.FIG_HELD_IN_USE, [in_use, 0], PURPLE),
        (T.FIG_HOST_HELD, [0, t.host_held], HOST),
        (T.FIG_FREE, [t.device_free, t.host_free], FREE_GREY),
    ]
    fig = go.Figure([go.Bar(y=y, x=x, name=name, orientation="h", marker_color=color,
                            hovertemplate="%{y}: %{x} " + name + "<extra></extra>") for name, x, color in parts])
    return base_layout(fig, 300, T.FIG_TIERS_TITLE, legend=LEGEND_BELOW, barmode="stack",
                       xaxis=dict(title=T.FIG_BLOCKS_AXIS), yaxis=dict(autorange="reversed"))


def hits_by_source(recent: Sequence) -> go.Figure:
    """One stacked bar per request (``RequestHits``, oldest left): device hit, host hit, computed tokens."""
    rows = list(recent)[::-1]
    x = list(range(len(rows)))  # positions: two long ids cut to the same label stay two bars
    ids = [r.request_id for r in rows]
    hover = "%{customdata}: %{y} %{fullData.name}<extra></extra>"
    fig = go.Figure([
        go.Bar(x=x, y=[getattr(r, part) for r in rows], name=name, marker_color=color, customdata=ids,
               hovertemplate=hover)
        for part, name, color in (("device", T.FIG_SRC_DEVICE, BLUE), ("host", T.FIG_SRC_HOST, HOST),
                                  ("computed", T.FIG_SRC_COMPUTED, MUTED))
    ])
    labels = [i if len(i) <= 16 else i[:14] + "…" for i in ids]  # an API id is 37 characters
    return base_layout(fig, 360, T.FIG_HITS_TITLE, legend=LEGEND_RIGHT, barmode="stack", title_top=72,
                       xaxis=dict(tickmode="array", tickvals=x, ticktext=labels, tickangle=-45, automargin=True),
                       yaxis=dict(title=T.FIG_TOKENS_COUNT))
