"""The KV-bytes calculator's sections (pages/calculator.py): results and formula, naive
vs exact, head sharing, presets compared, memory against budgets, capacity and paging, the articles' figures and
the real model's check. Views only: every number comes from kvviz.analysis (kvsize, kv_formula, kv_capacity)."""

from __future__ import annotations

from fractions import Fraction

import pandas as pd
import streamlit as st

from kvviz.analysis.sizes import kv_capacity, kv_formula, kvsize
from kvviz.analysis.sizes.hf_config import ParsedConfig
from kvviz.analysis.sizes.kvsize import ModelShape
from kvviz.analysis.sizes.presets import (
    PRESETS,
    Preset,
    article_checks,
)
from kvviz.mirror import limits
from kvviz.util import units
from kvviz.util.blank import is_blank
from kvviz.util.units import format_bytes, format_exact
from kvviz_app.calculator import figures as F
from kvviz_app.shell import style, ui, ui_chart, ui_present
from kvviz_app.shell.i18n import current_lang, texts, tr

T = texts("calculator")
TC = texts("calculator_config")


CONTEXT_OPTIONS = [100, 500, 1000, 2000, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 1048576]
BLOCK_OPTIONS = list(limits.BLOCK_SIZE_CHOICES)  # typed BlockSize values
RESERVE_OPTIONS = [1.0, 1.5, 2.0, 4.0, 8.0]
_MODEL_RESULT = "calc_model_result"


def _loc_bytes(value) -> str:
    """units.format_bytes in the session's language (separators, КиБ/МиБ/ГиБ)."""
    return ui.loc(format_bytes(value))


def _loc_exact(value) -> str:
    return ui.loc(format_exact(value))


def _format_value(value) -> str:
    return ui.loc(units.format_value(value))


# ----------------------------------------------------------------------------- layout helpers


def stat_row(items: list[tuple[str, str, str | None, str | None]], width: int = 220) -> None:
    """Metric cards (label, value, exact-value caption, help) that wrap onto new rows on narrow screens
    instead of truncating their numbers."""
    row = st.container(horizontal=True, gap="small")
    for label, value, note, help_text in items:
        with row.container(border=True, width=width):
            st.metric(label, value, help=help_text)
            if note:
                st.caption(note)


# ----------------------------------------------------------------------------- sections


def results(rep: kv_formula.KVReport, preset: Preset | None, parsed: ParsedConfig | None) -> None:
    shape = rep.shape
    st.subheader(T.RESULT_TITLE)
    stat_row([
        (T.M_PER_TOKEN, _loc_bytes(rep.bytes_per_token), _loc_exact(rep.bytes_per_token), None),
        (T.M_PER_REQUEST.format(tokens=rep.tokens), _loc_bytes(rep.request_bytes), _loc_exact(rep.request_bytes), None),
        (T.M_TOTAL.format(batch=rep.batch), _loc_bytes(rep.total_bytes), _loc_exact(rep.total_bytes), None),
        (T.M_ATTENTION, shape.attention,
         T.ATTENTION_DETAIL[shape.attention].format(group=_format_value(shape.group_size), heads=shape.num_heads),
         None),
    ])

    st.latex(T.formula_latex(
        kv_layers=shape.num_kv_layers, layers=shape.num_layers, kv_heads=shape.num_kv_heads,
        head_dim=shape.head_dim, bytes_per_value=rep.bytes_per_value, dtype=rep.dtype,
        per_token=rep.bytes_per_token, per_token_human=_loc_bytes(rep.bytes_per_token),
        mla=(shape.mla.kv_lora_rank, shape.mla.qk_rope_head_dim) if shape.mla else None,
    ))
    st.latex(T.total_latex(
        tokens=rep.tokens, batch=rep.batch, per_token=rep.bytes_per_token, full=shape.num_full_layers,
        sliding=shape.num_sliding_layers, window=shape.sliding_window,
        per_layer_bytes=kv_formula.bytes_per_layer_per_token(shape, rep.dtype),
        total=rep.total_bytes, total_human=_loc_bytes(rep.total_bytes),
    ))
    st.caption(T.FORMULA_CAPTION + " " + T.ROUNDING)
    for code, params in shape.warning_codes:
        st.warning(T.WARNING.format(warning=T.SHAPE_WARNINGS[code].format(**params)), icon=":material/warning:")

    if shape.num_state_layers:
        st.info(T.HYBRID_BODY.format(
            all_layers=_loc_bytes(rep.all_layers_bytes_per_token), all_exact=_loc_exact(rep.all_layers_bytes_per_token),
            layers=shape.num_layers, exact=_loc_bytes(rep.bytes_per_token), exact_exact=_loc_exact(rep.bytes_per_token),
            kv_layers=shape.num_kv_layers, state=shape.num_state_layers, state_kind=T.STATE_KIND,
        ), icon=":material/layers:")
    if preset is not None and preset.article_bytes_per_token is not None:
        st.markdown(T.ARTICLE_FIGURE.format(
            figure=_loc_bytes(preset.article_bytes_per_token), exact=_loc_exact(preset.article_bytes_per_token),
            note=tr(preset.article_note)))
    if shape.num_sliding_layers and rep.tokens <= (shape.sliding_window or 0):
        st.info(T.SLIDING_NOT_FULL.format(sliding=shape.num_sliding_layers, layers=shape.num_layers,
                                          window=shape.sliding_window or 0, tokens=rep.tokens),
                icon=":material/swipe_right:")
    elif shape.num_sliding_layers:
        unbounded = rep.bytes_per_token * rep.tokens
        st.info(T.SLIDING_NOTE.format(
            sliding=shape.num_sliding_layers, layers=shape.num_layers, window=shape.sliding_window or 0,
            tokens=rep.tokens, request=_loc_bytes(rep.request_bytes), unbounded=_loc_bytes(unbounded),
        ), icon=":material/swipe_right:")
    notes = parsed.notes if parsed is not None else shape.notes
    if notes or (parsed is not None and parsed.config_dtype):
        with st.expander(T.CONFIG_NOTES):
            st.markdown("\n".join(f"- {TC.config_note(n)}" for n in notes))
            if parsed is not None and parsed.config_dtype:
                st.caption(T.CONFIG_DTYPE.format(dtype=parsed.config_dtype))


def naive_section(rep: kv_formula.KVReport) -> None:
    shape = rep.shape
    st.subheader(T.NAIVE_TITLE)
    c = [st.container(), st.container()]  # chart above its text: a 3/5 column is too narrow at 1024 px
    ui_chart.plotly_chart(F.naive_vs_exact_figure(rep), width="stretch", key="calc_fig_naive", where=c[0])
    factor = rep.naive_factor
    if factor is None or rep.naive_bytes_per_token == rep.bytes_per_token:
        c[1].markdown(T.NAIVE_SAME.format(naive=_loc_bytes(rep.naive_bytes_per_token)))
        return
    reason = T.NAIVE_REASON[shape.attention].format(
        d_model=shape.d_model, hd=shape.num_heads * shape.head_dim, kv=shape.num_kv_heads, heads=shape.num_heads,
        values=shape.values_per_layer)
    if shape.attention == "MHA" and shape.mha_equivalent_d_model:
        reason = ""
    text = T.NAIVE_BODY.format(naive=_loc_bytes(rep.naive_bytes_per_token),
                               naive_exact=_loc_exact(rep.naive_bytes_per_token),
                               factor=_format_value(round(Fraction(factor), 2)),
                               exact=_loc_bytes(rep.bytes_per_token), reason=reason)
    if shape.num_state_layers:
        text += T.NAIVE_STATE.format(state=shape.num_state_layers)
    c[1].markdown(text)


@st.cache_resource(show_spinner=False, max_entries=256)
def _figure(builder: str, lang: str, sized: bool, *args):
    """``F.<builder>(*args)``, shared between reruns and sessions per language and presenter sizing: the
    figures are pure functions of their arguments and st.plotly_chart only reads them (~30-130 ms of Plotly
    work per build)."""
    return getattr(F, builder)(*args)


def _shared(builder: str, *args):
    return _figure(builder, current_lang(), style.presenter(), *args)


def sharing_section(shape: ModelShape, dtype: str) -> None:
    st.subheader(T.SHARING_TITLE)
    st.caption(T.SHARING_CAPTION)
    ui_chart.plotly_chart(_shared("head_sharing_figure", shape), width="stretch", key="calc_fig_heads")
    if shape.mla is not None:
        st.caption(T.SHARING_MLA.format(rank=shape.mla.kv_lora_rank, rope=shape.mla.qk_rope_head_dim))
    ui_chart.plotly_chart(_shared("layer_strip_figure", shape, dtype), width="stretch", key="calc_fig_layers")
    st.caption(T.LAYERS_CAPTION)


def compare_section(shape: ModelShape, dtype: str, preset: Preset | None) -> None:
    st.subheader(T.COMPARE_TITLE)
    rows = []
    for p in PRESETS:
        s = p.shape()
        rows.append(F.BarRow(tr(p.label), kv_formula.bytes_per_token(s, dtype), kv_formula.all_layers_bytes_per_token(s, dtype),
                             highlight=preset is not None and p.key == preset.key))
    if preset is None:
        rows.append(F.BarRow(shape.name, kv_formula.bytes_per_token(shape, dtype),
                             kv_formula.all_layers_bytes_per_token(shape, dtype), highlight=True))
    ui_chart.plotly_chart(F.bytes_per_token_bar(rows, dtype), width="stretch", key="calc_fig_compare")
    st.caption(T.COMPARE_CAPTION.format(dtype=dtype))


def memory_section(shape: ModelShape, dtype: str, tokens: int, batch: int, block_size: int, picture) -> None:
    """KV memory against GPU budgets; ``picture``: presenter mode's key slot (ui_present.key_slot) or None."""
    st.subheader(T.MEMORY_TITLE)
    st.caption(T.MEMORY_CAPTION)
    # the chart gets the full width (in a half column at 1024 px its title was cut under its legend)
    # presenter mode resizes the figure it draws (ui_present.picture): a fresh one there, never the shared one
    fig = (_shared("memory_vs_budget_figure", shape, dtype, tokens, batch) if picture is None
           else F.memory_vs_budget_figure(shape, dtype, tokens, batch))
    ui_present.picture(picture, fig, width="stretch", key="calc_fig_mem")
    rows = kv_capacity.budget_rows(shape, dtype, tokens, batch, block_size=block_size)
    table = pd.DataFrame({
        T.BUDGET_COL: [T.BUDGET_OPTION.format(gib=_format_value(r.budget_gib)) for r in rows],
        T.NEEDED_COL: [_loc_bytes(r.needed_bytes) for r in rows],
        T.SHARE_COL: [ui.loc(f"{100 * r.share:,.1f}%") for r in rows],
        T.FITS_COL: [T.YES if r.fits else T.NO for r in rows],
        T.MAXREQ_COL: [ui.loc(f"{r.max_requests:,}") if r.max_requests is not None else "—" for r in rows],
    })
    st.table(table)
    st.caption(T.MEMORY_TABLE_CAPTION.format(tokens=tokens, block=block_size))


def capacity_section(shape: ModelShape, dtype: str, tokens: int, batch: int) -> None:
    st.subheader(T.CAPACITY_TITLE)
    c = st.columns(3)
    choices: list[float | None] = [*kv_capacity.GPU_BUDGETS_GIB, None]  # None: a custom budget
    choice = c[0].radio(T.BUDGET_LABEL, choices, horizontal=True, key="calc_budget",
                        format_func=lambda b: T.BUDGET_CUSTOM if b is None else T.BUDGET_OPTION.format(gib=b))
    if choice is None:
        gib = c[0].number_input(T.BUDGET_CUSTOM_LABEL, 0.01, 1_000_000.0, key="calc_budget_custom")
    else:
        gib = float(choice)
    block = c[1].select_slider(T.BLOCK_LABEL, BLOCK_OPTIONS, key="calc_block")
    reserve = c[2].select_slider(T.RESERVE_LABEL, RESERVE_OPTIONS, key="calc_reserve",
                                 format_func=T.RESERVE_OPTION.format)
    if kv_formula.bytes_per_token(shape, dtype) == 0:
        st.info(T.NO_KV)
        return
    budget = kv_capacity.gib_bytes(gib)
    cap = kv_capacity.capacity(shape, dtype, budget, tokens, int(block))
    stat_row([
        (T.C_MAX_TOKENS, ui.loc(f"{cap.max_tokens:,}") if cap.max_tokens is not None else "-", None, T.C_MAX_TOKENS_HELP),
        (T.C_MAX_REQUESTS, ui.loc(f"{cap.max_requests:,}") if cap.max_requests is not None else "-",
         T.C_MAX_REQUESTS_NOTE.format(tokens=tokens), None),
        (T.C_MAX_CONTEXT, T.C_UNBOUNDED if cap.max_context is None else ui.loc(f"{cap.max_context:,}"), None,
         T.C_UNBOUNDED_HELP if cap.max_context is None else T.C_MAX_CONTEXT_HELP),
        (T.C_BLOCKS, ui.loc(f"{cap.blocks_per_request:,}"), None, T.C_BLOCKS_HELP),
        (T.C_BLOCK_BYTES, _loc_bytes(cap.bytes_per_block), _loc_exact(cap.bytes_per_block), T.C_BLOCK_BYTES_HELP),
    ], width=172)
    max_len = max(tokens, int(round(tokens * reserve)))
    cmp = kv_capacity.paging_comparison(shape, dtype, tokens, max_len, batch, int(block))
    c = [st.container(), st.container()]  # chart above its text: a 3/5 column is too narrow at 1024 px
    ui_chart.plotly_chart(F.paging_figure(cmp), width="stretch", key="calc_fig_paging", where=c[0])
    bound = _loc_bytes(kv_capacity.paged_waste_bound(shape, dtype, int(block), batch))
    c[1].markdown(T.PAGING_BODY.format(max_len=max_len, contig=100 * cmp.contiguous_utilisation,
                                       paged=100 * cmp.paged_utilisation, block=int(block), bound=bound))


def articles_section() -> None:
    with st.expander(T.ARTICLES_TITLE):
        lines = []
        for check in article_checks():
            params = dict(check.params)
            if "bytes" in params:
                params.update(human=_loc_bytes(params["bytes"]), gb=params["bytes"] / 1e9)
            lines.append(T.ARTICLE_CHECK.format(
                mark=T.ARTICLE_EXACT if check.exact else T.ARTICLE_CLOSE, claim=T.ARTICLE_CLAIMS[check.code],
                exact=_loc_exact(check.computed_bytes), human=_loc_bytes(check.computed_bytes),
                note=T.ARTICLE_NOTES[check.code].format(**params)))
        st.markdown("\n".join(lines))


def model_section() -> None:
    st.subheader(T.MODEL_TITLE)
    st.caption(T.MODEL_CAPTION)
    with st.form("calc_model_form", border=False):
        text = st.text_input(T.MODEL_TEXT_LABEL, value=T.MODEL_DEFAULT_TEXT, key="calc_model_text", max_chars=4000)
        run = st.form_submit_button(T.MODEL_BUTTON, type="primary")
    if run:
        if is_blank(text):
            st.error(T.MODEL_EMPTY, icon=":material/error:")
        else:
            lm, error = ui.try_get_model()
            if lm is None:
                st.error(T.MODEL_ERROR.format(error=error), icon=":material/error:")
            else:
                try:
                    from kvviz.engine.prefill import prefill

                    with st.spinner(T.MODEL_LOADING):
                        result = prefill(lm, text=text)
                    info = lm.info
                    st.session_state[_MODEL_RESULT] = {
                        "tokens": result.num_tokens, "measured": result.kv_bytes_measured, "dtype": result.dtype,
                        "device": result.device, "layers": info.num_layers, "heads": info.num_heads,
                        "kv_heads": info.num_kv_heads, "head_dim": info.head_dim, "d_model": info.d_model,
                        "name": info.name,
                    }
                except Exception as exc:  # noqa: BLE001 - one line in the UI, never a traceback
                    st.session_state.pop(_MODEL_RESULT, None)
                    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                    st.error(T.MODEL_ERROR.format(error=first), icon=":material/error:")
    res = st.session_state.get(_MODEL_RESULT)
    if not res:
        return
    shape = kvsize.ModelShape(res["name"], res["layers"], res["heads"], res["kv_heads"], res["head_dim"], res["d_model"])
    calc = kv_formula.bytes_per_token(shape, res["dtype"])
    per = Fraction(res["measured"], res["tokens"])
    stat_row([
        (T.MODEL_TOKENS, ui.loc(f"{res['tokens']:,}"), None, None),
        (T.MODEL_MEASURED, _loc_bytes(res["measured"]), _loc_exact(res["measured"]), None),
        (T.MODEL_MEASURED_PER_TOKEN, _loc_bytes(per), _loc_exact(per), None),
        (T.MODEL_CALC_PER_TOKEN, _loc_bytes(calc), kv_formula.formula_text(shape, res["dtype"]), None),
    ])
    if per == calc:
        st.success(T.MODEL_MATCH.format(measured=_loc_exact(res["measured"]), tokens=res["tokens"],
                                        per=_loc_exact(per), calc=_loc_exact(calc), dtype=res["dtype"],
                                        device=res["device"]), icon=":material/check_circle:")
    else:
        st.error(T.MODEL_MISMATCH.format(per=_loc_exact(per), calc=_loc_exact(calc)), icon=":material/error:")
    st.caption(T.MODEL_SHAPE.format(layers=res["layers"], heads=res["heads"], kv=res["kv_heads"],
                                    hd=res["head_dim"], dtype=res["dtype"]))


