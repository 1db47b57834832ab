"""Block table and LRU free queue: a scenario player over the block manager's recorded events.
UI only: the state at every step comes from kvviz.sim.scenario_play (event replay)."""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from kvviz.mirror.events import usable_blocks
from kvviz.mirror.hashing import resolve_none_hash_seed, short_hash
from kvviz.sim.scenario import (
    MAX_REQUEST_TOKENS,
    Scenario,
    ScenarioError,
    ScenarioStep,
    next_request_id,
    user_request_steps,
)
from kvviz.sim.scenario_load import builtin_names, load_builtin
from kvviz.sim.scenario_play import ScenarioRun, block_owner_spans, play_scenario
from kvviz.util.blank import is_blank
from kvviz_app import ui, ui_chart, ui_present, ui_schemas, ui_share
from kvviz_app.figures import block_table as F
from kvviz_app.figures import style
from kvviz_app.figures.style import EVENT_BADGE_COLOUR
from kvviz_app.i18n import current_lang, texts, tr

T = texts("engine")
render_event = texts("core").render_event
render_seed = texts("core").render_seed
render_step_error = texts("core").render_step_error

SPEEDS = [0.5, 1.0, 2.0, 4.0]
K_NAME, K_STEP, K_PLAYING, K_TICK, K_SPEED, K_JUMP, K_NSTEPS, K_MSG = (
    "bt_name", "bt_step", "bt_playing", "bt_tick", "bt_speed", "bt_jump", "bt_nsteps", "bt_msg")


#: Cache keys for a scenario: its fingerprint, not Streamlit's walk over hundreds of steps (ms per call).
SCENARIO_KEY = {Scenario: lambda s: s.fingerprint}


@st.cache_data(show_spinner=False, max_entries=16)
def _builtin(name: str) -> Scenario:
    return load_builtin(name)


@st.cache_data(show_spinner=False, max_entries=16, hash_funcs=SCENARIO_KEY)
def _play(scenario: Scenario, lang: str) -> ScenarioRun:  # lang: events carry sentences
    return play_scenario(scenario)


@st.cache_data(show_spinner=False, max_entries=16, hash_funcs=SCENARIO_KEY)
def _counters(scenario: Scenario, lang: str) -> list[dict]:
    run_ = _play(scenario, lang)
    return [run_.counters_at(i) for i in range(run_.num_steps + 1)]


# read-only: st.plotly_chart copies it; unpickling a copy per run (cache_data) re-validated every frame, ~90 ms
@st.cache_resource(show_spinner=False, max_entries=8, hash_funcs=SCENARIO_KEY)
def _animation(scenario: Scenario, lang: str):
    return F.pool_animation_figure(_play(scenario, lang))


@st.cache_resource(show_spinner=False, max_entries=256, hash_funcs=SCENARIO_KEY)
def _step_figures(scenario: Scenario, lang: str, sized: bool, presenter: bool, k: int) -> dict:
    """The figures of step ``k`` (pool, free queue, block tables or None, timeline), built once per scenario,
    language, presenter flags (``sized``: the figure layer's, ``presenter``: the page's) and step, and shared:
    every session replaying a scenario draws the same pictures (a room of attendees, a presenter stepping back
    and forth), ~120 ms of Plotly work per run saved. Read-only after this function."""
    run_ = _play(scenario, lang)
    view = run_.view_at(k)
    queue = F.free_queue_figure(view, per_row=8)
    return {
        "pool": F.pool_grid_figure(view, legend=False),
        "queue": style.presenter_layer(queue) if presenter else queue,
        "tables": F.block_tables_figure(view) if view.requests else None,
        "timeline": F.timeline_figure(run_, k, _counters(scenario, lang)),
    }


def _tokenize(text: str) -> tuple[list[int], list[str]]:
    from kvviz.model import tokenize  # loads the tokenizer only when someone adds a request

    t = tokenize(text, max_tokens=MAX_REQUEST_TOKENS + 1)
    return t.ids, t.pieces


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
                        format_func=lambda n: tr(_builtin(n).title))
speed = c_speed.select_slider(T.SPEED, SPEEDS, value=1.0, key=K_SPEED, help=T.SPEED_HELP)
interval = 1.0 / float(speed)
base = _builtin(name)
extra: list[ScenarioStep] = list(ui.user_steps(name))  # shared with the radix page through ui
scenario = base.with_steps(extra)
run = _play(scenario, current_lang())
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
def _event_lines(view, owners) -> list[str]:
    lines = []
    for e in view.events:
        kind = e.kind.value
        badge = f":{EVENT_BADGE_COLOUR[kind]}-badge[{T.EVENT_KIND_LABEL[kind]}]"
        blocks = T.EVENT_BLOCKS.format(ids=", ".join(map(str, e.block_ids)), n=len(e.block_ids)) if e.block_ids else T.EVENT_NO_BLOCKS
        reason = render_event(e.code, e.params)
        if kind == "free" and e.params.get("to_head"):
            reason += " " + T.FREE_JUMP_WHY.format(ids=", ".join(map(str, e.params["to_head"])), n=len(e.params["to_head"]))
        if kind == "evict":
            spans = []
            for bid, h in zip(e.block_ids, e.block_hashes, strict=True):
                if h in owners:
                    rid, start, end = owners[h]
                    spans.append(T.EVICTED_SPAN.format(block=bid, first=start + 1, last=end, request=rid))
            if spans:
                reason += " (" + "; ".join(spans) + ")"
        lines.append(T.EVENT_LINE.format(badge=badge, request=e.request_id or T.ENGINE_REQUEST, blocks=blocks,
                                         reason=reason))
    return lines


def _metrics(view, previous) -> None:
    # two rows of three, so labels stay whole on a laptop screen or a projector
    per_row = (len(T.COUNTERS) + 1) // 2
    cols = [col for _ in range(2) for col in st.columns(per_row)]
    for col, (key, (label, help_text)) in zip(cols, T.COUNTERS.items(), strict=False):
        now, before = view.counters[key], previous[key] if previous is not None else None
        if key == "hit_rate":
            value = ui.loc(f"{now:.0%}")
            delta = (T.DELTA_POINTS.format(points=(now - before) * 100)
                     if before is not None and abs(now - before) >= 0.005 else None)
        else:
            value = ui.loc(f"{now:,}")
            delta = f"{now - before:+,}" if before is not None and now != before else None
        colour = {"computed_tokens": "off", "evictions": "inverse", "running": "off"}.get(key, "normal")
        col.metric(label, value, delta=delta, delta_color=colour, help=help_text)


def _table_rows(view) -> pd.DataFrame:
    rows = []
    cols = T.TABLE_COLUMNS
    for req in view.requests:
        for cell in req.rows:
            rows.append({
                cols["request"]: req.request_id,
                cols["mapping"]: T.MAPPING.format(
                    first=cell.start + 1, last=cell.end,
                    target=T.CELL_BLOCK.format(block=cell.block_id) if cell.block_id is not None else T.MAPPING_NULL),
                cols["source"]: T.SOURCE_LABELS[cell.shown_source],
                cols["ref_cnt"]: cell.ref_cnt,
                cols["hash"]: short_hash(cell.hash) or "-",
                cols["text"]: cell.excerpt.replace("\n", "↵"),
            })
    return pd.DataFrame(rows)


def _pool_and_queue(view, figs: dict) -> None:
    """The pool grid and the LRU free queue side by side (the page's key picture), right under the controls,
    so a presenter never scrolls while it plays."""
    left, right = st.columns([1, 1])
    with left:
        ui_chart.plotly_chart(figs["pool"], width="stretch", key="bt_pool")  # 16 px overflows its cells
    with right:  # the queue carries presenter sizing already (ui_present.chart would re-apply it in place)
        ui_chart.plotly_chart(figs["queue"], width="stretch", key="bt_queue")
        jumped = F.jumped_to_head(view)
        if jumped:
            st.caption(T.FREE_JUMP_WHY.format(ids=", ".join(map(str, jumped)), n=len(jumped)))


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

    figs = _step_figures(scenario, current_lang(), style.presenter(), ui_share.presenting(), k)
    _pool_and_queue(view, figs)

    st.subheader(T.STEP_HEADER.format(k=k, n=n))
    action = view.action
    if action is None:
        st.markdown(T.STEP_START.format(blocks=usable_blocks(scenario.num_blocks)))
    else:
        salt = T.SALT_SUFFIX.format(salt=action.salt) if action.salt else ""
        st.markdown(T.ACTION[action.op].format(id=action.id, tokens=len(action.tokens), salt=salt))
        if action.note:
            st.info(action.note, icon=":material/visibility:")
        if view.error:
            error = render_step_error(view.error, run.outcomes[k - 1].error_params)
            if run.outcomes[k - 1].result is None:
                st.warning(T.SKIPPED.format(error=error), icon=":material/skip_next:")
            else:
                st.error(T.REFUSED.format(error=error), icon=":material/block:")
        if action.text:
            with st.expander(T.PROMPT_TEXT if action.op == "add" else T.DECODED_TEXT):
                st.code(action.text, language=None, wrap_lines=True)
    if k >= n and n > 0:
        st.caption(T.AT_END)
    ui_present.predict_evict(name, k, view, run.view_at(k + 1) if k < n else None)

    _metrics(view, previous)
    c = view.counters
    st.caption(T.POOL_LINE.format(used=c["used_blocks"], cached=c["cached_free_blocks"], free=c["free_blocks"],
                                  refused=c["refused"]))

    st.markdown(f"**{T.EVENTS_HEADER}**")
    lines = _event_lines(view, block_owner_spans(scenario, run))
    st.markdown("\n".join(f"- {line}" for line in lines) if lines else T.EVENTS_NONE)

    st.markdown(f"**{T.TABLES_HEADER}**")
    if view.requests:
        ui_chart.plotly_chart(figs["tables"], width="stretch", key="bt_tables")
    else:
        st.caption(T.TABLES_NONE)

    if view.requests:
        with st.expander(T.TABLES_TEXT):
            st.dataframe(_table_rows(view), hide_index=True, width="stretch")
            ui.hash_reference()

    st.markdown(f"**{T.TIMELINE_HEADER}**")
    ui_chart.plotly_chart(figs["timeline"], width="stretch", key="bt_timeline")


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
                ids, pieces = _tokenize(scenario.compose_prompt(text, with_prefix))
                answer_ids, answer_pieces = _tokenize(answer) if not is_blank(answer) else ([], [])
                rid = next_request_id(scenario)
                steps = user_request_steps(rid, ids, pieces, text=scenario.compose_prompt(text, with_prefix),
                                           salt=salt.strip() or None, answer_tokens=answer_ids,
                                           answer_pieces=answer_pieces, answer_text=answer or None,
                                           finish=finish)
                candidate = scenario.with_steps(steps)
                _play(candidate, current_lang())  # validates the new steps
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
    ui_chart.plotly_chart(_animation(scenario, current_lang()), width="stretch", key="bt_animation")
ui_present.next_link("kvviz_app/page_scripts/block_table.py", ui_share.current_params(SHARE))
