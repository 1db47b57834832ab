"""kvviz entry point (`make run` = `streamlit run app.py`); the app itself lives in kvviz_app/.

Streamlit runs this script once per browser run. What one server process shares starts here: the
OpenAI-compatible API on its own port (``start_api_once``: once per process; KVVIZ_API=0 turns it off), over
the process's one engine loop (``kvviz.engine.get_engine_loop``, made on first use, in the API's background
warm-up or by the first page that needs it, and shared by every page and API client). Then the navigation
routes the run to its page.
"""

from kvviz.server.embedded import start_api_once
from kvviz.settings import prefer_passive_openmp
from kvviz_app.shell.navigation import main

prefer_passive_openmp()  # before torch is first imported
start_api_once()
main()
