"""The kvviz app: the only package that imports Streamlit and Plotly and holds UI words.

``app.py`` starts the process's API once (``kvviz.server.embedded.start_api_once``) and calls
:func:`kvviz_app.shell.navigation.main`; the shell modules (``ui*.py``) serve every page; the
page scripts live in ``pages/`` (not ``pages/``, which Streamlit would also pick up as a
legacy multipage folder).
"""
