"""The timing side channel, measured on the real model: cached vs uncached probe latencies with salts off
and on, and the attacker game, each probe timed alone on the engine. UI only: every number comes from
kvviz.experiments.security.side_channel and kvviz.experiments.security.attacker; the parts are
kvviz_app.security.side_channel_view."""

from __future__ import annotations

import streamlit as st

from kvviz.util.blank import is_blank
from kvviz_app.security import side_channel_view as V
from kvviz_app.shell import ui, ui_present
from kvviz_app.shell.i18n import texts

T = texts("security")

ui.page_header(T.SC_TITLE, T.SC_INTRO)
ui.get_model()  # the sidebar's model status; the probes run on the process-wide engine (the embedded model)

# ----------------------------------------------------------------------------- the measurement
st.subheader(T.SC_SETUP)
c = st.columns([1, 1, 1])
trials = c[0].slider(T.SC_TRIALS, 3, 40, 10, key="sc_trials", help=T.SC_TRIALS_HELP)
blocks = c[1].select_slider(T.SC_BLOCKS, [1, 2, 4, 8, 16, 32, 64], value=4, key="sc_blocks", help=T.SC_BLOCKS_HELP)
st.caption(T.SC_HOW.format(blocks=blocks))
if c[2].button(T.SC_RUN, key="sc_run", type="primary", icon=":material/timer:"):
    V.measure(trials, blocks)
V.measurement()

# ----------------------------------------------------------------------------- the attacker game
st.subheader(T.GAME)
st.markdown(T.GAME_INTRO)
template = st.text_area(T.GAME_TEMPLATE_LABEL, T.GAME_TEMPLATE_DEFAULT, key="sc_template", height=100)
c = st.columns([3, 1, 1])
candidates_text = c[0].text_input(T.GAME_CANDIDATES_LABEL, T.GAME_CANDIDATES_DEFAULT, key="sc_candidates")
rounds = c[1].slider(T.GAME_ROUNDS, 2, 20, 6, key="sc_rounds")
candidates = [x.strip() for x in candidates_text.split(",") if not is_blank(x)]
if c[2].button(T.GAME_RUN, key="sc_play", type="primary", icon=":material/sports_esports:"):
    V.play(rounds, template, candidates)
V.games()

st.subheader(T.DEFENCES)
st.markdown(T.DEFENCES_TEXT)
ui_present.next_link("pages/side_channel.py")
