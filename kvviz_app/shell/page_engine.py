"""The process-wide engine loop for a page, or the engine's refusal of the loaded model worded on the page
(a model the engine cannot run stops only the pages that need the engine)."""

from __future__ import annotations

import streamlit as st

from kvviz.engine import EngineLoop, get_engine_loop
from kvviz.errors import CodedError
from kvviz_app.shell import ui
from kvviz_app.shell.i18n import texts

T = texts("engine_view")


def engine_loop_or_stop() -> EngineLoop:
    """``get_engine_loop()``; when the engine refuses the model or a ``KVVIZ_KV_OFFLOADING_*`` value, an error box
    and ``st.stop()``."""
    try:
        return get_engine_loop()
    except CodedError as exc:
        if exc.code in ("bad_env_kv_offloading", "bad_env_kv_offloading_policy"):  # one line, no traceback
            st.error(ui.error_text(exc), icon=":material/error:")
            st.stop()
        if exc.code != "engine_unsupported_model":
            raise
        st.error(T.UNSUPPORTED.format(**exc.params), icon=":material/block:")
        st.stop()
        raise  # st.stop() raises; never reached
