"""The batching timeline: the engine's last steps, each bar split request by request into the tokens it read
from its blocks, the tokens it computed (coloured by kind of work) and the padding a padded batch would add."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from kvviz_app.shell.i18n import texts
from kvviz_app.shell.style import (
    BLUE,
    FREE_GREY,
    INK,
    LEGEND_ABOVE_LEFT,
    MUTED,
    ORANGE,
    PURPLE,
    base_layout,
)

if TYPE_CHECKING:  # the engine's records, as types only (a figure imports no torch)
    from kvviz.engine.steps import StepRecord

T = texts("batching")

REUSED_GREY = "#d1d5db"
KIND_COLOURS = {"scratch": ORANGE, "cached": BLUE, "decode": PURPLE}


def kind_names() -> dict[str, str]:
    """The legend name of each kind of computed tokens, in the session's language (read per call: a
    module-level dict would keep the language of whichever session imported this module first)."""
    return {"scratch": T.FIG_SCRATCH, "cached": T.FIG_CACHED, "decode": T.FIG_DECODE}


def padding_tokens(step: StepRecord) -> int:
    """Tokens a padded batch would add to a step: every request padded to the step's longest computed part."""
    longest = max((i.num_tokens for i in step.items), default=0)
    return sum(longest - i.num_tokens for i in step.items)


def step_timeline(steps: Sequence[StepRecord], mine: str | None = None) -> go.Figure:
    """Horizontal bars, one per engine step (``StepRecord``s, oldest at the bottom): per request
    the tokens read from its blocks (grey), the tokens computed in the step by kind (``StepItem.kind``), the
    padding a padded batch would add; beside it the step's measured time. Requests whose id starts with
    ``mine`` are outlined."""
    rows = []
    for record in steps:
        reqs = []
        for item in record.items:
            own = mine is not None and item.request_id.startswith(mine)
            who = T.WHO_YOU if own else (item.client or T.WHO_OTHER)
            reqs.append((T.STEP_REQUEST_LABEL.format(id=item.request_id, who=who), own, item.start, item.kind,
                         item.num_tokens))
        rows.append((T.FIG_STEP_LABEL.format(id=record.step, n=record.num_requests), record.duration_s * 1000.0,
                     (record.step, record.num_requests), reqs))
    return _timeline(rows, T.FIG_STEP_TIME_HOVER)


def _timeline(rows: Sequence[tuple[str, float, tuple[int, int], list[tuple[str, bool, int, str, int]]]],
              time_hover: str) -> go.Figure:
    """rows: (label, ms, (id, requests), [(request name, outlined, reused tokens, kind, computed tokens)])."""
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, column_widths=[0.76, 0.24], horizontal_spacing=0.03)
    segs: dict[str, dict[str, list]] = {k: {"y": [], "x": [], "base": [], "cd": [], "lw": []}
                                        for k in ("reused", *KIND_COLOURS, "padding")}
    kinds = kind_names()
    for label, _, _, reqs in rows:
        longest = max((r[4] for r in reqs), default=0)
        offset = 0
        for name, outlined, reused, kind, computed in reqs:
            width = 1.5 if outlined else 0.5
            for key, tokens, what in (("reused", reused, T.FIG_REUSED), (kind, computed, kinds[kind]),
                                      ("padding", longest - computed, T.FIG_PADDING)):
                if tokens <= 0:
                    continue
                seg = segs[key]
                seg["y"].append(label)
                seg["x"].append(tokens)
                seg["base"].append(offset)
                seg["cd"].append((name, what, tokens))
                # an outline would cover a segment of a few tokens (a decode step): those get none
                seg["lw"].append(width if tokens >= 4 or key in ("reused", "padding") else 0)
                offset += tokens
    names = {"reused": T.FIG_REUSED, "padding": T.FIG_PADDING, **kinds}
    colours = {"reused": REUSED_GREY, "padding": "white", **KIND_COLOURS}
    for key, seg in segs.items():
        fig.add_bar(
            y=seg["y"], x=seg["x"], base=seg["base"], orientation="h", name=names[key], customdata=seg["cd"],
            width=0.4 if key in ("reused", "padding") else 0.75,  # computed tokens stand out, full height
            marker=dict(color=colours[key], line=dict(color=INK if key != "padding" else MUTED, width=seg["lw"]),
                        pattern=dict(shape="/" if key == "padding" else "", fgcolor=MUTED)),
            hovertemplate=T.FIG_SEGMENT_HOVER, showlegend=True, row=1, col=1,
        )
    labels = [r[0] for r in rows]
    fig.add_bar(y=labels, x=[r[1] for r in rows], orientation="h", name=T.FIG_TIME_TITLE, marker_color=MUTED,
                customdata=[r[2] for r in rows], hovertemplate=time_hover, showlegend=False, row=1, col=2)
    fig.update_layout(barmode="overlay", bargap=0.25)
    fig.update_yaxes(categoryorder="array", categoryarray=labels, tickfont=dict(size=12), automargin=True)
    fig.update_xaxes(title_text=T.FIG_TOKENS, gridcolor=FREE_GREY, tickfont=dict(size=12), row=1, col=1)
    fig.update_xaxes(title_text=T.FIG_MS, gridcolor=FREE_GREY, tickfont=dict(size=12), row=1, col=2)
    height = max(300, 170 + 30 * len(rows))
    # no title inside the figure (the page heads it): the three-row legend needs the top margin
    return base_layout(fig, height, None, top=100, legend=dict(LEGEND_ABOVE_LEFT, y=1.01, font=dict(size=12)))
