"""Figures of the Live engine page's fleet view: each replica as a column of its cached prefix trees
(stacked bars, one colour per prefix shared by several replicas), and a heat strip of a prompt's blocks
per replica with the router's pick marked. Titles and labels come in."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from kvviz_app.shell.style import AMBER, BLUE, FREE_GREY, GREEN, ORANGE, PURPLE, RED, TEAL, base_layout

SHARED_COLOURS = (BLUE, ORANGE, PURPLE, TEAL, RED, AMBER, "#0891b2", "#be185d")
UNSHARED = "#cbd5e1"
HELD_AFTER_MISS = "#86efac"


def prefix_columns_figure(columns: Sequence[tuple[str, Sequence[tuple[str, int]], int]], pick: str | None,
                          title: str, labels: dict[str, str], media: Sequence[str] | None = None) -> go.Figure:
    """``columns``: per replica its largest prefix trees as (root label, blocks) and the blocks outside
    them. A root held by two or more replicas gets its own colour in every column it appears in; the
    others, and the blocks outside the largest trees, stack as one grey bar. ``media``: one line per
    replica (its blocks by medium) written under its name."""
    names = [n for n, _, _ in columns]
    holders: dict[str, int] = {}
    size: dict[str, int] = {}
    for _, trees, _ in columns:
        for root, blocks in trees:
            holders[root] = holders.get(root, 0) + 1
            size[root] = size.get(root, 0) + blocks
    shared = sorted((r for r, k in holders.items() if k > 1), key=lambda r: (-holders[r], -size[r], r))
    fig = go.Figure()
    for i, root in enumerate(shared[:len(SHARED_COLOURS)]):
        ys = [sum(b for r, b in trees if r == root) for _, trees, _ in columns]
        fig.add_bar(x=names, y=ys, name=labels["shared"].format(root=root, replicas=holders[root]),
                    marker_color=SHARED_COLOURS[i], hovertemplate="%{x}: %{y} " + labels["blocks"] + "<extra></extra>")
    coloured = set(shared[:len(SHARED_COLOURS)])
    rest = [sum(b for r, b in trees if r not in coloured) + other for _, trees, other in columns]
    if any(rest):
        fig.add_bar(x=names, y=rest, name=labels["unshared"], marker_color=UNSHARED,
                    hovertemplate="%{x}: %{y} " + labels["blocks"] + "<extra></extra>")
    if pick in names:
        fig.add_annotation(x=pick, y=1.0, yref="paper", yanchor="bottom", text=labels["pick"], showarrow=False,
                           font=dict(color=GREEN, size=13))
    fig.update_layout(barmode="stack", bargap=0.35)
    if media is not None:
        fig.update_xaxes(tickvals=names, ticktext=[f"{n}<br>{m}" for n, m in zip(names, media, strict=True)])
    fig.update_yaxes(title=labels["axis"], rangemode="tozero")
    # the pick's mark sits on the plot's top edge, under the title; the legend (one entry per shared prefix,
    # several rows at 1024 px) goes below the replica names, where nothing else is (above, all three overlapped)
    legend = dict(orientation="h", yanchor="top", y=-0.12, xanchor="left", x=0)
    return base_layout(fig, 380, title, title_top=72 if pick in names else 48, legend=legend)


def heat_strip_figure(names: Sequence[str], held: Sequence[Sequence[str | None]], prefix_blocks: Sequence[int],
                      stale: Sequence[bool], pick: str | None, block_size: int, title: str,
                      labels: dict[str, str]) -> go.Figure:
    """One row per replica, one cell per prompt block: reusable on GPU, reusable on another medium,
    held after a miss (not reusable), not held. The pick's row is marked; stale rows are labelled."""
    codes = {"none": 0, "after": 1, "other": 2, "gpu": 3}
    z, text = [], []
    for row, run in zip(held, prefix_blocks, strict=True):
        zr, tr = [], []
        for i, medium in enumerate(row):
            kind = "none" if medium is None else ("after" if i >= run else ("gpu" if medium == "GPU" else "other"))
            zr.append(codes[kind])
            tr.append(labels[kind] + (f" ({medium})" if medium else ""))
        z.append(zr)
        text.append(tr)
    ys = [(labels["pick_row"].format(name=n) if n == pick else n) + (labels["stale_row"] if s else "")
          for n, s in zip(names, stale, strict=True)]
    colours = [FREE_GREY, HELD_AFTER_MISS, AMBER, GREEN]
    scale: list[list] = []
    for k, colour in enumerate(colours):  # one flat band per category (z = 0..3 over zmin..zmax)
        scale += [[k / 4, colour], [(k + 1) / 4, colour]]
    n = len(held[0]) if held else 0
    # One cell per block, centred on its span [i * block_size, (i + 1) * block_size).
    fig = go.Figure(go.Heatmap(z=z, x=[(i + 0.5) * block_size for i in range(n)], y=ys,
                               zmin=-0.5, zmax=3.5, colorscale=scale, showscale=False, xgap=2, ygap=3,
                               customdata=text, hovertemplate="%{y} · %{x}: %{customdata}<extra></extra>"))
    for kind, colour in (("gpu", GREEN), ("other", AMBER), ("after", HELD_AFTER_MISS), ("none", FREE_GREY)):
        fig.add_bar(x=[None], y=[None], name=labels[kind], marker_color=colour)
    fig.update_xaxes(title=labels["axis"], showgrid=False, range=[0, max(n, 1) * block_size])
    fig.update_yaxes(autorange="reversed", showgrid=False)
    legend = dict(orientation="h", yanchor="top", y=-0.25 - 0.6 / max(len(names), 1), xanchor="left", x=0)
    return base_layout(fig, 190 + 34 * len(names), title, legend=legend)
