"""Block table and LRU free queue: a scenario player over the block manager's recorded events.
UI only: the state at every step comes from kvviz.analysis.scenarios.play (event replay); the player's state
and callbacks are kvviz_app.block_table.player, its pictures kvviz_app.block_table.view."""

from __future__ import annotations

import streamlit as st

from kvviz.analysis.scenarios.load import builtin_names
from kvviz.analysis.scenarios.records import HOST_TIER_CHOICES, MAX_REQUEST_TOKENS, ScenarioStep
from kvviz.mirror.host_arc import EVICTION_POLICIES
from kvviz_app.block_table import player as P
from kvviz_app.block_table import view as V
from kvviz_app.shell import style, ui, ui_chart, ui_present, ui_schemas, ui_share
from kvviz_app.shell.i18n import current_lang, texts, tr

T = texts("block_table")

P.init()

# ----------------------------------------------------------------------------- header and controls
# Compact on purpose: the controls and the pool / free queue fit one 1024x768 screen, so a presenter
# never scrolls while it plays. The scenario's description, the legend and "add a request" follow below.
ui.page_header(T.TITLE)
SHARE = ui_schemas.block_table()
ui_share.restore("block_table", SHARE, link_here=False)  # "Copy link" goes in the player's row, below
PICTURE = ui_present.key_slot()  # presenter mode: the player (pool and free queue first) at the top

names = builtin_names()
# the link keeps its share of the row (a quarter): narrower, "Copy link" in Russian broke over two lines at 1024 px
c_name, c_host, c_speed, c_link = st.columns([2.5, 1.1, 1.6, 1.7], vertical_alignment="bottom")
with c_link:  # beside the scenario, not on its own row under the title: with the null block the pool grid has
    # a fourth row, and the pool must still end above the fold of a 1024x768 screen while it plays
    ui_share.link_slot("block_table")
name = c_name.selectbox(T.SCENARIO, names, key=P.K_NAME, on_change=P.on_scenario, help=T.SCENARIO_HELP,
                        format_func=lambda n: tr(V.builtin(n).title))
host_blocks = c_host.selectbox(T.HOST_TIER, HOST_TIER_CHOICES, key=P.K_HOST,  # keeps the step: compare
                               help=T.HOST_TIER_HELP,
                               format_func=lambda n: str(n) if n else T.HOST_TIER_OFF)
host_policy = "lru"
if host_blocks:  # under the size, label hidden (its words are the size's help): a fifth column broke the labels
    # of the row over three lines in Russian at 1024 px; only with a host tier, so the default row keeps its height
    host_policy = c_host.selectbox(T.HOST_POLICY, EVICTION_POLICIES, key=P.K_HOST_POLICY, help=T.HOST_POLICY_HELP,
                                   format_func=T.HOST_POLICY_NAMES.get, label_visibility="collapsed")
speed = c_speed.select_slider(T.SPEED, P.SPEEDS, value=1.0, key=P.K_SPEED, help=T.SPEED_HELP)
interval = 1.0 / float(speed)
base = V.builtin(name)
extra: list[ScenarioStep] = list(ui.user_steps(name))  # shared with the radix page through ui
scenario = base.with_steps(extra).with_host_tier(host_blocks, host_policy)
run = V.play(scenario, current_lang())
n_steps = run.num_steps
P.set_steps(n_steps)

playing = P.playing()
with st.container(horizontal=True):
    st.button(T.RESET, key="bt_reset", on_click=P.reset, icon=":material/first_page:")
    st.button(T.BACK, key="bt_back", on_click=P.back, icon=":material/chevron_left:",
              disabled=P.step() == 0 and not playing)
    st.button(T.FORWARD, key="bt_fwd", on_click=P.forward, icon=":material/chevron_right:",
              disabled=P.step() >= n_steps and not playing)
    if playing:
        st.button(T.PAUSE, key="bt_pause", on_click=P.pause, icon=":material/pause:", type="primary")
    else:
        st.button(T.PLAY, key="bt_play", on_click=P.play_pressed, icon=":material/play_arrow:", type="primary")


# ----------------------------------------------------------------------------- the step


def _player() -> None:
    n = run.num_steps
    k = P.tick(interval, n)
    view = run.view_at(k)
    previous = run.view_at(k - 1).counters if k > 0 else None
    ui_share.sync("block_table", SHARE, draw=False)
    if P.playing():
        st.progress(k / max(n, 1), text=T.PLAYING_PROGRESS.format(step=T.STEP_HEADER.format(k=k, n=n)))
    else:
        P.jump_slider(k, n)

    figs = V.step_figures(scenario, current_lang(), style.presenter(), ui_share.presenting(), k)
    V.pool_and_queue(view, figs)

    V.step_details(scenario, run, name, k, view, previous, figs)


with PICTURE or st.container():
    st.fragment(_player, run_every=interval if playing else None)()
ui_share.sync("block_table", SHARE)

st.button(T.RESET_CACHE, key="bt_reset_cache", on_click=P.reset_cache, args=(name, extra),
          icon=":material/delete_sweep:", help=T.RESET_CACHE_HELP)

# ----------------------------------------------------------------------------- the scenario, the legend
st.divider()
V.scenario_notes(base, scenario, n_steps)

# ----------------------------------------------------------------------------- add a request
with st.expander(T.ADD_HEADER, expanded=False):
    st.markdown(T.ADD_INTRO)
    with st.form("bt_add_form", border=False):
        text = st.text_area(T.ADD_TEXT, key="bt_add_text", help=T.ADD_TEXT_HELP.format(limit=MAX_REQUEST_TOKENS),
                            height=90)
        c = st.columns([2, 1])
        with_prefix = c[0].checkbox(T.ADD_PREFIX, value=base.prefix_text is not None, key="bt_add_prefix",
                                    help=T.ADD_PREFIX_HELP, disabled=base.prefix_text is None)
        salt = c[1].text_input(T.ADD_SALT, key="bt_add_salt", help=T.ADD_SALT_HELP, max_chars=64)
        c = st.columns([2, 1])
        answer = c[0].text_input(T.ADD_ANSWER, key="bt_add_answer")
        finish = c[1].checkbox(T.ADD_FINISH, value=False, key="bt_add_finish")
        submitted = st.form_submit_button(T.ADD_SUBMIT)
    if submitted:
        P.add_request(scenario, name, extra, text, with_prefix, salt, answer, finish)
    P.added_requests(name, extra)


with st.expander(T.ANIMATION_TITLE):
    ui_chart.plotly_chart(V.animation(scenario, current_lang()), width="stretch", key="bt_animation")
ui_present.next_link("pages/block_table.py", ui_share.current_params(SHARE))
