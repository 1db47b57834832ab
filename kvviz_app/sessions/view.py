"""The sections of the "Multi-turn sessions" page, each a function that draws one part (the page script
calls them in order), and the page's session state: its widget keys, their defaults and callbacks.
Numbers come from kvviz.experiments.sessions (the real block manager and tokenizer)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st

from kvviz.analysis.providers import AS_OF, DEFAULT_POLICY, POLICIES, SOURCE_NAMES, USAGE_FIELDS, CachePolicy
from kvviz.experiments.sessions import (
    DEFAULT_PAUSE_S,
    EVENT_NAMES,
    MARKS,
    MAX_PAUSE_S,
    Session,
    SessionError,
    SessionEvents,
    SessionResult,
    default_event_turn,
    load_example,
    load_session_text,
    projected_work,
    run_session,
    session_increment,
)
from kvviz_app.sessions import figures as F
from kvviz_app.shell import ui, ui_chart, ui_present, ui_schemas, ui_table
from kvviz_app.shell.i18n import texts, tr

T = texts("sessions")

_UPLOAD = "__upload__"
_EVENT_KEYS = {name: ui_schemas.session_event_key(name) for name in EVENT_NAMES}
_TURN_KEYS = {name: ui_schemas.session_turn_key(name) for name in EVENT_NAMES}


@dataclass(frozen=True)
class Choice:
    """The session and policy the widgets chose, with the policy's cache marks and minimum length."""

    session: Session
    policy_key: str
    policy: CachePolicy
    marks: tuple[str, ...]
    min_len: int | None


@dataclass(frozen=True)
class Projection:
    """Prefill work over ``turns`` turns, projected from the session's first turn and per-turn step."""

    first: int
    step: int
    turns: int
    without_cache: list[int]
    with_cache: list[int]


@st.cache_data(show_spinner=False, max_entries=64)
def _run(session: Session, policy: str, events: SessionEvents, marks: tuple[str, ...],
         min_len: int | None) -> SessionResult:
    return run_session(session, policy, events, marks=marks, min_cacheable_tokens=min_len)


@st.cache_data(show_spinner=False, max_entries=8)
def _example(name: str) -> Session:
    return load_example(name)


def _clear_events() -> None:
    for key in _EVENT_KEYS.values():
        st.session_state[key] = False


def _on_session_change() -> None:
    """Another session: its events land on its own default turns."""
    for key in _TURN_KEYS.values():
        st.session_state.pop(key, None)


def _on_policy_change() -> None:
    """Another policy: its own minimum cacheable length."""
    st.session_state.pop("ss_min", None)


def _defaults(values: dict[str, object]) -> None:
    """Widget defaults go into session_state before the widgets (a widget given a value while a link
    set its key logs Streamlit's duplicate-value warning with a stack)."""
    for key, value in values.items():
        st.session_state.setdefault(key, value)


def _why(turn, result: SessionResult) -> str:
    """One line saying why this turn read what it read (the result's own reason codes, as text)."""
    return T.WHY_SEPARATOR.join(T.WHY[code].format(segment=T.segment_label(turn.first_difference), pos=turn.common_prefix,
                                                   count=turn.expired_entries)
                                for code in result.turn_reasons(turn))


def set_defaults() -> None:
    """The widgets' first values, unless a link or an earlier run set them."""
    _defaults({"ss_policy": DEFAULT_POLICY, "ss_pause_min": DEFAULT_PAUSE_S / 60, "ss_project": 50,
               "ss_marks": list(MARKS)})


def _session(choice: str) -> Session:
    """The chosen example, or the uploaded file (stops the page while there is none or it is bad)."""
    if choice != _UPLOAD:
        session = _example(choice)
        st.caption(tr(session.description))
        return session
    upload = st.file_uploader(T.UPLOAD_LABEL, type=["json"], key="ss_upload", help=T.UPLOAD_HELP)
    with st.expander(T.UPLOAD_FORMAT_HEADER):
        st.markdown(T.UPLOAD_FORMAT)
    if upload is None:
        st.info(T.UPLOAD_NONE, icon=":material/upload_file:")
        st.stop()
    try:
        return load_session_text(upload.getvalue(), upload.name.rsplit(".", 1)[0], where=upload.name)
    except SessionError as exc:
        st.error(T.UPLOAD_ERROR.format(error=T.session_error(exc)), icon=":material/error:")
        st.stop()


def choose(examples: list[str]) -> Choice:
    """Session (one of ``examples`` or an upload) and policy pickers, then the policy's marks and minimum
    cacheable length."""
    c = st.columns([1, 1])
    choice = c[0].selectbox(
        T.SESSION_LABEL, [*examples, _UPLOAD], key="ss_session", on_change=_on_session_change,
        format_func=lambda n: T.SESSION_UPLOAD if n == _UPLOAD else tr(_example(n).title),
    )
    policy_key = c[1].selectbox(T.POLICY_LABEL, list(POLICIES), key="ss_policy", help=T.POLICY_HELP,
                                on_change=_on_policy_change,
                                format_func=lambda k: tr(POLICIES[k].label))
    policy = POLICIES[policy_key]
    session = _session(choice)
    marks: tuple[str, ...] = MARKS
    if not policy.is_policy:
        st.markdown(T.MECHANICS_NOTE.format(block=16))
        return Choice(session, policy_key, policy, marks, None)
    st.markdown(T.POLICY_NOTE.format(label=tr(policy.label)))
    if policy.checkpoints == "explicit":  # the pills get the whole width: in a column they scroll out of sight
        chosen = st.pills(T.MARKS_LABEL, MARKS, selection_mode="multi", key="ss_marks",
                          format_func=T.MARK_LABELS.get, help=T.MARKS_HELP)
        marks = tuple(m for m in MARKS if m in (chosen or []))
    else:
        st.caption(T.AUTOMATIC_NOTE.format(block=16))
    c = st.columns([1, 1])
    _defaults({"ss_min": policy.min_cacheable_tokens})
    min_len = int(c[0].number_input(T.MIN_LABEL, 0, 8192, step=64, key="ss_min",
                                    help=T.MIN_HELP))
    c[1].markdown(f"**{T.TTL_LABEL}**  \n" + (T.TTL_VALUE.format(ttl=T.duration(policy.ttl_s)) if policy.ttl_s
                                               else T.TTL_NONE))
    return Choice(session, policy_key, policy, marks, min_len)


def events(session: Session) -> SessionEvents:
    """The four event cards (a toggle each, most with a turn; the pause with its length) and the reset."""
    st.subheader(T.EVENTS_HEADER)
    n_turns = len(session.turns)
    cols = [col for _ in range(2) for col in st.columns(2)]
    turn_of: dict[str, int] = {}
    on: dict[str, bool] = {}
    pause_min = DEFAULT_PAUSE_S / 60
    for col, name in zip(cols, EVENT_NAMES, strict=True):
        with col.container(border=True):
            on[name] = st.toggle(T.EVENT_LABELS[name], key=_EVENT_KEYS[name], help=T.EVENT_HELP[name],
                                 disabled=n_turns < 2)
            if name != "unstable_json" and n_turns >= 2:
                sub = st.columns(2)
                given = st.session_state.get(_TURN_KEYS[name])
                if not isinstance(given, int) or not 2 <= given <= n_turns:  # a link's turn past this session's end
                    st.session_state[_TURN_KEYS[name]] = default_event_turn(session, name)
                turn_of[name] = int(sub[0].number_input(T.EVENT_TURN, 2, n_turns, key=_TURN_KEYS[name],
                                                        disabled=not on[name]))
                if name == "long_pause":
                    pause_min = float(sub[1].number_input(T.PAUSE_LABEL, 0.0, MAX_PAUSE_S / 60, step=5.0,
                                                          key="ss_pause_min", disabled=not on[name]))
    st.button(T.RESET_EVENTS, on_click=_clear_events, key="ss_reset", icon=":material/restart_alt:")
    return SessionEvents(
        restart_tools_at=turn_of.get("restart_tools") if on["restart_tools"] else None,
        file_read_at=turn_of.get("file_read") if on["file_read"] else None,
        pause_at=turn_of.get("long_pause") if on["long_pause"] else None,
        pause_s=pause_min * 60,
        unstable_json=on["unstable_json"],
    )


def run(choice: Choice, events_: SessionEvents) -> SessionResult:
    """The session replayed under the policy (cached); a bad session stops the page with one line."""
    try:
        with st.spinner():
            return _run(choice.session, choice.policy_key, events_, choice.marks, choice.min_len)
    except SessionError as exc:
        st.error(T.RUN_ERROR.format(error=T.session_error(exc)), icon=":material/error:")
        st.stop()


def projection(result: SessionResult) -> Projection:
    """The projected work over the turns the projection slider names (its value of the last run)."""
    first, step = session_increment(result)
    turns = int(st.session_state.get("ss_project", 50))
    without_p, with_p = projected_work(first, step, turns)
    return Projection(first, step, turns, without_p, with_p)


def headline(result: SessionResult, events_: SessionEvents, proj: Projection) -> None:
    """The four headline numbers, then one line per event that fired (its first turn)."""
    sent, computed, read = result.total_prompt_tokens, result.total_computed_tokens, result.total_read_tokens
    c = st.columns(4)
    c[0].metric(T.M_SENT, ui.loc(f"{sent:,}"), help=T.M_SENT_HELP)
    c[1].metric(T.M_COMPUTED, ui.loc(f"{computed:,}"), help=T.M_COMPUTED_HELP)
    c[2].metric(T.M_READ, ui.loc(f"{read / sent:.0%}") if sent else "0%", help=T.M_READ_HELP)
    c[3].metric(T.M_PROJECTION.format(turns=proj.turns),
                T.M_PROJECTION_VALUE.format(ratio=proj.without_cache[-1] / max(1, proj.with_cache[-1])),
                help=T.M_PROJECTION_HELP.format(first=proj.first, step=proj.step, without=proj.without_cache[-1],
                                                with_cache=proj.with_cache[-1]))
    lines = []
    for name in events_.active():
        turns_with = [t for t in result.turns if name in t.events]
        if not turns_with:
            continue
        t = turns_with[0]
        expired = T.EXPIRED_SUFFIX.format(count=t.expired_entries) if t.expired_entries else ""
        lines.append(T.EVENT_LINES[name].format(
            turn=t.turn, read=t.cache_read_input_tokens, prompt=t.prompt_tokens, new=t.computed_tokens,
            gap=T.duration(result.gap_before(t.turn)) if t.turn > 1 else "",
            expired=expired,
        ))
    if lines:
        st.info("  \n".join(lines), icon=":material/bolt:")


def picture(result: SessionResult, slot) -> None:
    """The turn-by-turn picture (the presenter's key picture)."""
    st.subheader(T.PICTURE_HEADER)
    st.markdown(T.PICTURE_INTRO)
    ui_present.picture(slot, F.turns_picture(result), width="stretch", key="ss_picture")


def usage(result: SessionResult) -> None:
    """Usage per turn: the chart, then the provider's usage fields per turn with the reason."""
    st.subheader(T.USAGE_HEADER)
    st.markdown(T.USAGE_INTRO)
    ui_chart.plotly_chart(F.usage_figure(result), width="stretch", key="ss_usage")
    rows = []
    for t in result.turns:
        # the cache columns come right after the prompt; the reason last. An HTML table wraps its headers and
        # the reason, so every column stays in view at 1024 px (a data grid would scroll sideways).
        row = {T.USAGE_TABLE["turn"]: t.turn, T.USAGE_TABLE["at"]: T.duration(t.at_s),
               T.USAGE_TABLE["prompt"]: ui.loc(f"{t.prompt_tokens:,}")}
        row.update({T.USAGE_TABLE[f]: ui.loc(f"{getattr(t, f):,}") for f in USAGE_FIELDS})
        row[T.USAGE_TABLE["answer"]] = ui.loc(f"{t.answer_tokens:,}")
        row[T.USAGE_TABLE["why"]] = _why(t, result)
        rows.append(row)
    ui_table.wrapping_table(pd.DataFrame(rows), key="ss_usage_table")


def work(result: SessionResult, proj: Projection) -> None:
    """Cumulative prefill work of this session, beside its projection (with the projection's slider)."""
    st.subheader(T.WORK_HEADER)
    st.markdown(T.WORK_INTRO)
    c = st.columns(2)
    turn_numbers = [t.turn for t in result.turns]
    c[0].markdown(f"**{T.WORK_TITLE}**")
    ui_chart.plotly_chart(F.work_figure(turn_numbers, result.cumulative_without_cache, result.cumulative_with_cache,
                                        None), width="stretch", key="ss_work", where=c[0])
    c[1].markdown(f"**{T.WORK_PROJECTION_TITLE.format(turns=proj.turns, first=proj.first, step=proj.step)}**")
    ui_chart.plotly_chart(F.work_figure(list(range(1, proj.turns + 1)), proj.without_cache, proj.with_cache, None),
                          width="stretch", key="ss_projection", where=c[1])
    c[1].slider(T.PROJECT_TURNS, 5, 200, step=5, key="ss_project")


def policy_values(policy: CachePolicy) -> None:
    """The policy's values, each with its source and date, then the sources."""
    st.subheader(T.POLICY_HEADER)
    st.caption(T.BADGE_LINE.format(badge=T.POLICY_BADGE if policy.is_policy else T.MECHANICS_BADGE,
                                   label=tr(policy.label)))
    st.markdown("\n".join(T.POLICY_LINE.format(name=tr(v.name), value=tr(v.value), source=v.source, as_of=v.as_of)
                           for v in policy.values))
    st.caption(T.SOURCES_LINE.format(as_of=AS_OF, sources=T.SOURCE_SEPARATOR.join(
        f"[{k}]({SOURCE_NAMES[k]})" for k in SOURCE_NAMES if k in policy.sources_used)))
    if policy.is_policy:
        st.caption(T.POLICY_CAVEAT)
