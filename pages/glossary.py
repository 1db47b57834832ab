"""Glossary: each term in English and Russian, and the engine's own name for it."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from kvviz.mirror.names import ENGINE_NAMES
from kvviz_app.shell import ui
from kvviz_app.shell.i18n import texts, use_lang

T = texts("glossary")

FIDELITY_DOC = Path(__file__).resolve().parents[1] / "docs" / "FIDELITY.md"
# The fidelity document's tables hold long file and test names: let them wrap inside the main area.
_DOC_CSS = (
    "<style>.st-key-fidelity_doc table{table-layout:fixed;width:100%}"
    ".st-key-fidelity_doc code{white-space:normal;overflow-wrap:anywhere}"
    ".st-key-fidelity_doc h1{font-size:1.5rem}.st-key-fidelity_doc h2{font-size:1.2rem}</style>"
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


# The table fits the main area at 1024 px: fixed column widths, and long engine names
# (cached_block_hash_to_block) may wrap instead of pushing the meaning column out of view.
_TABLE_CSS = (
    "<style>.st-key-glossary_table table{table-layout:fixed;width:100%}"
    ".st-key-glossary_table th:nth-child(1){width:16%}.st-key-glossary_table th:nth-child(2){width:18%}"
    ".st-key-glossary_table th:nth-child(3){width:24%}"
    ".st-key-glossary_table td{overflow-wrap:anywhere}.st-key-glossary_table code{white-space:normal}</style>"
)


ui.page_header(T.TITLE, T.INTRO)
query = st.text_input(T.FILTER_LABEL, placeholder=T.FILTER_PLACEHOLDER, key="glossary_filter", max_chars=100)
with use_lang("en"):
    english = T.TERMS
with use_lang("ru"):
    russian = T.TERMS
meanings = T.MEANINGS
needle = query.strip().casefold()
rows = [
    code for code in english
    if not needle or any(needle in s.casefold() for s in (english[code], russian[code], ENGINE_NAMES[code]))
]
if rows:
    lines = [
        f"| {T.COL_EN} | {T.COL_RU} | {T.COL_ENGINE} | {T.COL_MEANING} |",
        "|---|---|---|---|",
    ]
    for code in rows:
        engine = ENGINE_NAMES[code]
        engine = f"`{engine}`" if engine != "—" else engine
        lines.append(f"| {_cell(english[code])} | {_cell(russian[code])} | {engine} | {_cell(meanings[code])} |")
    with st.container(key="glossary_table"):
        st.markdown(_TABLE_CSS, unsafe_allow_html=True)
        st.markdown("\n".join(lines))
else:
    st.info(T.NO_MATCH.format(query=query.strip()))
st.caption(T.SOURCES)
st.caption(T.FIDELITY_LINK)
with st.expander(T.FIDELITY_EXPANDER), st.container(key="fidelity_doc"):
    st.markdown(_DOC_CSS, unsafe_allow_html=True)
    st.markdown(FIDELITY_DOC.read_text(encoding="utf-8") if FIDELITY_DOC.is_file() else "docs/FIDELITY.md")
