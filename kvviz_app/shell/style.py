"""The look every kvviz figure shares: ink and palette colours, and one base layout (white background,
title flush left). Figure modules keep their own meaning-named colour maps built from this palette."""

from __future__ import annotations

import math
from contextvars import ContextVar
from typing import Any

import plotly.graph_objects as go

from kvviz_app.shell.i18n import current_lang
from kvviz_app.shell.i18n.numbers import PLOTLY_SEPARATORS

INK = "#1f2937"
MUTED = "#6b7280"
BLUE = "#2563eb"
TEAL = "#0d9488"
GREEN = "#16a34a"
RED = "#dc2626"
DARK_RED = "#b91c1c"
ORANGE = "#f97316"
AMBER = "#f59e0b"
PURPLE = "#9333ea"
LIGHT_BLUE = "#93c5fd"
OUTLINE_GREY = "#9ca3af"
FREE_GREY = "#e5e7eb"  # free memory, empty slots; also the grid of the calculator's charts
PALE_GREY = "#f3f4f6"  # skipped / missing cells; light grid lines
#: The host tier (host memory under the block pool): magenta, apart from the pool's amber, blues and green
#: also under protan-, deutan- and tritanopia (CIELAB distance >= 30 dark, >= 18 light, simulated).
HOST = "#86198f"
HOST_LIGHT = "#de9cc3"  # a host block the device pool has cached too

#: Horizontal legend just above the plot, at its right or left edge.
LEGEND_ABOVE_RIGHT: dict[str, Any] = dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1)
LEGEND_ABOVE_LEFT: dict[str, Any] = dict(orientation="h", yanchor="bottom", y=1.0, xanchor="left", x=0)


def wrap_title(text: str, width: int = 58) -> str:
    """``text`` broken into lines of at most ``width`` characters (``<br>``), at spaces: Plotly never wraps
    a title, and about 58 characters of 15 px text fit a chart on a 1024 px screen beside the sidebar."""
    lines: list[str] = []
    for part in text.split("<br>"):
        line = ""
        for word in part.split(" "):
            if line and len(line) + 1 + len(word) > width:
                lines.append(line)
                line = word
            else:
                line = f"{line} {word}" if line else word
        lines.append(line)
    return "<br>".join(lines)


def base_layout(
    fig: go.Figure,
    height: int,
    title: str | None = None,
    *,
    top: int = 16,
    title_top: int = 48,
    title_size: int = 15,
    legend: dict[str, Any] | None = LEGEND_ABOVE_RIGHT,
    **extra: Any,
) -> go.Figure:
    """Apply the shared layout: ``height`` px, top margin ``title_top`` with a title and ``top`` without,
    the given legend placement (None leaves Plotly's), plus any ``extra`` layout keys. Returns ``fig``."""
    if title:  # Plotly never wraps a title: break long ones, and give each extra line room
        title = wrap_title(title)
        title_top += 18 * title.count("<br>")
        height += 18 * title.count("<br>")
    layout: dict[str, Any] = dict(
        height=height,
        margin=dict(l=10, r=10, t=title_top if title else top, b=10),
        title=dict(text=title, x=0, xanchor="left", font=dict(size=title_size)) if title else None,
        plot_bgcolor="white",
        paper_bgcolor="white",
        font=dict(color=INK, size=12),  # chart text is never below 12 px (projectors, laptops at 1024 px)
        separators=PLOTLY_SEPARATORS[current_lang()],  # axis ticks and %{y:,} hovers: 1 234,5 in Russian
    )
    if legend is not None:
        layout["legend"] = dict(legend)
    layout.update(extra)
    set_layout(fig, layout)
    return presenter_layer(fig) if presenter() else fig


def set_layout(fig: go.Figure, layout: dict[str, Any]) -> go.Figure:
    """``fig.update_layout(**layout)`` with the same result: keys set one by one (a subtree the figure
    already has is merged, not replaced), about 15x faster than Plotly's relayout machinery. Returns ``fig``."""
    for key, value in layout.items():
        if isinstance(value, dict) and fig.layout[key].to_plotly_json():
            fig.layout[key].update(value)
        else:
            fig.layout[key] = value
    return fig


# ----------------------------------------------------------------------------- presenter mode

#: Smallest chart text in presenter mode (px): readable from the back of a room on a projector.
PRESENTER_MIN_FONT = 16
_PRESENTER: ContextVar[bool] = ContextVar("kvviz_presenter", default=False)


def set_presenter(on: bool) -> None:
    """Turn presenter sizing on or off for figures built in this context (one Streamlit session's run)."""
    _PRESENTER.set(bool(on))


def presenter() -> bool:
    """True while figures are built for a projector."""
    return _PRESENTER.get()


def _has_legend(fig: go.Figure) -> bool:
    """Whether Plotly draws a legend: as the layout says, else for two or more traces it may list, or one
    that asks to be listed."""
    if fig.layout.showlegend is not None:
        return bool(fig.layout.showlegend)
    listed = [t for t in fig.data if t.showlegend is not False]
    return len(listed) > 1 or any(t.showlegend for t in fig.data)


def _title_above_legend(fig: go.Figure, gap: int = 6) -> None:
    """Pin the title to the figure's top and make the top margin hold it and a one-row legend above the
    plot (Plotly centres a title in the margin, where a grown legend reaches it); the plot keeps its height.
    A figure that pins its own title (``yanchor="top"``) keeps its own placement."""
    layout = fig.layout
    if layout.title.yanchor == "top":
        return
    lines = 1 + layout.title.text.count("<br>")
    line_px = layout.title.font.size * 1.3
    pad = gap + (lines - 1) * line_px  # Plotly lifts a multi-line title anchored at the top by its extra lines
    need = pad + lines * line_px + gap
    legend = layout.legend
    if _has_legend(fig) and legend.yanchor == "bottom" and (legend.y or 0) >= 1:
        need += (legend.font.size or layout.font.size or 12) * 1.3 + 10
    layout.title.update(yref="container", y=1, yanchor="top", pad=dict(t=math.ceil(pad)))
    top = layout.margin.t or 0
    if need > top:
        layout.margin.t = math.ceil(need)
        if layout.height:
            layout.height += math.ceil(need) - top


def presenter_layer(fig: go.Figure, min_size: int = PRESENTER_MIN_FONT) -> go.Figure:
    """Raise every font in ``fig`` to at least ``min_size`` px (layout, titles, axes, legend, hover,
    annotations, trace text); sizes already larger are kept. Returns ``fig``."""

    def grow(font: Any) -> None:
        if font is not None:
            font.size = max(font.size or 0, min_size)

    layout = fig.layout
    grow(layout.font)
    grow(layout.legend.font)
    if layout.title is not None and layout.title.text:
        layout.title.font.size = max(layout.title.font.size or 0, min_size + 4)
        _title_above_legend(fig)
    grow(layout.hoverlabel.font)
    for name in dir(layout):
        if name.startswith(("xaxis", "yaxis")) and layout[name] is not None:
            grow(layout[name].tickfont)
            grow(layout[name].title.font)
    for annotation in layout.annotations or ():
        grow(annotation.font)
    for trace in fig.data:
        if getattr(trace, "textfont", None) is not None and "textfont" in trace:
            grow(trace.textfont)
    return fig

# Streamlit badge colours of the block-pool event kinds (the block-table page's event log).
EVENT_BADGE_COLOUR = {
    "hit": "green", "miss": "orange", "touch": "green", "allocate": "blue", "cache": "violet",
    "free": "gray", "evict": "red", "refuse": "red", "reset": "red",
    "host_load": "green", "host_store": "orange", "host_evict": "red",  # the host tier (block-table page)
}
