"""The app's navigation: one run of app.py (page config, language, the pages through ``st.navigation``, the
sidebar, then the chosen page). The route table and the legacy-folder rerun live in ``routes``."""

from __future__ import annotations

import streamlit as st

from kvviz_app.shell import ui, ui_present
from kvviz_app.shell.routes import IN_APP, pages

#: The app's name in the browser tab: a name, the same in every language.
APP_TITLE = "kvviz"


def main() -> None:
    """One run of the app: page config, language, navigation, the sidebar, then the chosen page."""
    presenting = ui_present.begin_run()  # ?present=1 / the sidebar toggle; collapses the sidebar on a projector
    st.set_page_config(page_title=APP_TITLE, page_icon=":material/memory:", layout="wide",
                       initial_sidebar_state="collapsed" if presenting else "auto")
    ui.render_language_switch()  # before the navigation, so its titles are in the session's language
    navigation = st.navigation(pages(), expanded=True)  # every page listed: no "View N more" (English, hides pages)
    ui.announce_presenter_key()  # once per server process: the room's presenter key in the server log
    ui.render_model_sidebar()
    ui_present.sidebar()
    token = IN_APP.set(True)
    try:
        navigation.run()
    finally:
        IN_APP.reset(token)
