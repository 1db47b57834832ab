"""Figures of the sessions page: each turn's prompt by cache status (the seed article's three-turn
picture, to scale), the usage fields per turn, and cumulative prefill work with and without a cache.

Builders take kvviz.experiments.sessions results and return ``go.Figure``; the split of a prompt into read /
written / uncached tokens is the result's own numbers, only drawn here.
"""

from __future__ import annotations

import plotly.graph_objects as go

from kvviz.analysis.providers import USAGE_FIELDS
from kvviz.experiments.sessions import SessionResult, TurnUsage
from kvviz_app.shell.i18n import texts
from kvviz_app.shell.style import (
    BLUE,
    DARK_RED,
    LEGEND_ABOVE_LEFT,
    ORANGE,
    OUTLINE_GREY,
    PALE_GREY,
    RED,
    base_layout,
)

T = texts("sessions")

STATUS_COLOURS = {"read": BLUE, "written": ORANGE, "uncached": OUTLINE_GREY}
FIELD_STATUS = {"cache_read_input_tokens": "read", "cache_creation_input_tokens": "written",
                "input_tokens": "uncached"}
WITHOUT_COLOUR = RED
WITH_COLOUR = BLUE


def _layout(fig: go.Figure, height: int, title: str | None = None) -> go.Figure:
    return base_layout(fig, height, title, top=30, title_top=64, legend=LEGEND_ABOVE_LEFT)


def status_ranges(turn: TurnUsage) -> list[tuple[str, int, int]]:
    """The prompt's token ranges by status: read [0, r), written [r, r + w), uncached the rest."""
    r = turn.cache_read_input_tokens
    w = r + turn.cache_creation_input_tokens
    ranges = [("read", 0, r), ("written", r, w), ("uncached", w, turn.prompt_tokens)]
    return [(s, a, b) for s, a, b in ranges if b > a]


def turns_picture(result: SessionResult, title: str | None = "") -> go.Figure:
    """One horizontal bar per turn, to scale in tokens, split by segment and by cache status; ``title``:
    "" its own (in the session's language, read per call), None none."""
    title = T.PICTURE_TITLE if title == "" else title
    pieces: dict[str, dict[str, list]] = {s: {"x": [], "base": [], "y": [], "text": [], "hover": []}
                                          for s in STATUS_COLOURS}
    labels = [T.TURN_LABEL.format(turn=t.turn) for t in result.turns]
    for turn, ylabel in zip(result.turns, labels, strict=True):
        ranges = status_ranges(turn)
        for seg in turn.segments:
            first = True
            for status, a, b in ranges:
                lo, hi = max(a, seg.start), min(b, seg.end)
                if hi <= lo:
                    continue
                p = pieces[status]
                p["x"].append(hi - lo)
                p["base"].append(lo)
                p["y"].append(ylabel)
                p["text"].append(T.segment_label(seg.label) if first else "")
                p["hover"].append(T.HOVER_PIECE.format(turn=turn.turn, label=T.segment_label(seg.label), start=lo, end=hi - 1,
                                                       length=hi - lo, status=T.STATUS_LABELS[status]))
                first = False
    fig = go.Figure()
    for status, p in pieces.items():
        fig.add_bar(
            x=p["x"], base=p["base"], y=p["y"], orientation="h", name=T.STATUS_LABELS[status],
            marker=dict(color=STATUS_COLOURS[status], line=dict(color="white", width=1.5)),
            text=p["text"], textposition="inside", insidetextanchor="middle", textangle=0,
            textfont=dict(color="white", size=12), customdata=p["hover"],
            hovertemplate="%{customdata}<extra></extra>", width=0.72,
        )
    longest = max((t.prompt_tokens for t in result.turns), default=1)
    for turn, ylabel in zip(result.turns, labels, strict=True):
        notes = [T.EVENT_SHORT[e] for e in turn.events]
        if turn.first_difference:
            notes.append(T.DIFF_NOTE.format(segment=T.segment_label(turn.first_difference)))
        if notes:
            fig.add_annotation(x=turn.prompt_tokens, y=ylabel, text=" · ".join(notes), showarrow=False,
                               xanchor="left", xshift=6, font=dict(size=12, color=DARK_RED))
    fig.update_layout(barmode="overlay", uniformtext=dict(minsize=12, mode="hide"))
    fig.update_xaxes(title=T.TOKEN_AXIS, range=[0, longest * 1.32], showgrid=True, gridcolor=PALE_GREY)
    fig.update_yaxes(autorange="reversed", categoryorder="array", categoryarray=labels)
    return _layout(fig, 120 + 34 * len(result.turns), title)


def usage_figure(result: SessionResult, title: str | None = "") -> go.Figure:
    """Stacked bars per turn: cache_read_input_tokens, cache_creation_input_tokens, input_tokens; ``title``:
    "" its own (in the session's language), None none."""
    title = T.USAGE_TITLE if title == "" else title
    fig = go.Figure()
    turns = [t.turn for t in result.turns]
    for field in USAGE_FIELDS:
        values = [getattr(t, field) for t in result.turns]
        fig.add_bar(x=turns, y=values, name=T.USAGE_LEGEND.format(field=field, label=T.USAGE_LABELS[field]),
                    marker_color=STATUS_COLOURS[FIELD_STATUS[field]],
                    hovertemplate=T.HOVER_USAGE.format(field=field))
    fig.update_layout(barmode="stack", legend=dict(y=-0.22, yanchor="top", traceorder="normal"))
    fig.update_xaxes(title=T.TURN_AXIS, dtick=1)
    fig.update_yaxes(title=T.USAGE_AXIS, gridcolor=PALE_GREY, tickformat=",")
    fig = _layout(fig, 400, title)
    fig.update_layout(legend=dict(y=-0.22, yanchor="top"), margin=dict(b=90))
    return fig


def work_figure(turns: list[int], without: list[int], with_cache: list[int], title: str | None) -> go.Figure:
    """Cumulative prefill tokens per turn, without and with a cache."""
    fig = go.Figure()
    fig.add_scatter(x=turns, y=without, mode="lines+markers", name=T.WORK_WITHOUT,
                    line=dict(color=WITHOUT_COLOUR), hovertemplate=T.HOVER_WORK)
    fig.add_scatter(x=turns, y=with_cache, mode="lines+markers", name=T.WORK_WITH,
                    line=dict(color=WITH_COLOUR), hovertemplate=T.HOVER_WORK)
    fig.update_xaxes(title=T.TURN_AXIS)
    fig.update_yaxes(title=T.WORK_AXIS, rangemode="tozero", gridcolor=PALE_GREY, tickformat=",")
    return _layout(fig, 340, title)
