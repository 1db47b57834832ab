"""The block-table page's pieces (pages/block_table.py): its cached replay and figures per
scenario and step, the event lines, counters, block-table rows and the pool beside its free queue. Views
only: the state at every step comes from kvviz.analysis.scenarios.play."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from kvviz.analysis.scenarios.load import load_builtin
from kvviz.analysis.scenarios.play import ScenarioRun, block_owner_spans, play_scenario
from kvviz.analysis.scenarios.records import (
    MAX_REQUEST_TOKENS,
    Scenario,
)
from kvviz.mirror.events import EventKind, usable_blocks
from kvviz.mirror.hashing import resolve_none_hash_seed, short_hash
from kvviz_app.block_table import figures as F
from kvviz_app.block_table import figures_host as FH
from kvviz_app.shell import style, ui, ui_chart, ui_present
from kvviz_app.shell.i18n import texts, tr
from kvviz_app.shell.style import EVENT_BADGE_COLOUR

T = texts("block_table")
render_event = texts("concepts").render_event
render_step_error = texts("concepts").render_step_error
render_seed = texts("concepts").render_seed

#: Cache keys for a scenario: its fingerprint, not Streamlit's walk over hundreds of steps (ms per call).
SCENARIO_KEY = {Scenario: lambda s: s.fingerprint}


@st.cache_data(show_spinner=False, max_entries=16)
def builtin(name: str) -> Scenario:
    return load_builtin(name)


@st.cache_data(show_spinner=False, max_entries=16, hash_funcs=SCENARIO_KEY)
def play(scenario: Scenario, lang: str) -> ScenarioRun:  # lang: events carry sentences
    return play_scenario(scenario)


@st.cache_data(show_spinner=False, max_entries=16, hash_funcs=SCENARIO_KEY)
def counters(scenario: Scenario, lang: str) -> list[dict]:
    run_ = play(scenario, lang)
    return [run_.counters_at(i) for i in range(run_.num_steps + 1)]


# read-only: st.plotly_chart copies it; unpickling a copy per run (cache_data) re-validated every frame, ~90 ms
@st.cache_resource(show_spinner=False, max_entries=8, hash_funcs=SCENARIO_KEY)
def animation(scenario: Scenario, lang: str):
    return F.pool_animation_figure(play(scenario, lang))


@st.cache_resource(show_spinner=False, max_entries=256, hash_funcs=SCENARIO_KEY)
def step_figures(scenario: Scenario, lang: str, sized: bool, presenter: bool, k: int) -> dict:
    """The figures of step ``k`` (pool, free queue, block tables or None, timeline), built once per scenario,
    language, presenter flags (``sized``: the figure layer's, ``presenter``: the page's) and step, and shared:
    every session replaying a scenario draws the same pictures (a room of attendees, a presenter stepping back
    and forth), ~120 ms of Plotly work per run saved. Read-only after this function."""
    run_ = play(scenario, lang)
    view = run_.view_at(k)
    queue = F.free_queue_figure(view, per_row=8)
    host = view.state.host is not None
    return {
        "pool": F.pool_grid_figure(view, legend=False),
        "queue": style.presenter_layer(queue) if presenter else queue,
        "tables": F.block_tables_figure(view) if view.requests else None,
        "timeline": F.timeline_figure(run_, k, counters(scenario, lang)),
        "host_pool": FH.host_pool_figure(view) if host else None,
        "host_queue": FH.host_queue_figure(view) if host else None,
    }


def tokenize_request(text: str) -> tuple[list[int], list[str]]:
    from kvviz.model import tokenize  # loads the tokenizer only when someone adds a request

    t = tokenize(text, max_tokens=MAX_REQUEST_TOKENS + 1)
    return t.ids, t.pieces


def _event_blocks(e) -> str:
    """The blocks an event names: device block ids; a host store's copied ones only; a host drop's host slots."""
    ids = e.block_ids
    if e.kind is EventKind.HOST_EVICT:
        slots = e.params.get("slots", ())
        return T.EVENT_HOST_BLOCKS.format(ids=", ".join(f"H{s}" for s in slots), n=len(slots))
    if e.kind is EventKind.HOST_STORE:
        stored = set(e.params.get("stored", ()))
        ids = tuple(b for b, pos in zip(e.block_ids, e.positions, strict=True) if pos in stored) or ids
    return T.EVENT_BLOCKS.format(ids=", ".join(map(str, ids)), n=len(ids)) if ids else T.EVENT_NO_BLOCKS


def event_lines(view, owners) -> list[str]:
    lines = []
    held = view.state.host.held if view.state.host is not None else frozenset()
    for e in view.events:
        kind = e.kind.value
        badge = f":{EVENT_BADGE_COLOUR[kind]}-badge[{T.EVENT_KIND_LABEL[kind]}]"
        blocks = _event_blocks(e)
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
            kept = [bid for bid, h in zip(e.block_ids, e.block_hashes, strict=True) if h in held]
            if kept:
                reason += " " + T.EVICTED_IN_HOST.format(ids=", ".join(map(str, kept)), n=len(kept)) + "."
        lines.append(T.EVENT_LINE.format(badge=badge, request=e.request_id or T.ENGINE_REQUEST, blocks=blocks,
                                         reason=reason))
    return lines


def metrics_row(view, previous) -> None:
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
    if view.state.host is None:
        return
    for col, (key, (label, help_text)) in zip(st.columns(len(T.COUNTERS_HOST)), T.COUNTERS_HOST.items(),
                                              strict=True):
        now, before = view.counters[key], previous[key] if previous is not None else None
        delta = f"{now - before:+,}" if before is not None and now != before else None
        col.metric(label, ui.loc(f"{now:,}"), delta=delta, help=help_text,
                   delta_color="inverse" if key == "host_dropped" else "normal")


def table_rows(view) -> pd.DataFrame:
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


def pool_and_queue(view, figs: dict) -> None:
    """The pool grid and the LRU free queue side by side (the page's key picture), right under the controls,
    so a presenter never scrolls while it plays; with a host tier, host memory and its LRU order under them."""
    left, right = st.columns([1, 1])
    with left:
        ui_chart.plotly_chart(figs["pool"], width="stretch", key="bt_pool")  # 16 px overflows its cells
    with right:  # the queue carries presenter sizing already (ui_present.chart would re-apply it in place)
        ui_chart.plotly_chart(figs["queue"], width="stretch", key="bt_queue")
        jumped = F.jumped_to_head(view)
        if jumped:
            st.caption(T.FREE_JUMP_WHY.format(ids=", ".join(map(str, jumped)), n=len(jumped)))
    if figs.get("host_pool") is None:
        return
    left, right = st.columns([1, 1])
    with left:
        ui_chart.plotly_chart(figs["host_pool"], width="stretch", key="bt_host_pool")
    with right:
        ui_chart.plotly_chart(figs["host_queue"], width="stretch", key="bt_host_queue")


def hits_table(run: ScenarioRun, k: int) -> pd.DataFrame:
    """Every prompt admitted so far by where its tokens came from (device hit, host memory, computed)."""
    cols = T.HITS_COLUMNS
    return pd.DataFrame([{cols["request"]: r.request_id, cols["prompt"]: r.prompt, cols["device"]: r.device,
                          cols["host"]: r.host, cols["computed"]: r.computed} for r in run.hits_by_source(k)],
                        columns=list(cols.values()))


def step_details(scenario: Scenario, run: ScenarioRun, name: str, k: int, view, previous, figs: dict) -> None:
    """Step ``k`` under the player: what happened, the counters, the events, the block tables, the timeline."""
    n = run.num_steps
    st.subheader(T.STEP_HEADER.format(k=k, n=n))
    action = view.action
    if action is None:
        st.markdown(T.STEP_START.format(blocks=usable_blocks(scenario.num_blocks)))
    else:
        salt = T.SALT_SUFFIX.format(salt=action.salt) if action.salt else ""
        st.markdown(T.ACTION[action.op].format(id=action.id, tokens=len(action.tokens), salt=salt))
        if action.note:
            st.info(tr(action.note), icon=":material/visibility:")
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

    metrics_row(view, previous)
    c = view.counters
    st.caption(T.POOL_LINE.format(used=c["used_blocks"], cached=c["cached_free_blocks"], free=c["free_blocks"],
                                  refused=c["refused"]))
    if view.state.host is not None:
        st.caption(T.HOST_LINE.format(held=c["host_held"], blocks=c["host_blocks"], loaded=c["host_loaded"],
                                      skipped=c["host_skipped"]))
        st.markdown(f"**{T.HITS_HEADER}**")
        if k:
            st.dataframe(hits_table(run, k), hide_index=True, width="stretch")
        else:
            st.caption(T.HITS_NONE)

    st.markdown(f"**{T.EVENTS_HEADER}**")
    lines = event_lines(view, block_owner_spans(scenario, run))
    st.markdown("\n".join(f"- {line}" for line in lines) if lines else T.EVENTS_NONE)

    st.markdown(f"**{T.TABLES_HEADER}**")
    if view.requests:
        ui_chart.plotly_chart(figs["tables"], width="stretch", key="bt_tables")
    else:
        st.caption(T.TABLES_NONE)

    if view.requests:
        with st.expander(T.TABLES_TEXT):
            st.dataframe(table_rows(view), hide_index=True, width="stretch")
            ui.hash_reference()

    st.markdown(f"**{T.TIMELINE_HEADER}**")
    ui_chart.plotly_chart(figs["timeline"], width="stretch", key="bt_timeline")


def scenario_notes(base: Scenario, scenario: Scenario, n_steps: int) -> None:
    """Below the player: the scenario's description, its pool and hash seed, and the legend in an expander."""
    st.markdown(f"{T.INTRO_SHORT} {tr(base.description)}")
    seed_in_force, seed_reason = resolve_none_hash_seed(scenario.hash, scenario.seed)
    usable = usable_blocks(scenario.num_blocks)
    st.caption(T.POOL_CAPTION.format(blocks=scenario.num_blocks, block_size=scenario.block_size,
                                     usable=usable, tokens=usable * scenario.block_size,
                                     hash=scenario.hash, steps=n_steps)
               + (" · " + T.POOL_CAPTION_HOST.format(host=scenario.host_blocks,
                                                           policy=T.HOST_POLICY_NAMES[scenario.host_eviction_policy]) if scenario.host_blocks else "")
               + " · " + render_seed(seed_in_force, seed_reason, scenario.hash))
    with st.expander(T.LEGEND_HEADER):
        st.markdown(T.INTRO)
        st.markdown(T.LEGEND)
