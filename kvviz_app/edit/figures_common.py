"""The "Edit one character" figures' shared palette and token-text helpers (whitespace, control
characters and split UTF-8 bytes made visible, escaped for Plotly)."""

from __future__ import annotations

import html
import re
import unicodedata

from kvviz.analysis.prompt_compare import PromptComparison
from kvviz.util.utf8 import escaped_bytes
from kvviz_app.shell.i18n import texts
from kvviz_app.shell.style import INK

T = texts("edit")

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
B_X = 0.8  # x of B's chain in the chain figure (A's is 0): A's longest labels end before B's squares on a ~545 px chart (1024 px screen); B's fit the 1.2 units after it


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
