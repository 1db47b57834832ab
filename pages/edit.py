"""Edit one character: the block-hash cascade an edit causes, and its proof on the real K/V tensors."""

from __future__ import annotations

import streamlit as st

from kvviz.mirror import limits
from kvviz.mirror.hashing import DEFAULT_HASH, DEFAULT_SEED, HASH_FUNCTIONS, UNSAFE_HASHES
from kvviz.model.settings import InputError
from kvviz.util.blank import is_blank
from kvviz_app.shell import ui, ui_present, ui_schemas, ui_share
from kvviz_app.shell.i18n import current_lang, texts, tr

T = texts("edit")

BLOCK_SIZES = [b for b in limits.BLOCK_SIZE_CHOICES if b <= 128]  # typed BlockSize values
MODES = ["preset", "char", "free"]  # widget values are codes; labels via _mode_label
K_MODE, K_PRESET, K_TEXT, K_POS, K_REPL = "edit_mode", "edit_preset", "edit_char_text", "edit_char_pos", "edit_char_repl"
K_FREE_A, K_FREE_B, K_BLOCK, K_HASH, K_SEED = "edit_free_a", "edit_free_b", "edit_block_size", "edit_hash", "edit_seed"
K_CURRENT, K_CLICK, K_TOKENS = "edit_current", "edit_last_click", "edit_tokens_chart"

ss = st.session_state


ui.page_header(T.TITLE, T.INTRO)
lm = ui.get_model()

# torch and plotly only after the model is up
from kvviz.errors import CodedError  # noqa: E402
from kvviz.experiments.edit.diffs import char_diff, replace_char, token_char_offsets  # noqa: E402
from kvviz.experiments.edit.experiment import EditPlan, EditReport, plan_edit, run_edit  # noqa: E402
from kvviz.experiments.edit.inputs import EditInputs, edit_inputs  # noqa: E402
from kvviz.experiments.edit.presets import DEFAULT_PRESET_ID as DEFAULT_PRESET  # noqa: E402
from kvviz.experiments.edit.presets import EditPreset, load_edit_presets  # noqa: E402
from kvviz.experiments.edit.proof import ProofReport, run_proof  # noqa: E402
from kvviz.experiments.edit.report import time_report  # noqa: E402
from kvviz.experiments.edit.timing import EditTiming  # noqa: E402
from kvviz_app.edit import explain as E  # noqa: E402
from kvviz_app.edit import sections as S  # noqa: E402


@st.cache_data(show_spinner=False)
def _presets() -> list[EditPreset]:
    return load_edit_presets()


PRESETS = {p.id: p for p in _presets()}


def _preset() -> EditPreset:
    return PRESETS.get(ss.get(K_PRESET), PRESETS.get(DEFAULT_PRESET) or next(iter(PRESETS.values())))


# ----------------------------------------------------------------------------- state and callbacks

if K_MODE not in ss:
    ss[K_MODE] = "preset"
    ss[K_PRESET] = DEFAULT_PRESET if DEFAULT_PRESET in PRESETS else next(iter(PRESETS))
    ss[K_BLOCK] = _preset().block_size
    ss[K_HASH] = DEFAULT_HASH
    ss[K_SEED] = DEFAULT_SEED or ""  # a text field: empty = no seed (vLLM's rule)
SHARE = ui_schemas.edit(PRESETS, BLOCK_SIZES, {m: m for m in MODES})  # widget values are codes
ui_share.restore("edit", SHARE)
PICTURE = ui_present.key_slot()  # presenter mode: the hash chains first


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


def _new_click() -> tuple[str, int] | None:
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


def _apply_token_click() -> None:
    """A click on one of A's tokens (the token chart's selection) switches to "change one character"
    at that token's first character."""
    click = _new_click()
    if click is None:
        return
    a = click[0]
    ss[K_CLICK] = click
    offsets = token_char_offsets(lm, a, click[1] + 1)
    if offsets:
        ss[K_MODE] = "char"
        _enter_char_mode(a, offsets[-1])


_apply_token_click()

# ----------------------------------------------------------------------------- 1. inputs

st.subheader(T.STEP_INPUT)
mode = st.radio(T.MODE_LABEL, MODES, key=K_MODE, horizontal=True, help=T.MODE_HELP, on_change=_on_mode_change,
                format_func=_mode_label)
if mode == "preset":
    st.selectbox(T.PRESET_LABEL, list(PRESETS), key=K_PRESET, format_func=lambda k: tr(PRESETS[k].title),
                 on_change=_on_preset_change)
    preset = _preset()
    st.caption(tr(preset.description))
    text_a, text_b = preset.a, preset.b
elif mode == "char":
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
else:
    if K_FREE_A not in ss:
        ss[K_FREE_A], ss[K_FREE_B] = _current()
    c_a, c_b = st.columns(2)
    text_a = c_a.text_area(T.FREE_A_LABEL, key=K_FREE_A, height=160)
    text_b = c_b.text_area(T.FREE_B_LABEL, key=K_FREE_B, height=160)
ss[K_CURRENT] = (text_a, text_b)

with st.expander(T.SHOW_PROMPTS):
    c_a, c_b = st.columns(2)
    c_a.caption(T.PROMPT_A_CAPTION)
    c_a.code(text_a, language=None, wrap_lines=True)
    c_b.caption(T.PROMPT_B_CAPTION)
    c_b.code(text_b, language=None, wrap_lines=True)

st.markdown(f"**{T.SETTINGS_HEADER}**")
c_bs, c_hash, c_seed = st.columns([2, 1, 1])
block_size = c_bs.select_slider(T.BLOCK_SIZE_LABEL, BLOCK_SIZES, key=K_BLOCK, help=T.BLOCK_SIZE_HELP)
hash_name = c_hash.selectbox(T.HASH_LABEL, list(HASH_FUNCTIONS), key=K_HASH, help=T.HASH_HELP)
seed = c_seed.text_input(T.SEED_LABEL, key=K_SEED, help=T.SEED_HELP)
st.caption(T.SETTINGS_NOTE)
if hash_name in UNSAFE_HASHES:
    st.warning(T.HASH_UNSAFE, icon=":material/warning:")
ui_share.sync("edit", SHARE)

if is_blank(text_a):
    st.info(T.EMPTY_A, icon=":material/edit:")
    st.stop()
if is_blank(text_b):
    st.info(T.EMPTY_B, icon=":material/edit:")
    st.stop()


# ----------------------------------------------------------------------------- hashing, then the engine (cached)


@st.cache_data(show_spinner=False, max_entries=32)
def _plan(inputs: EditInputs, model: tuple[str, str, str], _lm, lang: str) -> EditPlan:
    return plan_edit(_lm, inputs)  # lang: the plan carries sentences of the session's language


@st.cache_data(show_spinner=False, max_entries=32)
def _run_edit(inputs: EditInputs, model: tuple[str, str, str], _lm, lang: str, _plan: EditPlan) -> EditReport:
    return run_edit(_lm, inputs, _plan)


@st.cache_data(show_spinner=False, max_entries=16)
def _time(inputs: EditInputs, model: tuple[str, str, str], _lm, _edit: EditReport) -> EditTiming | None:
    return time_report(_lm, _edit)


@st.cache_data(show_spinner=False, max_entries=16)
def _run_proof(inputs: EditInputs, model: tuple[str, str, str], _lm, _edit: EditReport,
               _timing: EditTiming | None) -> ProofReport:
    return run_proof(_lm, _edit, _timing)


model_id = (lm.info.model_id, lm.info.device, lm.info.dtype)
try:
    inputs = edit_inputs(text_a, text_b, block_size, hash_name, seed)  # the one check of the widgets' values
    plan = _plan(inputs, model_id, lm, current_lang())  # tokens and hashes only: no forward pass
except (InputError, CodedError, ValueError) as exc:
    st.error(T.INPUT_ERROR.format(error=ui.error_text(exc)), icon=":material/error:")
    st.stop()
if not ui_present.predict_edit(plan.comparison, plan.char_edit.start, plan.num_tokens_b, (text_a, text_b, int(block_size))):
    st.stop()  # the learner predicts first; the answers are below the Reveal button

# drawn from hashing alone, before any engine request; the engine's counts fill the slot above the chains
S.change(plan, text_a, text_b, _new_click)
S.tokenizer_note(text_a, lm.source.key)
reuse_slot = st.container()
S.chains(plan, PICTURE)
try:
    with reuse_slot, st.spinner(T.EDIT_RUNNING):
        edit = _run_edit(inputs, model_id, lm, current_lang(), plan)
except (InputError, CodedError, ValueError) as exc:
    reuse_slot.error(T.INPUT_ERROR.format(error=ui.error_text(exc)), icon=":material/error:")
    st.stop()
with reuse_slot:
    saved_slot, timing_slot = S.reuse_counts(edit)
# timed after the charts and the engine's counts are out: each timed run is an engine request of its own
with timing_slot, st.spinner(T.TIMING_RUNNING):
    timing = _time(inputs, model_id, lm, edit)
S.timing(edit, saved_slot, timing_slot, timing)
with st.spinner(T.PROOF_RUNNING):
    proof = _run_proof(inputs, model_id, lm, edit, timing)
S.proof(edit, proof)
S.engine(edit)
ui_present.next_link("pages/edit.py", ui_share.current_params(SHARE))
