"""kvviz entry point: navigation and model status, nothing else."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

import ui
import ui_present
from kvviz.text import common as T

ROOT = Path(__file__).resolve().parent

presenting = ui_present.begin_run()  # ?present=1 / the sidebar toggle; collapses the sidebar on a projector
st.set_page_config(page_title=T.APP_TITLE, page_icon=":material/memory:", layout="wide",
                   initial_sidebar_state="collapsed" if presenting else "auto")

ui.render_language_switch()  # before the navigation, so its titles are in the session's language
pages = [
    st.Page(str(ROOT / path), title=title, icon=icon, default=(i == 0))
    for i, (path, title, icon) in enumerate(T.PAGES)
    if (ROOT / path).exists()
]
navigation = st.navigation(pages, expanded=True)  # every page listed: no "View N more" (English, and hides pages)
ui.announce_presenter_key()  # once per server process: the room's presenter key in the server log
ui.render_model_sidebar()
ui_present.sidebar()
navigation.run()
