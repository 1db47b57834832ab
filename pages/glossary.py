"""Glossary: each term in English and Russian, and the engine's own name for it."""

from __future__ import annotations

import streamlit as st

import ui
from kvviz.i18n import use_lang
from kvviz.text import glossary as T


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


# Fixed column widths and long engine names that may break inside, so the four columns fit a 1024 px screen
# instead of running past it.
_TABLE_CSS = ("<style>[data-testid='stMarkdownContainer'] table {width: 100%; table-layout: fixed;}"
              " [data-testid='stMarkdownContainer'] table th:last-child {width: 34%;}"
              " [data-testid='stMarkdownContainer'] table td {overflow-wrap: break-word;}"
              " [data-testid='stMarkdownContainer'] table code {white-space: normal; overflow-wrap: anywhere;}</style>")

ui.page_header(T.TITLE, T.INTRO)
st.markdown(_TABLE_CSS, unsafe_allow_html=True)
query = st.text_input(T.FILTER_LABEL, placeholder=T.FILTER_PLACEHOLDER, key="glossary_filter", max_chars=100)
with use_lang("en"):
    english = T.TERMS
with use_lang("ru"):
    russian = T.TERMS
meanings = T.MEANINGS
needle = query.strip().casefold()
rows = [
    code for code in english
    if not needle or any(needle in s.casefold() for s in (english[code], russian[code], T.ENGINE_NAMES[code]))
]
if rows:
    lines = [
        f"| {T.COL_EN} | {T.COL_RU} | {T.COL_ENGINE} | {T.COL_MEANING} |",
        "|---|---|---|---|",
    ]
    for code in rows:
        engine = T.ENGINE_NAMES[code]
        engine = f"`{engine}`" if engine != "—" else engine
        lines.append(f"| {_cell(english[code])} | {_cell(russian[code])} | {engine} | {_cell(meanings[code])} |")
    st.markdown("\n".join(lines))
else:
    st.info(T.NO_MATCH.format(query=query.strip()))
st.caption(T.SOURCES)
