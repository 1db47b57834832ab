"""Radix tree vs hash chain: one request history in SGLang's radix tree, vLLM's block pool and vLLM's
sliding-window hit search. UI only: every number comes from kvviz.analysis.radix_compare; the parts are
kvviz_app.radix.view."""

from __future__ import annotations

import streamlit as st

from kvviz.analysis.scenarios.load import builtin_names
from kvviz.analysis.scenarios.records import ScenarioError
from kvviz_app.radix import figures as F
from kvviz_app.radix import view as V
from kvviz_app.shell import style, ui, ui_chart, ui_present, ui_schemas, ui_share
from kvviz_app.shell.i18n import current_lang, texts, tr

TE = texts("block_table")
T = texts("radix")

WINDOWS = [8, 16, 32, 48, 64, 128]
PAGE_SIZES = [1, 4, 16]

ui.page_header(T.TITLE, T.INTRO)
SHARE = ui_schemas.radix(WINDOWS, PAGE_SIZES)
ui_share.restore("radix", SHARE)
PICTURE = ui_present.key_slot()  # presenter mode: both structures first
with st.expander(T.LEGEND_HEADER):
    st.markdown(T.LEGEND)

names = builtin_names()
V.default_scenario(names)
c = st.columns([3, 1, 1])
name = c[0].selectbox(T.SCENARIO, names,
                      key=V.K_NAME, on_change=V.on_scenario, help=T.SCENARIO_HELP,
                      format_func=lambda n: tr(V.scenario_of(n, ()).title))
window = c[1].selectbox(T.WINDOW, WINDOWS, key=V.K_WINDOW, help=T.WINDOW_HELP)
page_size = c[2].selectbox(T.PAGE_SIZE, PAGE_SIZES, key=V.K_PAGE, help=T.PAGE_SIZE_HELP)
scenario = V.scenario_of(name, V.extra(name))
try:
    comparison = V.compare(scenario, int(window), int(page_size), current_lang())
except ScenarioError as exc:
    st.error(T.BAD_SETTINGS.format(error=TE.scenario_error(exc)), icon=":material/error:")
    st.stop()
n = comparison.num_steps
V.clamp_step(scenario, n)
st.markdown(tr(V.scenario_of(name, ()).description))
k = st.slider(T.STEP, 0, max(n, 1), key=V.K_STEP, help=T.STEP_HELP)
k = min(int(k), n)
V.step_caption(scenario, comparison, k)

# ----------------------------------------------------------------------------- totals
V.totals(comparison, k)

# ----------------------------------------------------------------------------- the structures
st.subheader(T.STRUCTURES_HEADER)
ui.hash_reference()
structures, reuse = V.figures(scenario, int(window), int(page_size), current_lang(), style.presenter(), k)
if PICTURE is not None:  # ui_present.picture changes the figure it draws there: never the shared one
    structures = F.radix_chain_figure(comparison, k)
ui_present.picture(PICTURE, structures, width="stretch", key="rx_structures")
V.lru_lines(comparison, k)

st.subheader(T.REUSE_HEADER)
ui_chart.plotly_chart(reuse, width="stretch", key="rx_reuse")
V.requests_table(comparison, k)

# ----------------------------------------------------------------------------- evictions
V.evictions(comparison, k)
ui_share.sync("radix", SHARE)
ui_present.next_link("pages/radix.py", ui_share.current_params(SHARE))
