"""The sections of the "Edit one character" page below its inputs, each a function that draws one part
from the reports (the page script calls them in order). Widgets that change only their own picture (the
token rows, K or V) live in ``st.fragment`` functions, so using them redraws that part alone."""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from kvviz.experiments.edit.experiment import EditPlan, EditReport
from kvviz.experiments.edit.proof import ProofReport
from kvviz.experiments.edit.rules import cyrillic_note_applies
from kvviz.experiments.edit.timing import EditTiming
from kvviz.util.units import format_bytes
from kvviz_app.edit import explain as E
from kvviz_app.edit import figures as F
from kvviz_app.shell import ui, ui_chart, ui_present
from kvviz_app.shell.i18n import texts

T = texts("edit")

MAX_TOKEN_ROWS = 16
K_TOKENS = "edit_tokens_chart"


def fmt(x: float | None) -> str:
    if x is None:
        return "-"
    return "0" if x == 0 else ui.loc(f"{x:.3g}")


def change(edit: EditPlan, text_a: str, text_b: str, new_click) -> None:
    """2 · what changed: notices, the change in words, the token strip and the tokenizer note."""
    st.subheader(T.STEP_CHANGE)
    cmp = edit.comparison
    for notice in edit.notices:
        st.warning(T.TRUNCATED.format(notice=texts("common").notice(notice)), icon=":material/content_cut:")
    beyond = edit.edit_beyond_limit
    if beyond is not None:
        st.warning(T.EDIT_BEYOND_LIMIT.format(pos=edit.char_edit.start, limit=edit.max_tokens, kept=beyond),
                   icon=":material/content_cut:")
    from kvviz.experiments.edit.diffs import invisible_chars

    controls = sorted({E.md(E.char_desc(c)) for c in invisible_chars(text_a + text_b)})
    if controls:
        st.info(T.CONTROL_CHARS.format(names=", ".join(controls[:6])), icon=":material/visibility_off:")
    if edit.identical:
        st.info(E.identical_message(edit), icon=":material/check_circle:")
        if text_a != text_b and beyond is None:
            st.caption(T.IDENTICAL_TEXT_ONLY.format(desc=" ".join(E.describe_change(edit)) or "-"))
    else:
        st.markdown("\n".join(f"- {line}" for line in E.describe_change(edit)))
        if cmp.first_changed_token == 0:
            st.info(T.NOTHING_COMMON, icon=":material/block:")
    tokens(edit, new_click)


@st.fragment
def tokens(edit: EditPlan, new_click) -> None:
    """The token strip (a fragment: its rows slider redraws only the strip; a click on one of A's tokens,
    ``new_click()`` true, reruns the whole page, which moves the one-character tools there)."""
    cmp, width = edit.comparison, F.TOKENS_PER_ROW
    total_rows = max(math.ceil(max(edit.num_tokens_a, edit.num_tokens_b) / width), 1)
    row_lo, row_hi = 0, total_rows
    if total_rows > MAX_TOKEN_ROWS:
        first_row = (cmp.first_changed_token or 0) // width
        row_lo, row_hi = rows_from_slider(st.slider(
            T.TOKENS_ROWS.format(total=total_rows), 1, total_rows, value=default_rows(total_rows, first_row),
            key=f"edit_rows_{hash((edit.text_a, edit.text_b))}"))
    te = edit.token_edit
    fig = F.token_strip_figure(edit.pieces_a, edit.ids_a, edit.pieces_b, edit.ids_b, te.changed_positions_a,
                               te.changed_positions_b, cmp, row_lo, row_hi, width)
    ui_chart.plotly_chart(fig, width="stretch", key=K_TOKENS, on_select="rerun", selection_mode="points",
                          config={"displayModeBar": False})
    if new_click():
        st.rerun()
    if total_rows > MAX_TOKEN_ROWS:  # say which rows are drawn and how many are not
        st.caption(rows_shown_line(T, row_lo, row_hi, total_rows, width,
                                   max(edit.num_tokens_a, edit.num_tokens_b)))
    st.caption(T.TOKENS_CAPTION.format(width=width, block_size=cmp.block_size))


def default_rows(total_rows: int, first_row: int) -> tuple[int, int]:
    """The rows slider's first value: MAX_TOKEN_ROWS rows (1-based, both ends included) with the first
    changed row (0-based ``first_row``) three rows from the top where the prompt allows."""
    lo = max(0, min(first_row - 3, total_rows - MAX_TOKEN_ROWS))
    return lo + 1, lo + MAX_TOKEN_ROWS


def rows_from_slider(value: tuple[int, int]) -> tuple[int, int]:
    """The figure's rows (0-based, end excluded) of a slider value (1-based, both ends included)."""
    first, last = int(value[0]), int(value[1])
    return first - 1, max(first, last)


def rows_shown_line(t, row_lo: int, row_hi: int, total_rows: int, width: int, num_tokens: int | None = None) -> str:
    """One line: the rows drawn (1-based), of how many, their token positions (up to the longer prompt's
    ``num_tokens``) and how many are hidden."""
    last = row_hi * width - 1 if num_tokens is None else min(row_hi * width, num_tokens) - 1
    return t.TOKENS_ROWS_SHOWN.format(lo=row_lo + 1, hi=row_hi, total=total_rows, first=row_lo * width,
                                      last=last, hidden=total_rows - (row_hi - row_lo))


@st.cache_data(show_spinner=False, max_entries=16)
def _letter_cost(text: str, model: str) -> tuple[int, int]:
    from kvviz.model.tokens import letter_cost

    return letter_cost(text, model_name=model)


def tokenizer_note(text_a: str, model: str) -> None:
    """The measured tokens-per-letter note (``model``'s tokenizer), only for a prompt that is mostly
    Cyrillic letters."""
    if not cyrillic_note_applies(text_a):
        return
    from kvviz.model.tokens import ENGLISH_SAMPLE

    ru_tokens, ru_letters = _letter_cost(text_a, model)
    en_tokens, en_letters = _letter_cost(ENGLISH_SAMPLE, model)
    ru, en = ru_tokens / ru_letters, en_tokens / en_letters
    st.info(T.CYRILLIC_NOTE.format(tokens=ru_tokens, letters=ru_letters, ru=ru, en_tokens=en_tokens,
                                   en_letters=en_letters, en=en, ratio=ru / en), icon=":material/translate:")


def reuse_counts(edit: EditReport):
    """3 · the reuse numbers (the engine's counts); returns the slot the timing fills later."""
    st.subheader(T.STEP_REUSE)
    cmp = edit.comparison
    cols = st.columns(4)
    cols[0].metric(T.M_COMMON, T.TOKENS_UNIT.format(n=cmp.common_prefix_tokens), help=T.M_COMMON_HELP)
    cols[1].metric(T.M_REUSED, T.TOKENS_UNIT.format(n=edit.engine_reused_tokens), help=T.M_REUSED_HELP)
    cols[2].metric(T.M_RECOMPUTE, T.TOKENS_UNIT.format(n=edit.num_tokens_b - edit.engine_reused_tokens),
                   help=T.M_RECOMPUTE_HELP)
    saved = cols[3].empty()
    saved.metric(T.M_SAVED, T.M_SAVED_VALUE.format(pct=100.0 * edit.engine_reused_tokens / max(edit.num_tokens_b, 1)),
                 help=T.M_SAVED_HELP)
    slot = st.container()
    st.caption(E.engine_note(edit))
    if edit.engine_reused_tokens < cmp.reused_tokens:
        st.warning(T.ENGINE_SHORT.format(engine=edit.engine_reused_tokens, chain=cmp.reused_tokens),
                   icon=":material/warning:")
    return saved, slot


def timing(edit: EditReport, saved, slot, timing_: EditTiming | None) -> None:
    """The measured compute of both sides, into the slots ``reuse_counts`` left."""
    c = timing_.comparison if timing_ is not None else None
    noise = T.M_WITHIN_NOISE if c is not None else None
    pct = 100.0 * edit.engine_reused_tokens / max(edit.num_tokens_b, 1)
    saved.metric(T.M_SAVED, T.M_SAVED_VALUE.format(pct=pct),
                 delta=T.M_SAVED_MS.format(ms=c.saved_ms) if c is not None and c.saved_ms is not None else noise,
                 delta_color="off", delta_arrow="off", help=T.M_SAVED_HELP)
    full_ms = c.slow_median_ms if c is not None else edit.run_b.compute_ms
    reuse_ms = c.fast_median_ms if c is not None else edit.run_b.compute_ms
    with slot:
        cols = st.columns(2)
        cols[0].metric(T.M_REUSE_MS, T.MS_MEDIAN.format(ms=reuse_ms), help=T.M_REUSE_MS_HELP)
        cols[1].metric(T.M_FULL_MS, T.MS_MEDIAN.format(ms=full_ms),
                       delta=T.M_SPEEDUP.format(x=c.speedup) if c is not None and c.speedup is not None else noise,
                       delta_color="off", delta_arrow="off", help=T.M_FULL_MS_HELP)
        if c is None:
            return
        st.caption(T.TIMING_NOTE.format(runs=len(c.slow_ms), full_spread=c.slow_spread_ms,
                                        reuse_spread=c.fast_spread_ms, wait=timing_.median_wait_ms))
        if not c.measured:
            st.info(T.TIMING_NOISE.format(full=c.slow_median_ms, reuse=c.fast_median_ms, runs=len(c.slow_ms)),
                    icon=":material/timer_off:")


def chains(edit: EditPlan, picture) -> None:
    """4 · the two block chains and their table."""
    st.subheader(T.STEP_CHAIN)
    st.markdown(T.CHAIN_INTRO)
    ui.hash_reference()
    # on the projector the key picture has KEY_PICTURE_MAX_HEIGHT: as many rows as fit there unsqueezed
    rows = F.MAX_ROWS if picture is None else F.rows_fitting(ui_present.KEY_PICTURE_MAX_HEIGHT)
    ui_present.picture(picture, F.chain_figure(edit.comparison, max_rows=rows), width="stretch",
                       key="edit_chain_chart", config={"displayModeBar": False})
    st.caption(T.FIG_CHAIN_B_KEY)
    with st.expander(T.CHAIN_TABLE):
        st.dataframe(pd.DataFrame(E.chain_table_rows(edit.comparison)), hide_index=True, width="stretch")


def proof(edit: EditReport, proof_: ProofReport) -> None:
    """5 · the proof on the real tensors: the K/V map (a fragment), exact reuse, the wrong reuse."""
    st.subheader(T.STEP_PROOF)
    st.markdown(T.PROOF_INTRO)
    heatmap(proof_)
    for fact in E.proof_facts(edit, proof_, fmt):
        st.markdown(f"- {fact}")
    st.caption(T.PROOF_PAD_NOTE)
    st.markdown(f"**{T.REUSE_EXACT_HEADER}**")
    st.markdown(E.reuse_exact(edit, proof_, fmt))
    st.markdown(f"**{T.WRONG_HEADER}**")
    wrong = proof_.wrong_reuse
    if wrong is None:
        st.info(T.WRONG_NONE, icon=":material/info:")
        return
    st.markdown(T.WRONG_INTRO.format(blocks=E.wrong_blocks(wrong)))
    cols = st.columns(3)
    cols[0].metric(T.M_WRONG_DIFF, fmt(wrong.logits_max_abs_diff), help=T.M_WRONG_DIFF_HELP)
    cols[1].metric(T.M_WRONG_KL, T.KL_VALUE.format(kl=wrong.kl), help=T.M_WRONG_KL_HELP)
    cols[2].metric(T.M_WRONG_NEXT, T.M_WRONG_NEXT_CHANGED if wrong.next_token_changed else T.M_WRONG_NEXT_SAME)
    st.markdown(E.wrong_next_token(wrong))
    st.markdown(T.WRONG_CONCLUSION.format(exact=fmt(proof_.logits_max_abs_diff_reuse),
                                          wrong=fmt(wrong.logits_max_abs_diff)))


@st.fragment
def heatmap(proof_: ProofReport) -> None:
    """K or V difference map (a fragment: the K/V switch redraws only the map)."""
    which = st.radio(T.KV_LABEL, ["K", "V"], horizontal=True, key="edit_kv",
                     format_func=lambda c: T.KV_K if c == "K" else T.KV_V)
    heat = proof_.heat_k if which == "K" else proof_.heat_v
    ui_chart.plotly_chart(F.kv_heatmap_figure(heat, which, proof_.first_changed_token),
                          width="stretch", key="edit_heatmap_chart", config={"displayModeBar": False})


def engine(edit: EditReport) -> None:
    """6 · the engine that ran A and B: which one, its memory, its prefix-cache counters."""
    info = edit.engine
    st.subheader(T.ENGINE_HEADER)
    st.markdown(T.ENGINE_INTRO)
    st.caption(T.ENGINE_SHARED.format(block_size=info.block_size) if info.shared
               else T.ENGINE_OWN.format(block_size=info.block_size, hash=info.hash_name))
    cols = st.columns(4)
    cols[0].metric(T.ENGINE_BLOCKS, ui.loc(f"{info.num_blocks:,}"))
    cols[1].metric(T.ENGINE_BYTES, ui.loc(format_bytes(info.kv_cache_bytes)))
    cols[2].metric(T.ENGINE_USAGE, ui.loc(f"{100 * info.kv_cache_usage:.1f} %"))
    cols[3].metric(T.ENGINE_HIT_RATE, ui.loc(T.ENGINE_HIT_VALUE.format(hits=info.prefix_cache_hits,
                                                                       queries=info.prefix_cache_queries)))
