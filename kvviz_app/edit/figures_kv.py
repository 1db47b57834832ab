"""The per-layer K/V difference map of the "Edit one character" page (max |A - B| per layer and position,
exact zeros in grey). Plain data in, ``go.Figure`` out."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from kvviz_app.edit.figures_common import CHANGED_COLOR, ZERO_COLOR
from kvviz_app.shell.i18n import texts

T = texts("edit")


def kv_heatmap_figure(heat: np.ndarray, which: str, first_changed: int | None) -> go.Figure:
    """Layers (rows, layer 0 on top) x positions: max |A - B| of K or V; exact zeros in grey."""
    heat = np.asarray(heat, dtype=np.float64)
    layers, positions = heat.shape if heat.ndim == 2 else (0, 0)
    zero = np.where(heat == 0.0, 1.0, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        logd = np.where(heat > 0.0, np.log10(np.where(heat > 0.0, heat, 1.0)), np.nan)
    x = list(range(positions))
    y = list(range(layers))
    fig = go.Figure()
    fig.add_trace(go.Heatmap(z=zero, x=x, y=y, colorscale=[[0, ZERO_COLOR], [1, ZERO_COLOR]], showscale=False,
                             hovertemplate=T.FIG_HEAT_ZERO_HOVER, name=T.FIG_HEAT_ZERO))
    finite = logd[np.isfinite(logd)]
    zmin = float(np.floor(finite.min())) if finite.size else -6.0
    zmax = float(np.ceil(finite.max())) if finite.size else 1.0
    if zmax <= zmin:
        zmax = zmin + 1.0
    fig.add_trace(go.Heatmap(
        z=logd, x=x, y=y, customdata=heat, colorscale="YlOrRd", zmin=zmin, zmax=zmax,
        hovertemplate=T.FIG_HEAT_HOVER, colorbar={"title": {"text": T.FIG_HEAT_SCALE, "side": "right"},
                                                   "thickness": 14},
    ))
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=T.FIG_HEAT_ZERO,
                             marker={"size": 12, "symbol": "square", "color": ZERO_COLOR}))
    if first_changed is not None and first_changed < positions:
        fig.add_shape(type="line", x0=first_changed - 0.5, x1=first_changed - 0.5, y0=-0.5, y1=layers - 0.5,
                      line={"color": CHANGED_COLOR, "width": 2, "dash": "dash"})
        # the label reads away from the nearer edge: an edit near the end would run it into the colour bar
        side = "left" if first_changed < positions / 2 else "right"
        fig.add_annotation(x=first_changed - 0.5, y=-0.5, yanchor="bottom", text=T.FIG_FIRST_CHANGE,
                           showarrow=False, font={"color": CHANGED_COLOR, "size": 12}, xanchor=side)
    fig.update_layout(
        title={"text": T.FIG_HEAT_TITLE.format(which=which), "font": {"size": 14}},
        height=170 + 11 * layers, margin={"l": 60, "r": 10, "t": 60, "b": 50}, plot_bgcolor="#ffffff",
        xaxis={"title": T.FIG_HEAT_X, "range": [-0.5, positions - 0.5], "showgrid": False, "zeroline": False},
        yaxis={"title": T.FIG_HEAT_Y, "autorange": "reversed", "showgrid": False, "zeroline": False,
               "tickvals": [v for v in y if v % 5 == 0 or v == layers - 1]},
        legend={"orientation": "h", "y": -0.18, "x": 0, "yanchor": "top"}, showlegend=True,
    )
    fig.layout.yaxis.ticktext = [T.FIG_LAYER0 if v == 0 else str(v) for v in fig.layout.yaxis.tickvals]
    return fig
