"""The shared room: every browser session sends its prompts to the one engine (its pool, its prefix cache),
the salt switch, the room's totals, the API's requests beside them and the presenter's reset. UI only: the
room is kvviz.experiments.room.service.get_room(); its parts are drawn by kvviz_app.room.view."""

from __future__ import annotations

import streamlit as st

from kvviz.experiments.room.service import get_room
from kvviz_app.room import view as V
from kvviz_app.shell import ui, ui_present, ui_share
from kvviz_app.shell.i18n import texts, tr

T = texts("security")

ui.page_header(T.ROOM_TITLE, T.ROOM_INTRO)
if ui_share.presenting():
    ui_present.join_panel()
room = get_room()
sid = V.join(room)
ui.get_model()  # the sidebar's model status; the room runs on the process-wide engine (the embedded model)

# ----------------------------------------------------------------------------- the room's totals (live)
st.subheader(T.ROOM_TOTALS)
live = st.toggle(T.ROOM_LIVE, value=True, key="room_live")
totals_area = st.container()  # filled at the end of the run, so a prompt sent now is counted

# ----------------------------------------------------------------------------- your session
st.subheader(T.YOUR_SESSION)
V.default_prompt()
c = st.columns([2, 3])
with c[0]:
    mode = st.radio(T.SALT_LABEL, list(T.SALT_OPTIONS), format_func=T.SALT_OPTIONS.get, key="room_salt",
                    help=T.SALT_HELP)
    team = ""
    if mode == "team":
        team = st.text_input(T.TEAM_LABEL, key="room_team", help=T.TEAM_HELP, max_chars=room.limits.max_team_salt_chars)
    V.salt_status(room, sid, mode, team)
with c[1]:
    st.selectbox(T.PRESET_LABEL, V.PRESET_NAMES, key="room_preset", on_change=V.use_preset, format_func=tr)
    text = st.text_area(T.PROMPT_LABEL, key="room_text", height=150,
                        help=T.PROMPT_HELP.format(limit=room.limits.max_prompt_tokens))
    if st.button(T.SEND, key="room_send", type="primary", icon=":material/send:"):
        V.send(room, sid, text)

# ----------------------------------------------------------------------------- your last prompt, the feed (live)
V.last_prompt(room, sid)
st.subheader(T.FEED)
st.fragment(run_every=5 if live else None)(V.feed)(room, sid)
V.api_requests()
with totals_area:
    st.fragment(run_every=5 if live else None)(V.totals)(room)

# ----------------------------------------------------------------------------- presenter
V.presenter(room)
ui_present.next_link("pages/room.py")
