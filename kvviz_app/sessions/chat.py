"""The sessions page's real chat: messages through the engine, each turn's cache reads. UI only: the chat
is kvviz.experiments.sessions.chat, the engine kvviz.engine."""

from __future__ import annotations

import secrets

import pandas as pd
import streamlit as st

from kvviz.errors import CodedError
from kvviz.experiments.sessions.chat import Chat, ChatTurn, chat_turn
from kvviz_app.shell import ui
from kvviz_app.shell.i18n import texts

T = texts("sessions")

CHAT_NEW_TOKENS = 48


def render_chat() -> None:
    st.subheader(T.CHAT_HEADER)
    st.markdown(T.CHAT_INTRO.format(new=CHAT_NEW_TOKENS))
    st.caption(T.CHAT_TINY)  # the settings were measured: none makes this model's Russian better (docs/PAGES.md)
    chat: Chat = st.session_state.setdefault("ss_chat", Chat())
    with st.form("ss_chat_form", clear_on_submit=True):
        message = st.text_input(T.CHAT_INPUT, key="ss_chat_input")
        send = st.form_submit_button(T.CHAT_SEND, type="primary", icon=":material/send:")
    if st.button(T.CHAT_NEW, key="ss_chat_new", icon=":material/restart_alt:"):
        chat = st.session_state["ss_chat"] = Chat()
    if send and message.strip():
        ui.get_model()  # loads with progress the first time
        from kvviz.engine import get_engine_loop

        try:
            chat_turn(get_engine_loop(), chat, message, max_tokens=CHAT_NEW_TOKENS,
                      request_id=f"chat-{secrets.token_hex(6)}")
        except CodedError as exc:
            ui.show_error(exc)
    if not chat.turns:
        st.caption(T.CHAT_EMPTY)
        return
    probs = st.toggle(T.CHAT_PROBS, key="ss_chat_probs", help=T.CHAT_PROBS_HELP)
    for turn in chat.turns:
        with st.chat_message("user"):
            st.markdown(turn.user)
        with st.chat_message("assistant"):
            st.markdown(turn.answer)
            if probs and turn.choices:
                _token_table(turn)
    last = chat.turns[-1]
    st.caption(T.CHAT_LINE.format(turn=len(chat.turns), cached=last.cached_tokens, prompt=last.prompt_tokens,
                                  computed=last.computed_tokens))
    if last.compute_ms is not None and last.e2e_ms is not None:
        st.caption(T.CHAT_COMPUTE.format(compute=last.compute_ms, e2e=last.e2e_ms))
    cols = T.CHAT_TABLE
    rows = [{cols["turn"]: i + 1, cols["prompt"]: t.prompt_tokens, cols["cached"]: t.cached_tokens,
             cols["computed"]: t.computed_tokens, cols["answer"]: t.output_tokens,
             cols["ttft"]: None if t.ttft_ms is None else round(t.ttft_ms, 1)} for i, t in enumerate(chat.turns)]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


def _token_table(turn: ChatTurn) -> None:
    """Each answer token with the probability the model gave it and its most likely alternatives."""
    cols = T.CHAT_PROBS_TABLE
    rows = [{cols["token"]: repr(c.text), cols["prob"]: f"{c.prob:.1%}",
             cols["others"]: "  ·  ".join(f"{t!r} {p:.1%}" for t, p in c.top)} for c in turn.choices]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", height=min(36 * (len(rows) + 1), 260))
