"""Tables whose words stay whole: by default (ui.py's CSS) a table cell may break a word anywhere, so that a
wide table still fits 1024 px; a table of short headers beside one long text column then printed "ход" one
letter a line. Here cells wrap between words only, and API field names in headers
(``cache_read_input_tokens``) may wrap after an underscore (a zero-width space follows each one). Use it for
tables whose longest words fit their columns at 1024 px (checked in the browser tests)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

ZERO_WIDTH_SPACE = "\u200b"


def header_label(name: str) -> str:
    """``name`` with a wrap opportunity after each underscore (shown the same)."""
    return name.replace("_", "_" + ZERO_WIDTH_SPACE)


def wrapping_table(frame: pd.DataFrame, key: str) -> None:
    """Show ``frame`` as an HTML table without its index column, words whole, field names wrapping at
    underscores; ``key`` names its container (unique on the page)."""
    with st.container(key=f"wordwrap_{key}"):
        st.table(frame.rename(columns={c: header_label(str(c)) for c in frame.columns}), hide_index=True)
