"""Figures of the "Edit one character" page: token strips, the two block chains with the cascade
animation, and the per-layer K/V difference map. Plain data in, ``go.Figure`` out."""

from __future__ import annotations

import html
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from kvviz.core.compare import PromptComparison
from kvviz.core.hashing import short_hash
from kvviz.core.utf8 import completed_chars, escaped_bytes
from kvviz.figures.style import INK, MUTED, OUTLINE_GREY, wrap_title
from kvviz.text import edit as T
from kvviz.text.core import render_block_reason

STATUS_COLORS = {"hit": "#2e9d5b", "miss": "#d64545", "invalidated": "#ef9a1a", "partial": "#9aa0a6"}
STATUS_LIGHT = {"hit": "#cdeed8", "miss": "#f9cccc", "invalidated": "#fde3b5", "partial": "#e6e8eb"}
CHANGED_COLOR = "#e052c4"
A_COLOR = "#5b8fd1"
A_LIGHT = "#dde8f6"
UNCHECKED_COLOR = "#e3e3e3"
ZERO_COLOR = "#d5d9df"
BOUNDARY_COLOR = INK
FONT = "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace"
TOKENS_PER_ROW = 16
B_X = 0.72  # x of B's chain in the chain figure (A's is 0); B's labels fit 560 px from here


# ----------------------------------------------------------------------------- helpers


_BYTE_ESCAPE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def show_piece(piece: str, limit: int = 5) -> str:
    """A token's text for a chart cell: whitespace made visible, control characters as \\xNN, bytes
    that only start a character as ⟨D0⟩, long pieces shortened, escaped for Plotly's HTML-like text."""
    piece = _BYTE_ESCAPE.sub(lambda m: "\uE000" + m.group(1).upper(), piece)
    out = []
    for ch in piece:
        if ch == " ":
            out.append("·")
        elif ch == "\n":
            out.append("↵")
        elif ch == "\t":
            out.append("→")
        elif ch == "\uE000":
            out.append("⟨")
        elif unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") or not ch.isprintable():
            out.append(f"\\x{ord(ch):02x}" if ord(ch) < 256 else f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    text = re.sub(r"⟨([0-9A-F]{2})", r"⟨\1⟩", "".join(out)) or "∅"
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    # Bidi isolation keeps right-to-left pieces from reordering their neighbours.
    return html.escape("\u2068" + text + "\u2069", quote=False)


def cell_piece(piece: str, completes: str | None, limit: int = 8) -> str:
    """A chart cell for one token: a byte-only token shows its byte and the character it starts,
    ⟨D0⟩→П, so a split letter reads as one letter in two tokens."""
    if completes is None:
        return show_piece(piece, limit=limit)
    return show_piece(piece, limit=limit - 2) + html.escape("→" + completes, quote=False)


def byte_hover(piece: str, completes: str | None) -> str:
    """Hover text of a byte-only token: its bytes and the whole character's UTF-8 bytes."""
    if completes is None:
        return hover_piece(piece)
    own = " ".join(f"{b:02X}" for b in escaped_bytes(piece))
    whole = " ".join(f"{b:02X}" for b in completes.encode("utf-8"))
    return T.FIG_BYTE_HOVER.format(bytes=own, char=html.escape(completes, quote=False), utf8=whole)


def hover_piece(piece: str) -> str:
    """A token's full text for hover labels (escaped, whitespace and controls visible)."""
    return show_piece(piece, limit=60)


def first_changed_block(comparison: PromptComparison) -> int | None:
    """Index of B's first block that is not a hit (None when every block is a hit)."""
    for blk in comparison.blocks:
        if blk.status != "hit":
            return blk.index
    return None


# ----------------------------------------------------------------------------- token strips


_CODES = {"a": 0, "hit": 1, "miss": 2, "invalidated": 3, "partial": 4, "changed": 5}


def token_strip_figure(
    pieces_a: Sequence[str],
    ids_a: Sequence[int],
    pieces_b: Sequence[str],
    ids_b: Sequence[int],
    changed_a: Sequence[int],
    changed_b: Sequence[int],
    comparison: PromptComparison,
    row_start: int = 0,
    row_end: int | None = None,
    width: int = TOKENS_PER_ROW,
) -> go.Figure:
    """Both prompts as a grid of ``width`` tokens per row, A's row directly above B's row for the same
    positions; thick lines at block boundaries. B's cells take their block's status colour, A's a
    neutral colour; changed tokens are magenta. Invisible markers make tokens clickable
    (customdata = [side, position])."""
    bs = comparison.block_size
    total_rows = max(math.ceil(len(pieces_a) / width), math.ceil(len(pieces_b) / width), 1)
    row_end = total_rows if row_end is None else max(row_start + 1, min(row_end, total_rows))
    rows = list(range(max(0, row_start), row_end))
    status_of = {p: blk.status for blk in comparison.blocks for p in range(blk.start, blk.end)}
    set_a, set_b = set(changed_a), set(changed_b)
    sides = (
        ("A", pieces_a, ids_a, ["changed" if p in set_a else "a" for p in range(len(pieces_a))]),
        ("B", pieces_b, ids_b, ["changed" if p in set_b else status_of.get(p, "partial") for p in range(len(pieces_b))]),
    )
    colors = [A_LIGHT, STATUS_LIGHT["hit"], STATUS_LIGHT["miss"], STATUS_LIGHT["invalidated"],
              STATUS_LIGHT["partial"], CHANGED_COLOR]
    scale = []
    for i, col in enumerate(colors):
        scale += [[i / len(colors), col], [(i + 1) / len(colors), col]]

    z, text, ylabels = [], [], []
    px, py, pdata, phover = [], [], [], []
    completes = {"A": completed_chars(pieces_a), "B": completed_chars(pieces_b)}
    for k, r in enumerate(rows):
        for s_i, (side, pieces, ids, cats) in enumerate(sides):
            y = 2 * k + s_i
            zr, tr = [], []
            for c in range(width):
                p = r * width + c
                if p < len(pieces):
                    zr.append(_CODES[cats[p]])
                    done = completes[side][p]
                    tr.append(cell_piece(pieces[p], done))
                    px.append(c)
                    py.append(y)
                    pdata.append([side, p])
                    phover.append(T.FIG_TOKEN_HOVER.format(side=side, pos=p, block=p // bs,
                                                           piece=byte_hover(pieces[p], done), id=ids[p]))
                else:
                    zr.append(None)
                    tr.append("")
            z.append(zr)
            text.append(tr)
            ylabels.append(f"{side} t{r * width}")
    fig = go.Figure()
    fig.add_trace(go.Heatmap(
        z=z, x=list(range(width)), y=list(range(len(z))), text=text, texttemplate="%{text}",
        textfont={"family": FONT, "size": 12, "color": "#111827"}, colorscale=scale, zmin=-0.5,
        zmax=len(colors) - 0.5, showscale=False, xgap=1, ygap=0, hoverinfo="skip",
    ))
    fig.add_trace(go.Scatter(
        x=px, y=py, customdata=pdata, mode="markers", name="tokens", showlegend=False,
        marker={"size": 18, "symbol": "square", "color": "#000000", "opacity": 0.0},
        selected={"marker": {"opacity": 0.25, "color": "#000000"}}, unselected={"marker": {"opacity": 0.0}},
        hovertext=phover, hoverinfo="text",
    ))
    line = {"color": BOUNDARY_COLOR, "width": 2.5}
    for k, r in enumerate(rows):
        top, bottom = 2 * k - 0.5, 2 * k + 1.5
        row_first = r * width
        if k > 0:  # between pairs: thick when a block starts here, else a thin separator
            thick = row_first % bs == 0
            fig.add_shape(type="line", x0=-0.5, x1=width - 0.5, y0=top, y1=top,
                          line=line if thick else {"color": "#ffffff", "width": 5})
        for c in range(1, width):
            if (row_first + c) % bs == 0:
                fig.add_shape(type="line", x0=c - 0.5, x1=c - 0.5, y0=top, y1=bottom, line=line)
    legend = [(T.FIG_A_TOKEN, A_LIGHT)] + [(T.STATUS_MEANING[s], STATUS_LIGHT[s]) for s in STATUS_LIGHT]
    legend.append((T.FIG_CHANGED, CHANGED_COLOR))
    for name, color in legend:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=name, hoverinfo="skip",
                                 marker={"size": 12, "symbol": "square", "color": color,
                                         "line": {"color": OUTLINE_GREY, "width": 1}}))
    fig.update_layout(
        height=70 + 21 * len(z) + 40, margin={"l": 60, "r": 10, "t": 10, "b": 10}, clickmode="event+select",
        dragmode=False, plot_bgcolor="#ffffff",
        legend={"orientation": "h", "y": -0.01, "yanchor": "top", "x": 0, "font": {"size": 12}},
        xaxis={"range": [-0.5, width - 0.5], "showticklabels": False, "showgrid": False, "zeroline": False,
               "fixedrange": True},
        yaxis={"autorange": "reversed", "tickvals": list(range(len(z))), "ticktext": ylabels, "showgrid": False,
               "zeroline": False, "tickfont": {"size": 12, "family": FONT}, "fixedrange": True},
    )
    return fig


# ----------------------------------------------------------------------------- the chains and the cascade


@dataclass(frozen=True)
class ChainRow:
    """One row of the chain figure: a block index, or a gap standing for ``gap`` skipped blocks."""

    index: int | None
    gap: tuple[int, ...] = ()


def chain_rows(comparison: PromptComparison, max_rows: int = 24) -> list[ChainRow]:
    """Rows to draw: every block when they fit, else the head, the blocks around and after the first
    change (as many as fit) and the last two, with gap rows standing for the blocks left out."""
    n = len(comparison.blocks)
    if n <= max_rows:
        return [ChainRow(i) for i in range(n)]
    fc = first_changed_block(comparison)
    keep = {0, 1, n - 2, n - 1}
    if fc is not None:
        keep |= {max(0, fc - 1), fc}
        i = fc + 1
        while len(keep) < max_rows - 3 and i < n:
            keep.add(i)
            i += 1
    else:
        keep |= set(range(min(n, max_rows - 6)))
    rows: list[ChainRow] = []
    prev = -1
    for i in sorted(keep):
        if i > prev + 1:
            rows.append(ChainRow(None, tuple(range(prev + 1, i))))
        rows.append(ChainRow(i))
        prev = i
    return rows


def _gap_text(comparison: PromptComparison, gap: Sequence[int]) -> str:
    counts = Counter(comparison.blocks[i].status for i in gap)
    summary = ", ".join(f"{c} {s}" for s, c in counts.items())
    return T.FIG_GAP.format(count=len(gap), summary=summary)


def chain_figure(comparison: PromptComparison, max_rows: int = 24) -> go.Figure:
    """A's chain (left) and B's chain (right), one row per block, coloured by B's status, with an
    animation (Play / slider) that walks B's lookup from the first changed block to the end."""
    blocks = comparison.blocks
    rows = chain_rows(comparison, max_rows)
    fc = first_changed_block(comparison)
    ys = {row.index: -k for k, row in enumerate(rows) if row.index is not None}

    def label_a(i: int) -> str:
        b = blocks[i]
        if b.hash_a is None and not b.tokens_a:
            return "—"
        if b.hash_a is None:
            return T.FIG_BLOCK_PARTIAL.format(index=i, start=b.start, end=b.start + len(b.tokens_a) - 1)
        return T.FIG_BLOCK_LABEL.format(index=i, start=b.start, end=b.start + len(b.tokens_a) - 1,
                                        hash=short_hash(b.hash_a))

    def label_b(i: int, revealed: bool) -> str:
        b = blocks[i]
        parent = T.FIG_PARENT.format(parent=short_hash(b.parent_b))
        if not revealed:
            return T.FIG_BLOCK_LABEL_B.format(index=i, start=b.start, end=b.end - 1, hash="????????", parent=parent,
                                              status=T.FIG_NOT_CHECKED)
        own = short_hash(b.hash_b) if b.hash_b is not None else T.FIG_NO_HASH
        if b.hash_b is not None and b.hash_b != b.hash_a:
            own = f"<span style='color:{STATUS_COLORS['miss']}'>{own}</span>"
        if b.parent_a is not None and b.parent_b != b.parent_a:
            parent = f"<span style='color:{STATUS_COLORS['miss']}'>{parent}</span>"
        return T.FIG_BLOCK_LABEL_B.format(index=i, start=b.start, end=b.end - 1, hash=own, parent=parent,
                                          status=f"<b>{T.STATUS_LABELS[b.status]}</b>")

    idx = [row.index for row in rows if row.index is not None]
    y_idx = [ys[i] for i in idx]
    a_has = [i for i in idx if blocks[i].tokens_a]
    fig = go.Figure()
    # links: each chain is a line through its blocks (a parent -> child link per step)
    fig.add_trace(go.Scatter(x=[0.0] * len(a_has), y=[ys[i] for i in a_has], mode="lines", hoverinfo="skip",
                             line={"color": "#b6c6dc", "width": 3}, showlegend=False))
    fig.add_trace(go.Scatter(x=[B_X] * len(idx), y=y_idx, mode="lines", hoverinfo="skip",
                             line={"color": "#c4c8ce", "width": 3}, showlegend=False))
    fig.add_trace(go.Scatter(
        x=[0.0] * len(a_has), y=[ys[i] for i in a_has], mode="markers+text",
        text=[label_a(i) for i in a_has], textposition="middle right",
        marker={"size": 18, "symbol": "square", "color": [A_COLOR if blocks[i].hash_a else STATUS_COLORS["partial"] for i in a_has]},
        textfont={"family": FONT, "size": 12}, hoverinfo="text", showlegend=False,
        hovertext=[T.FIG_HOVER_A.format(index=i, hash=short_hash(blocks[i].hash_a, 16),
                                         parent=short_hash(blocks[i].parent_a, 16)) for i in a_has],
    ))

    def b_trace(revealed_upto: int | None, current: int | None) -> go.Scatter:
        """B's blocks; blocks with index >= revealed_upto are 'not checked yet'."""
        def shown(i: int) -> bool:
            return revealed_upto is None or i < revealed_upto

        return go.Scatter(
            x=[B_X] * len(idx), y=y_idx, mode="markers+text",
            text=[label_b(i, shown(i)) for i in idx], textposition="middle right",
            marker={
                "size": [26 if i == current else 18 for i in idx], "symbol": "square",
                "color": [STATUS_COLORS[blocks[i].status] if shown(i) else UNCHECKED_COLOR for i in idx],
                "line": {"color": [BOUNDARY_COLOR if i == current else "rgba(0,0,0,0)" for i in idx], "width": 2},
            },
            textfont={"family": FONT, "size": 12}, hoverinfo="text", showlegend=False,
            hovertext=[T.FIG_HOVER_B.format(index=i, meaning=T.STATUS_MEANING[blocks[i].status],
                                             reason=html.escape(render_block_reason(blocks[i].code,
                                                                                     blocks[i].params)))
                       for i in idx],
        )

    fig.add_trace(b_trace(None, None))
    b_index = len(fig.data) - 1
    gap_rows = [(k, row) for k, row in enumerate(rows) if row.index is None]
    if gap_rows:
        fig.add_trace(go.Scatter(
            x=[B_X / 2] * len(gap_rows), y=[-k for k, _ in gap_rows], mode="text",
            text=[f"<i>{_gap_text(comparison, row.gap)}</i>" for _, row in gap_rows],
            textfont={"size": 12, "color": MUTED}, hoverinfo="skip", showlegend=False,
        ))
    for status in ("hit", "miss", "invalidated", "partial"):  # short names: one legend line at 1024 px
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=T.STATUS_LABELS[status],
                                 marker={"size": 12, "symbol": "square", "color": STATUS_COLORS[status]}))
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=T.FIG_CHAIN_A,
                             marker={"size": 12, "symbol": "square", "color": A_COLOR}))

    height = 170 + 30 * len(rows)
    fig.update_layout(
        height=height, margin={"l": 10, "r": 10, "t": 70, "b": 10}, plot_bgcolor="#ffffff",
        xaxis={"range": [-0.03, 2.0], "visible": False, "fixedrange": True},
        yaxis={"range": [-(len(rows) - 0.4), 1.3], "visible": False, "fixedrange": True},
        legend={"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 0, "font": {"size": 12}},
        annotations=[
            {"x": 0.0, "y": 0.5, "xref": "x", "yref": "y", "text": f"<b>{T.FIG_CHAIN_A}</b>", "showarrow": False,
             "xanchor": "left", "yanchor": "bottom"},
            {"x": B_X, "y": 0.5, "xref": "x", "yref": "y", "text": f"<b>{wrap_title(T.FIG_CHAIN_B, 40)}</b>",
             "showarrow": False, "xanchor": "left", "yanchor": "bottom", "align": "left"},
        ],
    )
    steps = [i for i in idx if fc is not None and i >= fc]
    if not steps:
        fig.update_layout(title={"text": wrap_title(T.FIG_CASCADE_NONE, 64), "font": {"size": 13}, "x": 0.01,
                                 "y": 1, "yref": "container", "yanchor": "top", "pad": {"t": 10}},
                          margin={"t": 100})
        return fig

    def step_text(i: int) -> str:
        b = blocks[i]
        if b.status == "miss":
            return T.FIG_STEP_MISS.format(index=i, hash=short_hash(b.hash_b))
        if b.status == "invalidated":
            return T.FIG_STEP_INVALIDATED.format(index=i, parent=short_hash(b.parent_b),
                                                 parent_a=short_hash(b.parent_a), hash=short_hash(b.hash_b))
        if b.status == "partial":
            return T.FIG_STEP_PARTIAL.format(index=i, count=b.end - b.start)
        return T.FIG_STEP_HIT.format(index=i)

    frames = [go.Frame(name="start", data=[b_trace(fc, None)], traces=[b_index],
                       layout={"title": {"text": wrap_title(T.FIG_CASCADE_START.format(first=fc), 64)}})]
    for i in steps:
        frames.append(go.Frame(name=f"b{i}", data=[b_trace(i + 1, i)], traces=[b_index],
                               layout={"title": {"text": wrap_title(step_text(i), 64)}}))
    fig.frames = frames
    counts = Counter(blocks[i].status for i in range(fc, len(blocks)))
    summary = T.FIG_CASCADE_SUMMARY.format(
        first=fc, miss=counts.get("miss", 0), invalidated=counts.get("invalidated", 0),
        partial=counts.get("partial", 0), hits=fc)
    fig.update_layout(
        title={"text": wrap_title(summary, 64), "font": {"size": 13}, "x": 0.01, "y": 1, "yref": "container",
               "yanchor": "top", "pad": {"t": 10}},
        # t: the two-line title (about 46 px) and the legend (about 20 px) above the plot, no empty band, so
        # the whole figure fits under the controls on a 1024x768 projector in presenter mode
        margin={"l": 10, "r": 10, "t": 100, "b": 70},
        height=height + 90,
        updatemenus=[{
            "type": "buttons", "direction": "left", "x": 0.0, "y": -0.01, "xanchor": "left", "yanchor": "top",
            "showactive": False, "pad": {"t": 4, "r": 8},
            "buttons": [
                {"label": T.FIG_PLAY, "method": "animate",
                 "args": [None, {"frame": {"duration": 900, "redraw": True}, "fromcurrent": False,
                                 "transition": {"duration": 0}, "mode": "immediate"}]},
                {"label": T.FIG_PAUSE, "method": "animate",
                 "args": [[None], {"frame": {"duration": 0, "redraw": False}, "mode": "immediate"}]},
            ],
        }],
        sliders=[{
            "active": len(frames) - 1, "x": 0.3, "len": 0.7, "y": -0.01, "yanchor": "top",
            "currentvalue": {"prefix": T.FIG_SLIDER, "font": {"size": 12}}, "pad": {"t": 4},
            "steps": [{"label": T.FIG_SLIDER_START if f.name == "start" else f"#{f.name[1:]}", "method": "animate",
                       "args": [[f.name], {"frame": {"duration": 0, "redraw": True}, "mode": "immediate",
                                           "transition": {"duration": 0}}]} for f in frames],
        }],
    )
    # the figure opens on the final state (the whole cascade); Play replays it from the start
    return fig


# ----------------------------------------------------------------------------- the K/V difference map


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
        fig.add_annotation(x=first_changed - 0.5, y=-0.5, yanchor="bottom", text=T.FIG_FIRST_CHANGE,
                           showarrow=False, font={"color": CHANGED_COLOR, "size": 12}, xanchor="left")
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
