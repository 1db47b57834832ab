"""Streamlit glue shared by every page: the shared model resource, the model sidebar, page helpers.

Pages call ``get_model()`` for the model the session selected (loaded once per process and shared by
all sessions; forward passes are serialised by ``LoadedModel.lock``). kvviz itself never imports
streamlit; everything here is presentation.
"""

from __future__ import annotations

import html
import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

import streamlit as st

from kvviz.experiments.room.presets import PRESENTER_KEY_LOG, PRESENTER_KEY_LOG_ENV
from kvviz.model.settings import (
    EMBEDDED_DISPLAY_NAME,
    EMBEDDED_MODEL,
    EMBEDDED_PIP,
    InputError,
    ModelLoadError,
    default_model,
    is_embedded,
)
from kvviz.util.units import format_bytes  # the one byte formatter (pages and CLI)
from kvviz_app.shell.cells import visible_piece  # noqa: F401 - the pages' token text, as the figures show it
from kvviz_app.shell.i18n import (
    LANG_NAMES,
    LANGS,
    current_lang,
    format_number,
    localize,
    normalize_lang,
    texts,
)
from kvviz_app.shell.i18n.lang import QUERY_KEY, SESSION_KEY

T = texts("common")
T_SEC = texts("security")

if TYPE_CHECKING:  # torch is imported only when a model is actually needed
    from streamlit.delta_generator import DeltaGenerator

    from kvviz.model import LoadedModel
    from kvviz.model.embedded import LoadStep

_MODEL_KEY = "kvviz_model"  # session_state: the model name this session uses
_KIND_KEY = "kvviz_model_kind"
_INPUT_KEY = "kvviz_model_input"
_ERROR_KEY = "kvviz_model_error"


# ----------------------------------------------------------------------------- formatting


def loc(text: str) -> str:
    """A value formatted the English way (``1,234.5 KiB``) in the session's language (``1 234,5 КиБ``)."""
    return localize(text, current_lang())


def fmt_count(n: int) -> str:
    """Large counts the way people say them, in the session's language: 134.5 M, 49,152 (134,5 млн)."""
    lang = current_lang()
    if n >= 1_000_000_000:
        return f"{format_number(n / 1e9, lang, 2)} {T.UNIT_BILLION}"
    if n >= 1_000_000:
        return f"{format_number(n / 1e6, lang, 1)} {T.UNIT_MILLION}"
    return format_number(n, lang)


def token_chips_html(pieces: list[str], limit: int = 256) -> str:
    """HTML for a run of token chips (escaped); at most ``limit`` chips."""
    spans = [
        f'<span class="kvviz-tok" title="{html.escape(T.TOKEN_CHIP_TITLE.format(i=i))}">'
        f'{html.escape(visible_piece(p))}</span>'
        for i, p in enumerate(pieces[:limit])
    ]
    more = (f'<span class="kvviz-more">{html.escape(T.TOKENS_MORE.format(count=len(pieces) - limit))}</span>'
            if len(pieces) > limit else "")
    style = (
        "<style>.kvviz-tok{display:inline-block;margin:2px;padding:1px 5px;border-radius:4px;"
        "background:#eef2ff;border:1px solid #c7d2fe;font-family:monospace;font-size:0.85em;"
        "white-space:pre}.kvviz-more{color:#6b7280;font-size:0.85em}</style>"
    )
    return style + '<div class="kvviz-toks">' + "".join(spans) + more + "</div>"


# ----------------------------------------------------------------------------- language

_LANG_WIDGET = "kvviz_lang_switch"


def _on_language_change() -> None:
    lang = st.session_state[_LANG_WIDGET]
    st.session_state[SESSION_KEY] = lang
    st.query_params[QUERY_KEY] = lang


def render_language_switch() -> str:
    """The sidebar's language switch; the session's language, kept in ``?lang=`` (the URL wins on a change)."""
    from_url = normalize_lang(st.query_params.get(QUERY_KEY))
    if from_url and from_url != st.session_state.get(SESSION_KEY):
        st.session_state[SESSION_KEY] = from_url
    lang = current_lang()
    st.session_state[_LANG_WIDGET] = lang
    st.sidebar.radio(T.LANGUAGE_LABEL, LANGS, format_func=LANG_NAMES.get, key=_LANG_WIDGET, horizontal=True,
                     on_change=_on_language_change)
    if st.query_params.get(QUERY_KEY) != lang:
        st.query_params[QUERY_KEY] = lang
    return lang


# ----------------------------------------------------------------------------- page helpers


# Metric labels and values, widget and checkbox labels and page-link titles wrap instead of ending in
# "…" on a laptop screen or a projector (1024 px).
_METRIC_WRAP_CSS = (
    "<style>[data-testid='stMetricLabel'] *, [data-testid='stMetricValue'],"
    " [data-testid='stMetricValue'] *, [data-testid='stWidgetLabel'] p, [data-testid='stCheckbox'] p,"
    " [data-testid='stPageLink'] p, [data-testid='stPageLink'] span, [data-testid='stPageLink-NavLink'] *"
    " {white-space: normal !important; overflow: visible !important;"
    " text-overflow: clip !important; overflow-wrap: anywhere;}"
    " [data-testid='stPageLink-NavLink'] {height: auto !important; min-height: 2rem;}"
    " [data-testid='stTable'] th, [data-testid='stTable'] td, [data-testid='stTable'] th *,"
    " [data-testid='stTable'] td * {white-space: normal !important; overflow-wrap: anywhere !important;"
    " word-break: break-word; min-width: 0 !important;}"
    # a header keeps its words whole ("Block", not "Blo" / "ck" beside a column of long token runs)
    " [data-testid='stTable'] th, [data-testid='stTable'] th * {overflow-wrap: break-word !important;"
    " word-break: normal !important;}"
    " [data-testid='stTable'] table {width: 100% !important; table-layout: auto;}"
    # ui_table.wrapping_table: words stay whole (a short column keeps its header on one line)
    " [class*='st-key-wordwrap_'] [data-testid='stTable'] th, [class*='st-key-wordwrap_'] [data-testid='stTable'] td,"
    " [class*='st-key-wordwrap_'] [data-testid='stTable'] th *, [class*='st-key-wordwrap_'] [data-testid='stTable'] td *"
    " {overflow-wrap: break-word !important; word-break: normal !important;}</style>"
)


def page_header(title: str, intro: str | None = None) -> None:
    """The standard page title and a short introduction under it."""
    # a first deep link on a fresh server runs the page alone: route it through app.py first
    from kvviz_app.shell import ui_present
    from kvviz_app.shell.routes import leave_legacy_folder_mode

    leave_legacy_folder_mode()
    ui_present.page_start()  # presenter mode: ?present=1 even when a page runs alone; folds the intro away
    st.markdown(_METRIC_WRAP_CSS, unsafe_allow_html=True)
    st.title(title)
    if intro:
        ui_present.intro(intro)


def hash_reference(where: DeltaGenerator | None = None) -> None:
    """One caption naming the engine release kvviz's block hashes follow (``REFERENCE_RELEASE``)."""
    from kvviz.mirror.hashing import REFERENCE_RELEASE

    (where or st).caption(T.HASHES_AS.format(release=REFERENCE_RELEASE))


def error_text(exc: BaseException) -> str:
    """A library error as one line in the session's language (a known code worded, else its own line)."""
    return T.error_text(exc)


def show_error(exc: BaseException, prefix: str | None = None) -> None:
    """A user-facing error box (one line, never a traceback)."""
    text = error_text(exc)
    st.error(f"{prefix}: {text}" if prefix else text, icon=":material/error:")


# ----------------------------------------------------------------------------- the room's presenter key

_ANNOUNCED = False
_ANNOUNCE_LOCK = threading.Lock()


def _server_url(path: str) -> str:
    address = st.get_option("server.address") or st.get_option("browser.serverAddress") or "localhost"
    if address in ("0.0.0.0", "::"):
        address = "localhost"
    return f"http://{address}:{st.get_option('server.port')}/{path}"


def announce_presenter_key() -> None:
    """Create the process-wide room and print its presenter key (generated when KVVIZ_PRESENTER_KEY is
    unset) with the room's URL in the server log, once per server process, as notebook servers print
    their token."""
    global _ANNOUNCED
    from kvviz.experiments.room.service import get_room, presenter_key_generated

    with _ANNOUNCE_LOCK:
        if _ANNOUNCED:
            return
        _ANNOUNCED = True
        key = get_room().presenter_key
        url = _server_url("room")
        line = (PRESENTER_KEY_LOG.format(key=key, url=url) if presenter_key_generated()
                else PRESENTER_KEY_LOG_ENV.format(url=url))
        print(line, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- the model


def selected_model_name() -> str:
    """The model this session uses: its sidebar choice, else ``KVVIZ_MODEL``, else the embedded one."""
    return st.session_state.get(_MODEL_KEY) or default_model()


@st.cache_resource(show_spinner=False, max_entries=4)
def _model_resource(model_name: str, device: str | None, dtype: str | None) -> LoadedModel:
    from kvviz.model import load_model

    return load_model(model_name, device=device, dtype=dtype)


def _load_with_progress(model_name: str, area: DeltaGenerator | None = None) -> LoadedModel:
    """Load through the shared resource, showing a progress bar while a first load runs."""
    from kvviz.model import find_loaded_model, load_model, resolve_device

    if find_loaded_model(model_name) is None:
        slot = area if area is not None else st.empty()
        shown = EMBEDDED_DISPLAY_NAME if is_embedded(model_name) else model_name
        text = T.MODEL_LOADING.format(name=shown, device=resolve_device())
        with slot.container():
            st.markdown(f"**{text}**")
            st.caption(T.MODEL_LOADING_NOTE)
            bar = st.progress(0.0, text=text)

        def report(step: LoadStep, fraction: float) -> None:
            template = T.LOAD_STEPS.get(step.code)
            message = template.format(**step.params) if template else step.code
            bar.progress(min(max(float(fraction), 0.0), 1.0), text=message)

        try:
            load_model(model_name, progress=report)  # fills the process-wide cache
        finally:
            slot.empty()
    return _model_resource(model_name, None, None)


def try_get_model(model_name: str | None = None, progress_area: DeltaGenerator | None = None) -> tuple[LoadedModel | None, str | None]:
    """(model, None) or (None, one-line error) for the session's model (or ``model_name``)."""
    name = model_name or selected_model_name()
    try:
        return _load_with_progress(name, progress_area), None
    except (InputError, ModelLoadError) as exc:
        return None, error_text(exc)
    except Exception as exc:  # noqa: BLE001 - the UI shows one line, never a traceback
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return None, f"{type(exc).__name__}: {first}"


def get_model(progress_area: DeltaGenerator | None = None) -> LoadedModel:
    """The session's model, loaded once per process; on failure shows an error and stops the page."""
    lm, error = try_get_model(progress_area=progress_area)
    if lm is None:
        st.error(T.MODEL_LOAD_FAILED.format(error=error), icon=":material/error:")
        st.stop()
    return lm


@dataclass(frozen=True)
class ModelProbe:
    """A real short prefill on the model: its measured KV bytes and timing."""

    tokens: int
    kv_bytes_measured: int
    kv_bytes_per_token: float
    prefill_ms: float
    dtype: str


@st.cache_resource(show_spinner=False, max_entries=8)
def _probe(model_id: str, device: str, dtype: str, _lm: LoadedModel) -> ModelProbe:
    from kvviz.engine.prefill import prefill
    from kvviz.model.tokens import MODEL_PROBE_TEXT

    result = prefill(_lm, text=MODEL_PROBE_TEXT)
    return ModelProbe(result.num_tokens, result.kv_bytes_measured, result.kv_bytes_per_token,
                      result.prefill_ms, result.dtype)


def measure_model(lm: LoadedModel) -> ModelProbe:
    """Measured KV bytes per token from one real prefill of a short sentence (cached per model)."""
    return _probe(lm.info.model_id, lm.info.device, lm.info.dtype, lm)


def kv_help(lm: LoadedModel, probe: ModelProbe) -> str:
    """The tooltip that shows how the measured bytes per token compare with the formula."""
    info = lm.info
    return T.MODEL_KV_MEASURED_HELP.format(
        tokens=probe.tokens, measured=loc(f"{probe.kv_bytes_measured:,} B"), layers=info.num_layers,
        kv_heads=info.num_kv_heads, head_dim=info.head_dim, element_size=info.element_size,
        formula=loc(f"{info.kv_bytes_per_token_config:,} B"),
    )


def render_model_card(lm: LoadedModel) -> None:
    """The model card: architecture, device, dtype, and the KV bytes per token measured live."""
    info = lm.info
    probe = measure_model(lm)
    f = T.MODEL_FIELDS
    cols = st.columns(4)
    cols[0].metric(f["layers"], info.num_layers)
    cols[1].metric(f["heads"], info.num_heads)
    cols[2].metric(f["kv_heads"], f"{info.num_kv_heads} ({info.attention_kind})")
    cols[3].metric(f["head_dim"], info.head_dim)
    cols = st.columns(4)
    cols[0].metric(T.MODEL_KV_MEASURED, loc(format_bytes(probe.kv_bytes_per_token)), help=kv_help(lm, probe))
    cols[1].metric(f["device"], info.device)
    cols[2].metric(f["dtype"], info.dtype)
    cols[3].metric(f["params"], fmt_count(info.num_params))
    kind = T.MODEL_SOURCE_KINDS.get(info.source_kind)
    source = kind.format(pip=EMBEDDED_PIP, where=info.source_where) if kind else info.source
    st.caption(T.MODEL_SOURCE.format(source=source, load_s=info.load_s,
                                     backend=T.BACKEND_NAMES.get(info.backend, info.backend)))


def _sidebar_card(lm: LoadedModel) -> None:
    info = lm.info
    probe = measure_model(lm)
    st.markdown(
        T.SIDEBAR_CARD.format(
            name=info.name, device=info.device, dtype=info.dtype, layers=info.num_layers,
            heads=info.num_heads, kv_heads=info.num_kv_heads, kind=info.attention_kind,
            head_dim=info.head_dim, kv=loc(format_bytes(probe.kv_bytes_per_token)),
            kv_exact=loc(f"{probe.kv_bytes_per_token:,.0f}"),
        ),
        help=kv_help(lm, probe),
    )


def render_model_sidebar() -> LoadedModel | None:
    """The sidebar's model choice and card; returns the session's model (None if it failed to load)."""
    progress_area = st.empty()  # main area: the first load's progress bar appears where people look
    env_default = default_model()
    if _MODEL_KEY not in st.session_state:
        st.session_state[_MODEL_KEY] = env_default
    options = ["embedded", "custom"]  # widget values are codes; the labels follow the session's language
    if _KIND_KEY not in st.session_state:
        st.session_state[_KIND_KEY] = options[0] if is_embedded(st.session_state[_MODEL_KEY]) else options[1]
    with st.sidebar:
        st.subheader(T.SIDEBAR_MODEL_HEADER)
        kind = st.radio(T.MODEL_CHOICE_LABEL, options, key=_KIND_KEY,
                        format_func=lambda c: T.MODEL_CHOICE_EMBEDDED if c == "embedded" else T.MODEL_CHOICE_CUSTOM)
        if kind == "custom":
            current = st.session_state[_MODEL_KEY]
            with st.form("kvviz_model_form", border=False):
                typed = st.text_input(
                    T.MODEL_INPUT_LABEL, value="" if is_embedded(current) else current,
                    help=T.MODEL_INPUT_HELP, key=_INPUT_KEY,
                )
                submitted = st.form_submit_button(T.MODEL_INPUT_SUBMIT)
            if submitted and typed.strip():
                _, error = try_get_model(typed.strip(), progress_area)
                if error is None:
                    st.session_state[_MODEL_KEY] = typed.strip()
                    st.session_state.pop(_ERROR_KEY, None)
                else:
                    st.session_state[_ERROR_KEY] = error
        elif not is_embedded(st.session_state[_MODEL_KEY]):
            st.session_state[_MODEL_KEY] = EMBEDDED_MODEL
            st.session_state.pop(_ERROR_KEY, None)
        if st.session_state.get(_ERROR_KEY) and kind == "custom":
            st.error(T.MODEL_LOAD_FAILED.format(error=st.session_state[_ERROR_KEY]), icon=":material/error:")
        lm, error = try_get_model(progress_area=progress_area)
        if lm is None:
            st.error(T.MODEL_LOAD_FAILED.format(error=error), icon=":material/error:")
            return None
        if st.session_state.get(_ERROR_KEY) and kind == "custom":
            st.caption(T.MODEL_FALLBACK.format(name=lm.info.name))
        _sidebar_card(lm)
    return lm


# ----------------------------------------------------------------------------- requests added to a scenario
USER_STEPS_KEY = "kvviz_user_steps"
"""Session key owned by this module: built-in scenario name -> the steps this session added to it."""


def user_steps(scenario_name: str) -> tuple:
    """The requests this session added to a built-in scenario (on the block-table page). Every page that
    replays the scenario reads them here, so no page reads another page's widget keys."""
    return tuple(st.session_state.setdefault(USER_STEPS_KEY, {}).get(scenario_name, ()))


def set_user_steps(scenario_name: str, steps: tuple | list) -> None:
    """Replace the added requests of one scenario (an empty sequence clears them)."""
    current = dict(st.session_state.get(USER_STEPS_KEY, {}))
    if steps:
        current[scenario_name] = tuple(steps)
    else:
        current.pop(scenario_name, None)
    st.session_state[USER_STEPS_KEY] = current
