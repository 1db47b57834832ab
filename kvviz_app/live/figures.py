"""Figures of the Live engine page: events per second and blocks held over time, a prompt's blocks
cached or not, and the engine's prefix-cache hit rate from /metrics. Titles and labels come in."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from kvviz.fleet.engine_model import Sample
from kvviz_app.shell.style import BLUE, FREE_GREY, GREEN, INK, MUTED, ORANGE, PURPLE, RED, base_layout


def _times(samples: Sequence[Sample]) -> list[float]:
    """Seconds relative to the last sample (0 = now, negative = the past)."""
    last = samples[-1].t if samples else 0.0
    return [s.t - last for s in samples]


def events_rate_figure(samples: Sequence[Sample], title: str, labels: dict[str, str], x_title: str,
                       y_title: str) -> go.Figure:
    """Stacked bars: BlockStored, BlockRemoved and AllBlocksCleared events per second."""
    x = _times(samples)
    fig = go.Figure()
    for key, colour in (("stored", GREEN), ("removed", RED), ("cleared", PURPLE)):
        fig.add_bar(x=x, y=[getattr(s, key) for s in samples], name=labels[key], marker_color=colour)
    fig.update_layout(barmode="stack", bargap=0.1)
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title=y_title, rangemode="tozero")
    return base_layout(fig, 300, title)


def blocks_held_figure(samples: Sequence[Sample], title: str, labels: dict[str, str], x_title: str,
                       y_title: str) -> go.Figure:
    """Lines: distinct block hashes held, and blocks held on GPU and on CPU, at the end of each second."""
    x = _times(samples)
    fig = go.Figure()
    fig.add_scatter(x=x, y=[s.blocks_held for s in samples], name=labels["distinct"], mode="lines",
                    line=dict(color=INK, width=2))
    fig.add_scatter(x=x, y=[s.gpu_blocks for s in samples], name=labels["gpu"], mode="lines",
                    line=dict(color=BLUE, dash="dot"))
    if any(s.cpu_blocks for s in samples):
        fig.add_scatter(x=x, y=[s.cpu_blocks for s in samples], name=labels["cpu"], mode="lines",
                        line=dict(color=ORANGE, dash="dash"))
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title=y_title, rangemode="tozero")
    return base_layout(fig, 300, title)


def prompt_blocks_figure(cached: Sequence[bool], reused: int, block_size: int, title: str,
                         labels: dict[str, str], hover: Sequence[str], complete: bool = True) -> go.Figure:
    """One cell per full block of the prompt: reusable (leading cached run), cached but past a miss
    (not reusable), not cached, or (``complete`` False: kvviz joined late) unknown, hatched."""
    colours = {"reused": GREEN, "cached_after_miss": "#86efac", "missing": FREE_GREY, "unknown": "white"}
    kinds = ["reused" if i < reused else ("cached_after_miss" if c else ("missing" if complete else "unknown"))
             for i, c in enumerate(cached)]
    names = [labels[k] for k in kinds]
    fig = go.Figure(go.Bar(
        x=[i * block_size for i in range(len(cached))], y=[1] * len(cached), width=[block_size * 0.92] * len(cached),
        marker=dict(color=[colours[k] for k in kinds], line=dict(color=MUTED, width=[1 if k == "unknown" else 0
                                                                                     for k in kinds]),
                    pattern=dict(shape=["/" if k == "unknown" else "" for k in kinds], fgcolor=MUTED)),
        customdata=list(zip(names, hover, strict=True)), offset=0,
        hovertemplate="%{customdata[0]}<br>%{customdata[1]}<extra></extra>", showlegend=False,
    ))
    legend = ("reused", "cached_after_miss", "missing" if complete else "unknown")
    for kind in legend:
        fig.add_bar(x=[None], y=[None], name=labels[kind], marker=dict(
            color=colours[kind], line=dict(color=MUTED, width=1 if kind == "unknown" else 0),
            pattern=dict(shape="/" if kind == "unknown" else "", fgcolor=MUTED)))
    fig.update_xaxes(title=labels["axis"], range=[0, max(len(cached), 1) * block_size])
    fig.update_yaxes(visible=False, range=[0, 1])
    return base_layout(fig, 170, title)


def hit_rate_figure(points: Sequence[tuple[float, float]], title: str, x_title: str, y_title: str) -> go.Figure:
    """The engine's prefix-cache hit rate (hits / queries between scrapes, in %) over time."""
    last = points[-1][0] if points else 0.0
    fig = go.Figure(go.Scatter(x=[t - last for t, _ in points], y=[100 * r for _, r in points], mode="lines+markers",
                               line=dict(color=GREEN)))
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title=y_title, range=[0, 100])
    return base_layout(fig, 260, title, legend=None)
