"""KV-bytes calculator: per-token KV size for any architecture, its formula, capacity and paging,
and a check against the real model's captured tensors. UI only: numbers come from kvviz.analysis.sizes.kvsize."""

from __future__ import annotations

import streamlit as st

from kvviz.analysis.sizes import kv_formula, kvsize
from kvviz.mirror import limits
from kvviz_app.calculator import view as V
from kvviz_app.calculator.inputs import choose_model
from kvviz_app.shell import ui, ui_present, ui_schemas, ui_share
from kvviz_app.shell.i18n import texts

T = texts("calculator")

# ----------------------------------------------------------------------------- page

ui.page_header(T.TITLE, T.INTRO)
SHARE = ui_schemas.calculator({m: m for m in ("preset", "typed", "config")},  # widget values are codes
                              V.CONTEXT_OPTIONS, V.BLOCK_OPTIONS, V.RESERVE_OPTIONS)
ui_share.restore("calculator", SHARE)
PICTURE = ui_present.key_slot()  # presenter mode: memory against GPU budgets first
shape, preset, parsed = choose_model()

c = st.columns([1.3, 2, 2])
dtype = c[0].radio(T.DTYPE_LABEL, list(kvsize.DTYPES), horizontal=True, key="calc_dtype", help=T.DTYPE_HELP)
tokens = int(c[1].select_slider(T.CONTEXT_LABEL, V.CONTEXT_OPTIONS, key="calc_context",
                                format_func=lambda n: ui.loc(f"{n:,}")))
batch = int(c[2].slider(T.BATCH_LABEL, 1, 1024, key="calc_batch"))

if shape is not None:
    report = kv_formula.report(shape, dtype, tokens, batch)
    V.results(report, preset, parsed)
    V.naive_section(report)
    V.sharing_section(shape, dtype)
    V.compare_section(shape, dtype, preset)
    V.memory_section(shape, dtype, tokens, batch, int(st.session_state.get("calc_block", limits.DEFAULT_BLOCK_SIZE)),
                     PICTURE)
    V.capacity_section(shape, dtype, tokens, batch)
V.articles_section()
V.model_section()
ui_share.sync("calculator", SHARE)
ui_present.next_link("pages/calculator.py", ui_share.current_params(SHARE))
