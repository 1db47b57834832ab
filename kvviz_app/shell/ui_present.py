"""Streamlit glue for workshops: presenter mode, the join panel with its QR code, guided paths and the
"Next" link, and the predict-then-reveal switch. Session state only: two browsers on one server can be in
different modes at once (the figure layer's presenter flag is a context variable, set per run)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import streamlit as st
from streamlit.errors import StreamlitAPIException

from kvviz_app.shell import share, style, ui_chart, ui_share
from kvviz_app.shell.i18n import texts
from kvviz_app.shell.paths import PATHS, Step, step_index, total_minutes

if TYPE_CHECKING:
    import plotly.graph_objects as go
    from streamlit.delta_generator import DeltaGenerator

    from kvviz.analysis.prompt_compare import PromptComparison
    from kvviz.analysis.scenarios.play import StepView

C = texts("common")
T = texts("share")

KEY_PICTURE_MAX_HEIGHT = 460  # px: the key picture fits a 1024x768 projector below the page's controls



def step_title(page: str) -> str:
    """The sidebar title of ``page`` in the session's language (read on every call: a table built at import
    kept the first session's language for every session)."""
    return next((title for path, title, _ in C.PAGES if path == page), page)

# Body text at 18 px and no text under 16 px (captions, labels, metric labels, tables); metric values at
# 2.25rem (40 px: the key numbers, also when a value is drawn as markdown); wider content.
_PRESENTER_CSS = """<style>
html { font-size: 18px; }
[data-testid="stCaptionContainer"], [data-testid="stCaptionContainer"] p,
[data-testid="stWidgetLabel"] p, [data-testid="stMetricLabel"] p, [data-testid="stMetricDelta"] div,
[data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li,
[data-testid="stExpander"] summary p, [data-testid="stTable"] td, [data-testid="stTable"] th,
.stCode code, .stCodeBlock code { font-size: 16px !important; }
.block-container, [data-testid="stMainBlockContainer"] { padding-top: 2.5rem; }
h1 { font-size: 2.1rem !important; padding-top: 0 !important; padding-bottom: 0.25rem !important; }
[data-testid="stMetricValue"], [data-testid="stMetricValue"] [data-testid="stMarkdownContainer"] p,
[data-testid="stMetricValue"] div { font-size: 2.25rem !important; line-height: 1.2 !important; }
</style>"""


def begin_run() -> bool:
    """At the top of every run (app.py): read the global URL params, set the figure layer's presenter
    flag; returns whether presenter mode is on (for the initial sidebar state)."""
    ui_share.read_globals()
    on = ui_share.presenting()
    style.set_presenter(on)
    return on


def sidebar() -> None:
    """The sidebar's workshop box: the presenter-mode toggle; its CSS when on."""
    with st.sidebar:
        st.subheader(T.SIDEBAR_HEADER)
        st.toggle(T.PRESENT_TOGGLE, key=ui_share.PRESENT_KEY, help=T.PRESENT_HELP)
    style.set_presenter(ui_share.presenting())


def page_start() -> None:
    """At the top of every page (ui.page_header): the global params, and the presenter CSS when on."""
    ui_share.note_page()
    if begin_run():
        st.markdown(_PRESENTER_CSS, unsafe_allow_html=True)


def intro(text: str) -> None:
    """A page's introduction: as is, or folded into an expander in presenter mode."""
    if ui_share.presenting():
        with st.expander(T.EXPLAIN):
            st.markdown(text)
    else:
        st.markdown(text)


def key_slot() -> DeltaGenerator | None:
    """In presenter mode, a container right under the title for the page's key picture; else None."""
    return st.container() if ui_share.presenting() else None


def picture(slot: DeltaGenerator | None, fig: go.Figure, where: DeltaGenerator | None = None, **kwargs: Any) -> Any:
    """Draw the key picture: into ``slot`` (the top of the page) with chart text of at least 16 px in
    presenter mode, else into ``where`` (default: the page, in order). Returns st.plotly_chart's value."""
    if slot is None:
        return ui_chart.plotly_chart(fig, where=where, **kwargs)
    fig = style.presenter_layer(fig)
    # On a 1024x768 projector the title and the controls take up to about 260 px: the key picture gets the rest.
    fig.update_layout(height=min(fig.layout.height or KEY_PICTURE_MAX_HEIGHT, KEY_PICTURE_MAX_HEIGHT))
    return ui_chart.plotly_chart(fig, where=slot, **kwargs)


def chart(fig: go.Figure, **kwargs: Any) -> Any:
    """st.plotly_chart, with chart text of at least 16 px in presenter mode."""
    return ui_chart.plotly_chart(style.presenter_layer(fig) if ui_share.presenting() else fig, **kwargs)


# ----------------------------------------------------------------------------- join panel


def join_url() -> str:
    """The address attendees type: http://<LAN address>:<port>/ of this server."""
    port = st.get_option("server.port") or 8501
    return f"http://{ui_share.lan_address()}:{port}/"


@st.cache_data(show_spinner=False, max_entries=8)
def _qr(url: str) -> str:
    return share.qr_svg(url, scale=6)


def join_panel() -> None:
    """The LAN address as text and as a QR code (shown in presenter mode on the landing and room pages)."""
    url = join_url()
    with st.container(border=True):
        st.subheader(T.JOIN_HEADER)
        left, right = st.columns([3, 2], vertical_alignment="center")
        left.markdown(T.JOIN_TEXT.format(url=url))
        if share.is_local_host(ui_share.lan_address()):
            left.caption(T.JOIN_LOCAL)
        elif not ui_share.serves_lan():
            left.caption(T.JOIN_LOOPBACK)
        right.image(_qr(url), caption=url, width=220)


# ----------------------------------------------------------------------------- guided paths


def _link(step: Step, label: str, icon: str | None = None) -> None:
    params = {**step.params, **ui_share.carried_globals()}
    try:
        st.page_link(step.page, label=label, icon=icon, query_params=params)
    except StreamlitAPIException:  # run alone (no navigation): the title as text
        st.markdown(f"**{label}**")


def start_here() -> None:
    """The landing page's "start here": one line and a link to the Edit page, the first thing a newcomer sees
    under the title."""
    with st.container(border=True, key="kvviz_start_here"):
        st.markdown(T.START_HERE)
        _link(Step("pages/edit.py", "edit", 0), T.START_LINK, ":material/arrow_forward:")


_PATH_CHOICE_KEY = "kvviz_path_choice"  # the landing page's path control (a widget key: dropped off that page)


def _on_path_choice() -> None:
    st.session_state[ui_share.PATH_KEY] = st.session_state.get(_PATH_CHOICE_KEY)


def paths_panel() -> None:
    """The landing page's choice of path and its steps (each a link with its settings and a question)."""
    st.subheader(T.PATHS_HEADER)
    st.caption(T.PATHS_INTRO)
    options = [None, *PATHS]
    # The control has a key of its own, filled from the session's path each run: a widget's key is dropped
    # when another page runs, and the path must outlive the landing page (every Next link carries it).
    st.session_state[_PATH_CHOICE_KEY] = ui_share.current_path()
    path = st.segmented_control(T.PATH_LABEL, options, key=_PATH_CHOICE_KEY, on_change=_on_path_choice,
                                format_func=lambda p: T.PATH_NAMES.get(p, T.PATH_NONE) if p else T.PATH_NONE)
    if not path:
        return
    steps = PATHS[path]
    st.caption(T.PATH_TOTAL.format(steps=len(steps), minutes=total_minutes(path)))
    for n, step in enumerate(steps, start=1):
        title = step_title(step.page)
        _link(step, T.STEP_LINE.format(n=n, title=title, minutes=step.minutes))
        st.caption(T.STEP_ASK.format(question=T.QUESTIONS[step.question]))


def next_link(page: str, params: Mapping[str, str] | None = None) -> None:
    """At the end of a page: this step's question and a link to the next step of the chosen path."""
    path = ui_share.current_path()
    if not path:
        return
    i = step_index(path, page, dict(params or {}))
    if i is None:
        return
    steps = PATHS[path]
    st.divider()
    st.caption(T.PATH_STEP_OF.format(n=i + 1, total=len(steps), path=T.PATH_NAMES[path]))
    st.markdown(T.NEXT_QUESTION.format(question=T.QUESTIONS[steps[i].question]))
    if i + 1 < len(steps):
        nxt = steps[i + 1]
        _link(nxt, T.NEXT_LINK.format(title=step_title(nxt.page)), icon=":material/arrow_forward:")
    else:
        st.caption(T.PATH_DONE)
        _link(steps[0], step_title(steps[0].page), icon=":material/home:")


# ----------------------------------------------------------------------------- predict, then reveal


def predict_default() -> bool:
    """Predictions are on for self-study, off in presenter mode and otherwise."""
    return ui_share.current_path() == "self" and not ui_share.presenting()


def predict_toggle(page: str) -> bool:
    """The page's "Predict first" switch (default from the session's path and mode)."""
    return st.toggle(T.PREDICT_TOGGLE, value=predict_default(), key=f"predict_{page}", help=T.PREDICT_HELP)


def _verdict(right: bool, guess: str, answer: str) -> None:
    if right:
        st.success(T.PREDICT_RIGHT.format(answer=answer), icon=":material/check_circle:")
    else:
        st.warning(T.PREDICT_WRONG.format(guess=guess, answer=answer), icon=":material/lightbulb:")


def predict_edit(comparison: PromptComparison, change_pos: int, tokens_b: int, ident: tuple) -> bool:
    """The Edit page's prediction box (first missing block, reused tokens), before the answers.

    Returns False while the learner has not revealed yet (the page stops there), True otherwise."""
    if not predict_toggle("edit"):
        return True
    ss = st.session_state
    key = f"_predict_edit_{hash(ident)}"
    blocks = list(comparison.blocks)
    first_miss = next((b.index for b in blocks if not b.reused), None)

    def block_label(i: int | None) -> str:
        if i is None:
            return T.EDIT_Q_BLOCK_NONE
        b = blocks[i]
        return T.EDIT_Q_BLOCK_OPTION.format(i=i, lo=b.start, hi=b.end - 1)

    with st.container(border=True):
        st.markdown(f"**{T.PREDICT_HEADER}**")
        st.caption(T.EDIT_PREDICT_CONTEXT.format(pos=change_pos, block_size=comparison.block_size, tokens=tokens_b))
        if key not in ss:
            with st.form("predict_edit"):
                guess_block = st.selectbox(T.EDIT_Q_BLOCK, [*range(len(blocks)), None], format_func=block_label,
                                           key="predict_edit_block")
                guess_tokens = st.number_input(T.EDIT_Q_TOKENS.format(total=tokens_b), 0, max(tokens_b, 0), 0,
                                               key="predict_edit_tokens")
                if st.form_submit_button(T.PREDICT_REVEAL, type="primary", key="predict_edit_reveal"):
                    ss[key] = (guess_block, int(guess_tokens))
        if key not in ss:
            st.info(T.PREDICT_WAITING, icon=":material/psychology:")
            return False
        guess_block, guess_tokens = ss[key]
        _verdict(guess_block == first_miss, block_label(guess_block),
                 T.EDIT_A_BLOCK.format(answer=block_label(first_miss)))
        _verdict(guess_tokens == comparison.reused_tokens, T.EDIT_A_TOKENS_GUESS.format(guess=guess_tokens),
                 T.EDIT_A_TOKENS.format(answer=comparison.reused_tokens))
    return True


def predict_evict(scenario: str, step: int, view: StepView, next_view: StepView | None) -> None:
    """The block-table player's prediction: at a step whose successor evicts a cached block, ask which
    one; at the successor, say whether the prediction was right."""
    if not predict_toggle("block_table"):
        return
    ss = st.session_state
    store = ss.setdefault("_predict_evict", {})
    made = store.get((scenario, step))
    evicted = _evicted(view)
    if made is not None and evicted is not None:
        answer = T.BT_A_EVICT.format(block=evicted)
        if made == evicted:
            st.success(T.BT_PREDICT_RESULT_RIGHT.format(guess=made, answer=answer), icon=":material/check_circle:")
        else:
            st.warning(T.BT_PREDICT_RESULT_WRONG.format(guess=made, answer=answer), icon=":material/lightbulb:")
    if next_view is None or _evicted(next_view) is None:
        return
    options = list(view.state.free_queue)
    if not options:
        return
    with st.container(border=True):
        choice = st.selectbox(T.BT_Q_EVICT, options, index=None, key=f"predict_evict_{scenario}_{step}",
                              format_func=lambda b: T.BT_EVICT_OPTION.format(block=b),
                              placeholder=T.BT_EVICT_PLACEHOLDER)
        if choice is not None:
            store[(scenario, step + 1)] = choice
            st.caption(T.BT_PREDICT_SAVED)


def _evicted(view: StepView) -> int | None:
    """The first block this step's events evict, or None."""
    for event in view.events:
        if event.kind.value == "evict" and event.block_ids:
            return int(event.block_ids[0])
    return None
