"""The "Edit one character" page's inputs and session state: the presets, the widget keys and their first
values, the mode and preset callbacks, a click on one of A's tokens, the input and settings widgets, and
the cached runs (hashing, the engine, the timing, the proof). The sections below the inputs are
kvviz_app.edit.sections."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from kvviz.errors import CodedError
from kvviz.experiments.edit.diffs import char_diff, replace_char, token_char_offsets
from kvviz.experiments.edit.experiment import EditPlan, EditReport, plan_edit, run_edit
from kvviz.experiments.edit.inputs import EditInputs, edit_inputs
from kvviz.experiments.edit.presets import DEFAULT_PRESET_ID as DEFAULT_PRESET
from kvviz.experiments.edit.presets import EditPreset, load_edit_presets
from kvviz.experiments.edit.proof import ProofReport, run_proof
from kvviz.experiments.edit.report import time_report
from kvviz.experiments.edit.timing import EditTiming
from kvviz.mirror import limits
from kvviz.mirror.hashing import DEFAULT_HASH, DEFAULT_SEED, HASH_FUNCTIONS, UNSAFE_HASHES
from kvviz.model import LoadedModel
from kvviz.model.settings import InputError
from kvviz.util.blank import is_blank
from kvviz_app.edit import explain as E
from kvviz_app.shell import ui, ui_schemas
from kvviz_app.shell.i18n import current_lang, texts, tr
from kvviz_app.shell.share import Param

T = texts("edit")

BLOCK_SIZES = [b for b in limits.BLOCK_SIZE_CHOICES if b <= 128]  # typed BlockSize values
MODES = ["preset", "char", "free"]  # widget values are codes; labels via _mode_label
K_MODE, K_PRESET, K_TEXT, K_POS, K_REPL = "edit_mode", "edit_preset", "edit_char_text", "edit_char_pos", "edit_char_repl"
K_FREE_A, K_FREE_B, K_BLOCK, K_HASH, K_SEED = "edit_free_a", "edit_free_b", "edit_block_size", "edit_hash", "edit_seed"
K_CURRENT, K_CLICK, K_TOKENS = "edit_current", "edit_last_click", "edit_tokens_chart"

ss = st.session_state


@dataclass(frozen=True)
class Settings:
    """The hashing settings the widgets chose (raw: ``edit_inputs`` checks them)."""

    block_size: int
    hash_name: str
    seed: str


@st.cache_data(show_spinner=False)
def _presets() -> list[EditPreset]:
    return load_edit_presets()


def presets() -> dict[str, EditPreset]:
    """The presets by id (loaded once per process)."""
    return {p.id: p for p in _presets()}


def _preset() -> EditPreset:
    by_id = presets()
    return by_id.get(ss.get(K_PRESET), by_id.get(DEFAULT_PRESET) or next(iter(by_id.values())))


def share_schema() -> dict[str, Param]:
    """The page's share-link parameters (widget values are codes)."""
    return ui_schemas.edit(presets(), BLOCK_SIZES, {m: m for m in MODES})


def init_state() -> None:
    """The widgets' first values on a session's first run (the default preset, its block size, the default
    hash, no seed)."""
    if K_MODE in ss:
        return
    by_id = presets()
    ss[K_MODE] = "preset"
    ss[K_PRESET] = DEFAULT_PRESET if DEFAULT_PRESET in by_id else next(iter(by_id))
    ss[K_BLOCK] = _preset().block_size
    ss[K_HASH] = DEFAULT_HASH
    ss[K_SEED] = DEFAULT_SEED or ""  # a text field: empty = no seed (vLLM's rule)


def _current() -> tuple[str, str]:
    return ss.get(K_CURRENT) or (_preset().a, _preset().b)


def _enter_char_mode(text: str, position: int, replacement: str | None = None) -> None:
    ss[K_TEXT] = text
    ss[K_POS] = max(0, min(position, max(len(text) - 1, 0)))
    if replacement is not None:
        ss[K_REPL] = replacement
    elif not ss.get(K_REPL):
        ss[K_REPL] = "x"


def _mode_label(code: str) -> str:
    return {"preset": T.MODE_PRESET, "char": T.MODE_CHAR, "free": T.MODE_FREE}[code]


def _on_mode_change() -> None:
    a, b = _current()
    if ss[K_MODE] == "char":
        edit = char_diff(a, b)
        one = len(edit.added) == 1 and edit.end_a - edit.start == 1
        _enter_char_mode(a, edit.start if edit.start < len(a) else 0, edit.added if one else None)
    elif ss[K_MODE] == "free":
        ss[K_FREE_A], ss[K_FREE_B] = a, b


def _on_preset_change() -> None:
    ss[K_BLOCK] = _preset().block_size


def new_click() -> tuple[str, int] | None:
    """(A's text, token index) of a click on one of A's tokens not handled yet, else None."""
    state = ss.get(K_TOKENS)
    try:
        points = state["selection"]["points"] if state else []
    except (KeyError, TypeError):
        points = []
    data = (points[0].get("customdata") or []) if points else []
    if len(data) != 2 or data[0] != "A":
        return None
    click = (_current()[0], int(data[1]))
    return None if ss.get(K_CLICK) == click else click


def apply_token_click(lm: LoadedModel) -> None:
    """A click on one of A's tokens (the token chart's selection) switches to "change one character"
    at that token's first character."""
    click = new_click()
    if click is None:
        return
    a = click[0]
    ss[K_CLICK] = click
    offsets = token_char_offsets(lm, a, click[1] + 1)
    if offsets:
        ss[K_MODE] = "char"
        _enter_char_mode(a, offsets[-1])


def inputs() -> tuple[str, str]:
    """1 · the inputs: the mode, then a preset, one character to change, or two free texts; returns the
    two prompts (A, B), which later runs start from."""
    st.subheader(T.STEP_INPUT)
    mode = st.radio(T.MODE_LABEL, MODES, key=K_MODE, horizontal=True, help=T.MODE_HELP,
                    on_change=_on_mode_change, format_func=_mode_label)
    if mode == "preset":
        text_a, text_b = _preset_input()
    elif mode == "char":
        text_a, text_b = _char_input()
    else:
        if K_FREE_A not in ss:
            ss[K_FREE_A], ss[K_FREE_B] = _current()
        c_a, c_b = st.columns(2)
        text_a = c_a.text_area(T.FREE_A_LABEL, key=K_FREE_A, height=160)
        text_b = c_b.text_area(T.FREE_B_LABEL, key=K_FREE_B, height=160)
    ss[K_CURRENT] = (text_a, text_b)
    return text_a, text_b


def _preset_input() -> tuple[str, str]:
    by_id = presets()
    st.selectbox(T.PRESET_LABEL, list(by_id), key=K_PRESET, format_func=lambda k: tr(by_id[k].title),
                 on_change=_on_preset_change)
    preset = _preset()
    st.caption(tr(preset.description))
    return preset.a, preset.b


def _char_input() -> tuple[str, str]:
    """The base text, the position (a slider, or a number field for a one-character text) and the new
    character; B is the base text with that character replaced."""
    if K_TEXT not in ss:
        _enter_char_mode(_current()[0], 0)
    text_a = st.text_area(T.CHAR_BASE_LABEL, key=K_TEXT, height=110)
    c_pos, c_repl = st.columns([5, 1])
    top = max(len(text_a) - 1, 0)
    if ss.get(K_POS, 0) > top:
        ss[K_POS] = top
    if top > 0:
        pos = c_pos.slider(T.CHAR_POS_LABEL, 0, top, key=K_POS, help=T.CHAR_POS_HELP)
    else:
        pos = c_pos.number_input(T.CHAR_POS_LABEL, 0, top, key=K_POS, help=T.CHAR_POS_HELP)
    replacement = c_repl.text_input(T.CHAR_REPL_LABEL, key=K_REPL, max_chars=1, help=T.CHAR_REPL_HELP)
    text_b = replace_char(text_a, int(pos), replacement) if text_a else ""
    if text_a and pos < len(text_a):
        ch = text_a[pos]
        st.caption(E.char_at(text_a, int(pos)))
        if replacement == ch:
            st.caption(T.CHAR_NOOP)
    return text_a, text_b


def prompts(text_a: str, text_b: str) -> None:
    """Both prompts in full, in an expander."""
    with st.expander(T.SHOW_PROMPTS):
        c_a, c_b = st.columns(2)
        c_a.caption(T.PROMPT_A_CAPTION)
        c_a.code(text_a, language=None, wrap_lines=True)
        c_b.caption(T.PROMPT_B_CAPTION)
        c_b.code(text_b, language=None, wrap_lines=True)


def settings() -> Settings:
    """The block size, the hash function and the seed (a warning for a hash that is not collision-safe)."""
    st.markdown(f"**{T.SETTINGS_HEADER}**")
    c_bs, c_hash, c_seed = st.columns([2, 1, 1])
    block_size = c_bs.select_slider(T.BLOCK_SIZE_LABEL, BLOCK_SIZES, key=K_BLOCK, help=T.BLOCK_SIZE_HELP)
    hash_name = c_hash.selectbox(T.HASH_LABEL, list(HASH_FUNCTIONS), key=K_HASH, help=T.HASH_HELP)
    seed = c_seed.text_input(T.SEED_LABEL, key=K_SEED, help=T.SEED_HELP)
    st.caption(T.SETTINGS_NOTE)
    if hash_name in UNSAFE_HASHES:
        st.warning(T.HASH_UNSAFE, icon=":material/warning:")
    return Settings(block_size, hash_name, seed)


# ----------------------------------------------------------------------------- hashing, then the engine (cached)
# model: (model id, device, dtype), the part of each cache key that names the model (_lm is not hashed)


@st.cache_data(show_spinner=False, max_entries=32)
def _plan(inputs_: EditInputs, model: tuple[str, str, str], _lm: LoadedModel, lang: str) -> EditPlan:
    return plan_edit(_lm, inputs_)  # lang: the plan carries sentences of the session's language


@st.cache_data(show_spinner=False, max_entries=32)
def _run_edit(inputs_: EditInputs, model: tuple[str, str, str], _lm: LoadedModel, lang: str,
              _plan: EditPlan) -> EditReport:
    return run_edit(_lm, inputs_, _plan)


@st.cache_data(show_spinner=False, max_entries=16)
def _time(inputs_: EditInputs, model: tuple[str, str, str], _lm: LoadedModel,
          _edit: EditReport) -> EditTiming | None:
    return time_report(_lm, _edit)


@st.cache_data(show_spinner=False, max_entries=16)
def _run_proof(inputs_: EditInputs, model: tuple[str, str, str], _lm: LoadedModel, _edit: EditReport,
               _timing: EditTiming | None) -> ProofReport:
    return run_proof(_lm, _edit, _timing)


def _model(lm: LoadedModel) -> tuple[str, str, str]:
    return lm.info.model_id, lm.info.device, lm.info.dtype


def stop_if_blank(text_a: str, text_b: str) -> None:
    """Stops the page with a hint while either prompt is blank."""
    if is_blank(text_a):
        st.info(T.EMPTY_A, icon=":material/edit:")
        st.stop()
    if is_blank(text_b):
        st.info(T.EMPTY_B, icon=":material/edit:")
        st.stop()


def plan_or_stop(lm: LoadedModel, text_a: str, text_b: str, s: Settings) -> tuple[EditInputs, EditPlan]:
    """The checked inputs (the one check of the widgets' values) and their plan (tokens and hashes only:
    no forward pass); bad input stops the page with one line."""
    try:
        inputs_ = edit_inputs(text_a, text_b, s.block_size, s.hash_name, s.seed)
        return inputs_, _plan(inputs_, _model(lm), lm, current_lang())
    except (InputError, CodedError, ValueError) as exc:
        st.error(T.INPUT_ERROR.format(error=ui.error_text(exc)), icon=":material/error:")
        st.stop()


def run_or_stop(lm: LoadedModel, inputs_: EditInputs, plan: EditPlan, slot) -> EditReport:
    """A then B through the engine (a spinner in ``slot``, where an error goes too and stops the page)."""
    try:
        with slot, st.spinner(T.EDIT_RUNNING):
            return _run_edit(inputs_, _model(lm), lm, current_lang(), plan)
    except (InputError, CodedError, ValueError) as exc:
        slot.error(T.INPUT_ERROR.format(error=ui.error_text(exc)), icon=":material/error:")
        st.stop()


def timing(lm: LoadedModel, inputs_: EditInputs, edit: EditReport) -> EditTiming | None:
    """B's compute timed with and without the reused prefix (each timed run is an engine request)."""
    return _time(inputs_, _model(lm), lm, edit)


def proof(lm: LoadedModel, inputs_: EditInputs, edit: EditReport, timing_: EditTiming | None) -> ProofReport:
    """The proof on the real K/V tensors: exact reuse, and the wrong reuse past the change."""
    return _run_proof(inputs_, _model(lm), lm, edit, timing_)
