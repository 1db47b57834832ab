"""The block-table page's player state (pages/block_table.py): the step shown, playing or paused, the timer, the
buttons' callbacks and the requests a user adds to a scenario. The step always lies in 0..the scenario's steps."""

from __future__ import annotations

import time

import streamlit as st

from kvviz.analysis.scenarios.records import (
    Scenario,
    ScenarioError,
    ScenarioStep,
    next_request_id,
    user_request_steps,
)
from kvviz.util.blank import is_blank
from kvviz_app.block_table import view as V
from kvviz_app.shell import ui
from kvviz_app.shell.i18n import current_lang, texts

T = texts("block_table")

SPEEDS = [0.5, 1.0, 2.0, 4.0]
K_NAME, K_STEP, K_PLAYING, K_TICK, K_SPEED, K_JUMP, K_NSTEPS, K_MSG, K_HOST = (
    "bt_name", "bt_step", "bt_playing", "bt_tick", "bt_speed", "bt_jump", "bt_nsteps", "bt_msg", "bt_host")
K_HOST_POLICY = "bt_host_policy"

ss = st.session_state


def init() -> None:
    """A new session starts paused at step 0."""
    ss.setdefault(K_STEP, 0)
    ss.setdefault(K_PLAYING, False)
    ss.setdefault(K_TICK, 0.0)


def step() -> int:
    return ss[K_STEP]


def playing() -> bool:
    return bool(ss[K_PLAYING])


def set_steps(n: int) -> None:
    """The scenario now has ``n`` steps: the step shown is clamped into 0..n."""
    ss[K_NSTEPS] = n
    set_step(ss[K_STEP])


def set_step(k: int) -> None:
    ss[K_STEP] = max(0, min(int(k), ss.get(K_NSTEPS, 0)))


def on_scenario() -> None:
    ss[K_STEP] = 0
    ss[K_PLAYING] = False


def reset() -> None:
    ss[K_STEP] = 0
    ss[K_PLAYING] = False


def back() -> None:
    ss[K_PLAYING] = False
    set_step(ss[K_STEP] - 1)


def forward() -> None:
    ss[K_PLAYING] = False
    set_step(ss[K_STEP] + 1)


def play_pressed() -> None:
    if ss[K_STEP] >= ss.get(K_NSTEPS, 0):
        ss[K_STEP] = 0
    ss[K_PLAYING] = True
    ss[K_TICK] = time.monotonic()
    set_step(ss[K_STEP] + 1)


def pause() -> None:
    ss[K_PLAYING] = False


def jump() -> None:
    # The slider exists only while paused; a stale value the browser still sends for it during playback
    # (the slider was unmounted when Play replaced it with the progress bar) must not stop the player.
    if ss[K_PLAYING] or K_JUMP not in ss:
        return
    set_step(ss[K_JUMP])


def reset_cache(name: str, steps: list[ScenarioStep]) -> None:
    """Append a reset_prefix_cache step to this scenario and show it."""
    ui.set_user_steps(name, [*steps, ScenarioStep("reset", "")])
    ss[K_PLAYING] = False
    ss[K_STEP] = ss.get(K_NSTEPS, 0) + 1


def tick(interval: float, n: int) -> int:
    """One run of the player's fragment: while playing, the next step once ``interval`` has (nearly) passed; at
    the end, stop and redraw the whole page (the Pause button turns back into Play and the timer stops)."""
    if ss[K_PLAYING] and time.monotonic() - ss[K_TICK] >= 0.8 * interval:
        ss[K_TICK] = time.monotonic()
        set_step(ss[K_STEP] + 1)
    if ss[K_PLAYING] and ss[K_STEP] >= n:
        ss[K_PLAYING] = False
        st.rerun()
    return ss[K_STEP]


def jump_slider(k: int, n: int) -> None:
    """While paused: the slider to any step, showing step ``k``."""
    ss[K_JUMP] = k
    st.slider(T.JUMP, 0, max(n, 1), key=K_JUMP, on_change=jump, help=T.JUMP_HELP, disabled=n == 0)


def add_request(scenario: Scenario, name: str, extra: list[ScenarioStep], text: str, with_prefix: bool,
                salt: str, answer: str, finish: bool) -> None:
    """Adds the user's request (and its answer) to scenario ``name`` and shows its first step; a blank text, a
    refused step or a tokenizer error is one line on the page."""
    if is_blank(text):
        st.warning(T.ADD_EMPTY, icon=":material/edit:")
        return
    n_steps = ss.get(K_NSTEPS, 0)
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


def added_requests(name: str, extra: list[ScenarioStep]) -> None:
    """The last addition's message, the user's requests in this scenario and the button that drops them."""
    if ss.get(K_MSG):
        st.success(ss[K_MSG], icon=":material/check_circle:")
    if extra:
        mine = sorted({s.id for s in extra})
        st.caption(T.ADD_MINE.format(ids=", ".join(mine)))
        if st.button(T.ADD_CLEAR, key="bt_add_clear"):
            ui.set_user_steps(name, ())
            ss[K_MSG] = None
            reset()
            st.rerun()
