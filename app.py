"""kvviz entry point: navigation and model status, nothing else."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

import ui
from kvviz.text import common as T

ROOT = Path(__file__).resolve().parent

st.set_page_config(page_title=T.APP_TITLE, page_icon=":material/memory:", layout="wide")

ui.render_language_switch()  # before the navigation, so its titles are in the session's language
pages = [
    st.Page(str(ROOT / path), title=title, icon=icon, default=(i == 0))
    for i, (path, title, icon) in enumerate(T.PAGES)
    if (ROOT / path).exists()
]
navigation = st.navigation(pages)
ui.announce_presenter_key()  # once per server process: the room's presenter key in the server log
ui.render_model_sidebar()
navigation.run()
