"""Block table and LRU free queue: a scenario player over the block manager's recorded events.
UI only: the state at every step comes from kvviz.analysis.scenarios.play (event replay)."""

from __future__ import annotations

import time

import streamlit as st

from kvviz.analysis.scenarios.load import builtin_names
from kvviz.analysis.scenarios.records import (
    MAX_REQUEST_TOKENS,
    ScenarioError,
    ScenarioStep,
    next_request_id,
    user_request_steps,
)
from kvviz.mirror.events import usable_blocks
from kvviz.mirror.hashing import resolve_none_hash_seed
from kvviz.util.blank import is_blank
from kvviz_app.block_table import view as V
from kvviz_app.shell import style, ui, ui_chart, ui_present, ui_schemas, ui_share
from kvviz_app.shell.i18n import current_lang, texts, tr

T = texts("block_table")
render_seed = texts("concepts").render_seed

SPEEDS = [0.5, 1.0, 2.0, 4.0]
K_NAME, K_STEP, K_PLAYING, K_TICK, K_SPEED, K_JUMP, K_NSTEPS, K_MSG = (
    "bt_name", "bt_step", "bt_playing", "bt_tick", "bt_speed", "bt_jump", "bt_nsteps", "bt_msg")


# ----------------------------------------------------------------------------- state and callbacks
ss = st.session_state
ss.setdefault(K_STEP, 0)
ss.setdefault(K_PLAYING, False)
ss.setdefault(K_TICK, 0.0)


def _set_step(k: int) -> None:
    ss[K_STEP] = max(0, min(int(k), ss.get(K_NSTEPS, 0)))


def _on_scenario() -> None:
    ss[K_STEP] = 0
    ss[K_PLAYING] = False


def _reset() -> None:
    ss[K_STEP] = 0
    ss[K_PLAYING] = False


def _back() -> None:
    ss[K_PLAYING] = False
    _set_step(ss[K_STEP] - 1)


def _forward() -> None:
    ss[K_PLAYING] = False
    _set_step(ss[K_STEP] + 1)


def _play_pressed() -> None:
    if ss[K_STEP] >= ss.get(K_NSTEPS, 0):
        ss[K_STEP] = 0
    ss[K_PLAYING] = True
    ss[K_TICK] = time.monotonic()
    _set_step(ss[K_STEP] + 1)


def _pause() -> None:
    ss[K_PLAYING] = False


def _jump() -> None:
    # The slider exists only while paused; a stale value the browser still sends for it during playback
    # (the slider was unmounted when Play replaced it with the progress bar) must not stop the player.
    if ss[K_PLAYING] or K_JUMP not in ss:
        return
    _set_step(ss[K_JUMP])


def _reset_cache(name: str, steps: list[ScenarioStep]) -> None:
    """Append a reset_prefix_cache step to this scenario and show it."""
    ui.set_user_steps(name, [*steps, ScenarioStep("reset", "")])
    ss[K_PLAYING] = False
    ss[K_STEP] = ss.get(K_NSTEPS, 0) + 1


# ----------------------------------------------------------------------------- header and controls
# Compact on purpose: the controls and the pool / free queue fit one 1024x768 screen, so a presenter
# never scrolls while it plays. The scenario's description, the legend and "add a request" follow below.
ui.page_header(T.TITLE)
SHARE = ui_schemas.block_table()
ui_share.restore("block_table", SHARE, link_here=False)  # "Copy link" goes in the player's row, below
PICTURE = ui_present.key_slot()  # presenter mode: the player (pool and free queue first) at the top

names = builtin_names()
c_name, c_speed, c_link = st.columns([3, 2, 1.7], vertical_alignment="bottom")
with c_link:  # beside the scenario, not on its own row under the title: with the null block the pool grid has
    # a fourth row, and the pool must still end above the fold of a 1024x768 screen while it plays
    ui_share.link_slot("block_table")
name = c_name.selectbox(T.SCENARIO, names, key=K_NAME, on_change=_on_scenario, help=T.SCENARIO_HELP,
                        format_func=lambda n: tr(V.builtin(n).title))
speed = c_speed.select_slider(T.SPEED, SPEEDS, value=1.0, key=K_SPEED, help=T.SPEED_HELP)
interval = 1.0 / float(speed)
base = V.builtin(name)
extra: list[ScenarioStep] = list(ui.user_steps(name))  # shared with the radix page through ui
scenario = base.with_steps(extra)
run = V.play(scenario, current_lang())
n_steps = run.num_steps
ss[K_NSTEPS] = n_steps
_set_step(ss[K_STEP])

playing = bool(ss[K_PLAYING])
with st.container(horizontal=True):
    st.button(T.RESET, key="bt_reset", on_click=_reset, icon=":material/first_page:")
    st.button(T.BACK, key="bt_back", on_click=_back, icon=":material/chevron_left:",
              disabled=ss[K_STEP] == 0 and not playing)
    st.button(T.FORWARD, key="bt_fwd", on_click=_forward, icon=":material/chevron_right:",
              disabled=ss[K_STEP] >= n_steps and not playing)
    if playing:
        st.button(T.PAUSE, key="bt_pause", on_click=_pause, icon=":material/pause:", type="primary")
    else:
        st.button(T.PLAY, key="bt_play", on_click=_play_pressed, icon=":material/play_arrow:", type="primary")


# ----------------------------------------------------------------------------- the step


def _player() -> None:
    n = run.num_steps
    if ss[K_PLAYING] and time.monotonic() - ss[K_TICK] >= 0.8 * interval:
        ss[K_TICK] = time.monotonic()
        _set_step(ss[K_STEP] + 1)
    if ss[K_PLAYING] and ss[K_STEP] >= n:
        ss[K_PLAYING] = False
        st.rerun()  # the whole page: the Pause button turns back into Play and the timer stops
    k = ss[K_STEP]
    view = run.view_at(k)
    previous = run.view_at(k - 1).counters if k > 0 else None
    ui_share.sync("block_table", SHARE, draw=False)
    if ss[K_PLAYING]:
        st.progress(k / max(n, 1), text=T.PLAYING_PROGRESS.format(step=T.STEP_HEADER.format(k=k, n=n)))
    else:
        ss[K_JUMP] = k
        st.slider(T.JUMP, 0, max(n, 1), key=K_JUMP, on_change=_jump, help=T.JUMP_HELP, disabled=n == 0)

    figs = V.step_figures(scenario, current_lang(), style.presenter(), ui_share.presenting(), k)
    V.pool_and_queue(view, figs)

    V.step_details(scenario, run, name, k, view, previous, figs)


with PICTURE or st.container():
    st.fragment(_player, run_every=interval if playing else None)()
ui_share.sync("block_table", SHARE)

st.button(T.RESET_CACHE, key="bt_reset_cache", on_click=_reset_cache, args=(name, extra),
          icon=":material/delete_sweep:", help=T.RESET_CACHE_HELP)

# ----------------------------------------------------------------------------- the scenario, the legend
st.divider()
st.markdown(f"{T.INTRO_SHORT} {tr(base.description)}")
seed_in_force, seed_reason = resolve_none_hash_seed(scenario.hash, scenario.seed)
st.caption(T.POOL_CAPTION.format(blocks=scenario.num_blocks, block_size=scenario.block_size,
                                 usable=usable_blocks(scenario.num_blocks), tokens=usable_blocks(scenario.num_blocks) * scenario.block_size,
                                 hash=scenario.hash, steps=n_steps)
           + " · " + render_seed(seed_in_force, seed_reason, scenario.hash))
with st.expander(T.LEGEND_HEADER):
    st.markdown(T.INTRO)
    st.markdown(T.LEGEND)

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
        if is_blank(text):
            st.warning(T.ADD_EMPTY, icon=":material/edit:")
        else:
            try:
                ids, pieces = V.tokenize_request(scenario.compose_prompt(text, with_prefix))
                answer_ids, answer_pieces = V.tokenize_request(answer) if not is_blank(answer) else ([], [])
                rid = next_request_id(scenario)
                steps = user_request_steps(rid, ids, pieces, text=scenario.compose_prompt(text, with_prefix),
                                           salt=salt.strip() or None, answer_tokens=answer_ids,
                                           answer_pieces=answer_pieces, answer_text=answer or None,
                                           finish=finish)
                candidate = scenario.with_steps(steps)
                V.play(candidate, current_lang())  # validates the new steps
            except ScenarioError as exc:
                st.error(f"{T.ADD_FAILED}: {T.scenario_error(exc)}", icon=":material/error:")
            except Exception as exc:  # noqa: BLE001 - tokenizer errors become one line, never a traceback
                ui.show_error(exc, T.ADD_FAILED)
            else:
                ui.set_user_steps(name, extra + steps)
                ss[K_MSG] = T.ADD_DONE.format(id=rid, tokens=len(ids), step=n_steps + 1)
                ss[K_STEP] = n_steps + 1
                ss[K_PLAYING] = False
                st.rerun()
    if ss.get(K_MSG):
        st.success(ss[K_MSG], icon=":material/check_circle:")
    if extra:
        mine = sorted({s.id for s in extra})
        st.caption(T.ADD_MINE.format(ids=", ".join(mine)))
        if st.button(T.ADD_CLEAR, key="bt_add_clear"):
            ui.set_user_steps(name, ())
            ss[K_MSG] = None
            _reset()
            st.rerun()


with st.expander(T.ANIMATION_TITLE):
    ui_chart.plotly_chart(V.animation(scenario, current_lang()), width="stretch", key="bt_animation")
ui_present.next_link("pages/block_table.py", ui_share.current_params(SHARE))
