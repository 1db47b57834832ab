"""Edit one character: the block-hash cascade an edit causes, and its proof on the real K/V tensors."""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from kvviz.mirror import limits
from kvviz.mirror.hashing import DEFAULT_HASH, DEFAULT_SEED, HASH_FUNCTIONS, UNSAFE_HASHES
from kvviz.model.settings import InputError
from kvviz.util.blank import is_blank
from kvviz.util.units import format_bytes
from kvviz.util.utf8 import cyrillic_letters, letters
from kvviz_app import ui, ui_chart, ui_present, ui_schemas, ui_share
from kvviz_app.i18n import current_lang, texts, tr

T = texts("edit")

BLOCK_SIZES = [b for b in limits.BLOCK_SIZE_CHOICES if b <= 128]  # typed BlockSize values
DEFAULT_PRESET = "cat_window"
MODES = ["preset", "char", "free"]  # widget values are codes; labels via _mode_label
MAX_TOKEN_ROWS = 16
K_MODE, K_PRESET, K_TEXT, K_POS, K_REPL = "edit_mode", "edit_preset", "edit_char_text", "edit_char_pos", "edit_char_repl"
K_FREE_A, K_FREE_B, K_BLOCK, K_HASH, K_SEED = "edit_free_a", "edit_free_b", "edit_block_size", "edit_hash", "edit_seed"
K_CURRENT, K_CLICK, K_TOKENS = "edit_current", "edit_last_click", "edit_tokens_chart"

ss = st.session_state


ui.page_header(T.TITLE, T.INTRO)
lm = ui.get_model()

# torch and plotly only after the model is up
from kvviz.edit.diffs import char_diff, invisible_chars, replace_char, token_char_offsets  # noqa: E402
from kvviz.edit.experiment import EditReport, run_edit  # noqa: E402
from kvviz.edit.inputs import EditInputs, edit_inputs  # noqa: E402
from kvviz.edit.presets import EditPreset, load_edit_presets  # noqa: E402
from kvviz.edit.proof import ProofReport, run_proof  # noqa: E402
from kvviz.model.batching import batch_origin  # noqa: E402
from kvviz_app.figures import edit as F  # noqa: E402
from kvviz_app.views import edit_explain as E  # noqa: E402


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


def _apply_token_click() -> None:
    """A click on one of A's tokens (the token chart's selection) switches to "change one character"
    at that token's first character."""
    state = ss.get(K_TOKENS)
    try:
        points = state["selection"]["points"] if state else []
    except (KeyError, TypeError):
        points = []
    if not points:
        return
    data = points[0].get("customdata") or []
    if len(data) != 2 or data[0] != "A":
        return
    a, _ = _current()
    click = (a, int(data[1]))
    if ss.get(K_CLICK) == click:
        return
    ss[K_CLICK] = click
    offsets = token_char_offsets(lm, a, int(data[1]) + 1)
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


# ----------------------------------------------------------------------------- the model work (cached)


@st.cache_data(show_spinner=False, max_entries=32)
def _run_edit(inputs: EditInputs, model: tuple[str, str, str], _lm, lang: str) -> EditReport:
    # lang: the block reasons are sentences. Timed passes: through the batching scheduler, each alone
    # (a shared pass would time others' tokens).
    with batch_origin("edit", alone=True):
        return run_edit(_lm, inputs)


@st.cache_data(show_spinner=False, max_entries=16)
def _run_proof(inputs: EditInputs, model: tuple[str, str, str], _lm, _edit: EditReport) -> ProofReport:
    with batch_origin("edit", alone=True):
        return run_proof(_lm, _edit)


model_id = (lm.info.model_id, lm.info.device, lm.info.dtype)
try:
    inputs = edit_inputs(text_a, text_b, block_size, hash_name, seed)  # the one check of the widgets' values
    with st.spinner(T.EDIT_RUNNING):
        edit = _run_edit(inputs, model_id, lm, current_lang())
    # The proof (full prefills, heatmaps) runs now, before any chart is sent: timed forward passes
    # must not compete with the browser drawing charts on the same CPU.
    with st.spinner(T.PROOF_RUNNING):
        proof = _run_proof(inputs, model_id, lm, edit)
except (InputError, ValueError) as exc:
    st.error(T.INPUT_ERROR.format(error=ui.error_text(exc)), icon=":material/error:")
    st.stop()
cmp = edit.comparison
if not ui_present.predict_edit(cmp, edit.char_edit.start, edit.num_tokens_b, (text_a, text_b, int(block_size))):
    st.stop()  # the learner predicts first; the answers are below the Reveal button

# ----------------------------------------------------------------------------- 2. what changed

st.subheader(T.STEP_CHANGE)
for notice in edit.notices:
    st.warning(T.TRUNCATED.format(notice=texts("common").notice(notice)), icon=":material/content_cut:")
beyond = edit.edit_beyond_limit
if beyond is not None:
    st.warning(T.EDIT_BEYOND_LIMIT.format(pos=edit.char_edit.start, limit=edit.max_tokens, kept=beyond),
               icon=":material/content_cut:")
controls = sorted({E.md(E.char_desc(c)) for c in invisible_chars(text_a + text_b)})
if controls:
    st.info(T.CONTROL_CHARS.format(names=", ".join(controls[:6])), icon=":material/visibility_off:")


if edit.identical:
    same = E.identical_message(edit)
    st.info(same, icon=":material/check_circle:")
    if text_a != text_b and beyond is None:
        st.caption(T.IDENTICAL_TEXT_ONLY.format(desc=" ".join(E.describe_change(edit)) or "-"))
else:
    st.markdown("\n".join(f"- {line}" for line in E.describe_change(edit)))
    if cmp.first_changed_token == 0:
        st.info(T.NOTHING_COMMON, icon=":material/block:")

width = F.TOKENS_PER_ROW
total_rows = max(math.ceil(max(edit.num_tokens_a, edit.num_tokens_b) / width), 1)
row_lo, row_hi = 0, total_rows
if total_rows > MAX_TOKEN_ROWS:
    first_row = (cmp.first_changed_token or 0) // width
    default_lo = max(0, min(first_row - 3, total_rows - MAX_TOKEN_ROWS))
    row_lo, row_hi = st.slider(T.TOKENS_ROWS.format(total=total_rows), 0, total_rows,
                               value=(default_lo, default_lo + MAX_TOKEN_ROWS),
                               key=f"edit_rows_{hash((text_a, text_b))}")
te = edit.token_edit
token_fig = F.token_strip_figure(edit.pieces_a, edit.ids_a, edit.pieces_b, edit.ids_b, te.changed_positions_a,
                                 te.changed_positions_b, cmp, row_lo, row_hi, width)
ui_chart.plotly_chart(token_fig, width="stretch", key=K_TOKENS, on_select="rerun", selection_mode="points",
                      config={"displayModeBar": False})
st.caption(T.TOKENS_CAPTION.format(width=width, block_size=cmp.block_size))


@st.cache_data(show_spinner=False, max_entries=16)
def _letter_cost(text: str, model: str) -> tuple[int, int]:
    from kvviz.model.tokens import letter_cost

    return letter_cost(text, model_name=model)


if letters(text_a) and cyrillic_letters(text_a) * 2 >= letters(text_a):
    from kvviz.model.tokens import ENGLISH_SAMPLE

    ru_tokens, ru_letters = _letter_cost(text_a, lm.source.key)
    en_tokens, en_letters = _letter_cost(ENGLISH_SAMPLE, lm.source.key)
    ru, en = ru_tokens / ru_letters, en_tokens / en_letters
    st.info(T.CYRILLIC_NOTE.format(tokens=ru_tokens, letters=ru_letters, ru=ru, en_tokens=en_tokens,
                                   en_letters=en_letters, en=en, ratio=ru / en), icon=":material/translate:")

# ----------------------------------------------------------------------------- 3. reuse numbers

st.subheader(T.STEP_REUSE)
n_b = edit.num_tokens_b
cols = st.columns(4)
cols[0].metric(T.M_COMMON, T.TOKENS_UNIT.format(n=cmp.common_prefix_tokens), help=T.M_COMMON_HELP)
cols[1].metric(T.M_REUSED, T.TOKENS_UNIT.format(n=cmp.reused_tokens), help=T.M_REUSED_HELP)
cols[2].metric(T.M_RECOMPUTE, T.TOKENS_UNIT.format(n=cmp.recompute_tokens), help=T.M_RECOMPUTE_HELP)
timing = proof.timing  # None when nothing is reused
noise = T.M_WITHIN_NOISE if timing is not None else None
cols[3].metric(T.M_SAVED, T.M_SAVED_VALUE.format(pct=100.0 * edit.reused_share),
               delta=T.M_SAVED_MS.format(ms=proof.saved_ms) if proof.saved_ms is not None else noise,
               delta_color="off", delta_arrow="off", help=T.M_SAVED_HELP)
cols = st.columns(2)
cols[0].metric(T.M_REUSE_MS, T.MS_MEDIAN.format(ms=proof.reuse_prefill_ms), help=T.M_REUSE_MS_HELP)
cols[1].metric(T.M_FULL_MS, T.MS_MEDIAN.format(ms=proof.full_prefill_ms),
               delta=T.M_SPEEDUP.format(x=proof.speedup) if proof.speedup is not None else noise,
               delta_color="off", delta_arrow="off", help=T.M_FULL_MS_HELP)
if timing is not None:
    st.caption(T.TIMING_NOTE.format(runs=len(timing.slow_ms), full_spread=timing.slow_spread_ms,
                                    reuse_spread=timing.fast_spread_ms))
    if not timing.measured:
        st.info(T.TIMING_NOISE.format(full=timing.slow_median_ms, reuse=timing.fast_median_ms,
                                      runs=len(timing.slow_ms)), icon=":material/timer_off:")
st.caption(E.store_note(edit))
if edit.store_stats.get("budget_bytes") == 0:
    st.warning(T.STORE_DISABLED, icon=":material/warning:")
elif edit.store_reused_tokens < cmp.reused_tokens:
    st.warning(T.STORE_SHORT.format(store=edit.store_reused_tokens, chain=cmp.reused_tokens), icon=":material/warning:")

# ----------------------------------------------------------------------------- 4. the chains

st.subheader(T.STEP_CHAIN)
st.markdown(T.CHAIN_INTRO)
ui.hash_reference()
ui_present.picture(PICTURE, F.chain_figure(cmp), width="stretch", key="edit_chain_chart",
                   config={"displayModeBar": False})
with st.expander(T.CHAIN_TABLE):
    table = pd.DataFrame(E.chain_table_rows(cmp))
    st.dataframe(table, hide_index=True, width="stretch")

# ----------------------------------------------------------------------------- 5. the proof

st.subheader(T.STEP_PROOF)
st.markdown(T.PROOF_INTRO)
which = st.radio(T.KV_LABEL, ["K", "V"], horizontal=True, key="edit_kv",
                 format_func=lambda c: T.KV_K if c == "K" else T.KV_V)
heat = proof.heat_k if which == "K" else proof.heat_v
ui_chart.plotly_chart(F.kv_heatmap_figure(heat, which, proof.first_changed_token),
                      width="stretch", key="edit_heatmap_chart", config={"displayModeBar": False})


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    return "0" if x == 0 else ui.loc(f"{x:.3g}")


for fact in E.proof_facts(edit, proof, _fmt):
    st.markdown(f"- {fact}")
st.caption(T.PROOF_PAD_NOTE)

st.markdown(f"**{T.REUSE_EXACT_HEADER}**")
st.markdown(E.reuse_exact(cmp, proof, _fmt))

st.markdown(f"**{T.WRONG_HEADER}**")
wrong = proof.wrong_reuse
if wrong is None:
    st.info(T.WRONG_NONE, icon=":material/info:")
else:
    st.markdown(T.WRONG_INTRO.format(blocks=E.wrong_blocks(wrong)))
    cols = st.columns(3)
    cols[0].metric(T.M_WRONG_DIFF, _fmt(wrong.logits_max_abs_diff), help=T.M_WRONG_DIFF_HELP)
    cols[1].metric(T.M_WRONG_KL, T.KL_VALUE.format(kl=wrong.kl), help=T.M_WRONG_KL_HELP)
    cols[2].metric(T.M_WRONG_NEXT, T.M_WRONG_NEXT_CHANGED if wrong.next_token_changed else T.M_WRONG_NEXT_SAME)
    st.markdown(E.wrong_next_token(wrong))
    st.markdown(T.WRONG_CONCLUSION.format(exact=_fmt(proof.logits_max_abs_diff_reuse),
                                          wrong=_fmt(wrong.logits_max_abs_diff)))

# ----------------------------------------------------------------------------- the K/V store

st.subheader(T.STORE_HEADER)
st.markdown(T.STORE_INTRO)
from kvviz.model.kvstore import get_kv_store  # noqa: E402

stats = get_kv_store().stats()
cols = st.columns(4)
cols[0].metric(T.STORE_BLOCKS, ui.loc(f"{stats.blocks:,}"))
cols[1].metric(T.STORE_BYTES, ui.loc(format_bytes(stats.bytes)), delta=T.STORE_BUDGET.format(budget=ui.loc(format_bytes(stats.budget_bytes))),
               delta_color="off", delta_arrow="off")
cols[2].metric(T.STORE_HITS, ui.loc(f"{stats.hit_blocks:,}"))
cols[3].metric(T.STORE_EVICTIONS, ui.loc(f"{stats.evictions:,}"))
if stats.budget_note:
    st.caption(stats.budget_note)
ui_present.next_link("kvviz_app/page_scripts/edit.py", ui_share.current_params(SHARE))
