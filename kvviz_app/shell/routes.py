"""The app's route table (page script, sidebar title, icon) and the way out of Streamlit's legacy folder mode.

Every route names a file under pages/; a route whose file is missing stops the app at
start-up with :class:`MissingPageError` instead of dropping the page from the sidebar.

Streamlit treats a ``pages/`` folder beside the main script as its legacy multipage folder until the
process's first ``st.navigation`` call: on a fresh server, a first deep link (``/edit``, a share link) runs
the page file alone. ``leave_legacy_folder_mode`` (called by every page's header) notices such a run and
reruns it through app.py, with public calls only. The navigation (``navigation.main``) and the page
header (``ui.page_header``) both use this module; it uses neither.
"""

from __future__ import annotations

import sys
from contextvars import ContextVar
from pathlib import Path

import streamlit as st

from kvviz_app.shell.i18n import texts

T = texts("common")

#: The repo root: route paths are relative to it (the folder of app.py, Streamlit's main script).
ROOT = Path(__file__).resolve().parents[2]
#: True while app.py's navigation runs the chosen page (this thread's run).
IN_APP: ContextVar[bool] = ContextVar("kvviz_in_app", default=False)


class MissingPageError(RuntimeError):
    """A route names a page script that does not exist (a start-up error, never a silent drop)."""


def routes() -> list[tuple[str, str, str]]:
    """(script path, title in the session's language, icon) of every page, in sidebar order."""
    table = list(T.PAGES)
    missing = [path for path, _title, _icon in table if not (ROOT / path).is_file()]
    if missing:
        raise MissingPageError(f"route table names missing page scripts: {', '.join(missing)}")
    return table


def pages() -> list[st.Page]:
    """Every route as an ``st.Page`` (the first is the default)."""
    return [st.Page(str(ROOT / path), title=title, icon=icon, default=(i == 0))
            for i, (path, title, icon) in enumerate(routes())]


def leave_legacy_folder_mode() -> None:
    """A page run under app.py (the main script) but not through its navigation is Streamlit's legacy
    folder mode: register the app's pages (``st.navigation`` ends that mode for the process) and rerun, so
    the same URL resolves through app.py with its sidebar and language. A page run as its own main script
    (AppTest, ``streamlit run pages/x.py``) is left alone."""
    if IN_APP.get():
        return
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    if main_file is None or Path(main_file).resolve() != ROOT / "app.py":
        return
    st.navigation(pages(), position="hidden")
    st.rerun()
