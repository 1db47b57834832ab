"""Figures of the "Edit one character" page, one module per family: token strips (``edit_tokens``), the
two block chains with the cascade animation (``edit_chain``) and the per-layer K/V difference map
(``edit_kv``); shared palette and token-text helpers in ``edit_common``. This module names them all."""

from __future__ import annotations

from kvviz_app.edit.figures_chain import MAX_ROWS, ChainRow, chain_figure, chain_rows, rows_fitting
from kvviz_app.edit.figures_common import (
    A_COLOR,
    A_LIGHT,
    B_X,
    BOUNDARY_COLOR,
    CHANGED_COLOR,
    FONT,
    STATUS_COLORS,
    STATUS_LIGHT,
    TOKENS_PER_ROW,
    UNCHECKED_COLOR,
    ZERO_COLOR,
    byte_hover,
    cell_piece,
    first_changed_block,
    hover_piece,
    show_piece,
)
from kvviz_app.edit.figures_kv import kv_heatmap_figure
from kvviz_app.edit.figures_tokens import token_strip_figure

__all__ = [
    "A_COLOR", "A_LIGHT", "B_X", "BOUNDARY_COLOR", "CHANGED_COLOR", "FONT", "STATUS_COLORS", "STATUS_LIGHT",
    "TOKENS_PER_ROW", "UNCHECKED_COLOR", "ZERO_COLOR", "MAX_ROWS", "ChainRow", "byte_hover", "cell_piece", "chain_figure",
    "chain_rows", "rows_fitting", "first_changed_block", "hover_piece", "kv_heatmap_figure", "show_piece", "token_strip_figure",
]
