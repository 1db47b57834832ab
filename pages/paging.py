"""Paged vs contiguous memory: one seeded request stream served from one KV memory by two allocators.
UI only: every number comes from kvviz.analysis.paging.sim; the sections are kvviz_app.paging.view."""

from __future__ import annotations

import streamlit as st

from kvviz.analysis.paging.experiment import RESERVATION_POLICIES, PagingConfig
from kvviz.mirror import limits
from kvviz_app.paging import figures as F
from kvviz_app.paging import view as V
from kvviz_app.shell import style, ui, ui_chart, ui_present, ui_schemas, ui_share
from kvviz_app.shell.i18n import current_lang, texts

T = texts("paging")

MEMORY_OPTIONS = [2048, 4096, 8192, 16384, 32768, 65536]
BLOCK_OPTIONS = [b for b in limits.BLOCK_SIZE_CHOICES if b <= 128]  # typed BlockSize values
MAX_LEN_OPTIONS = [1024, 2048, 4096, 8192]

ui.page_header(T.TITLE, T.INTRO)
SHARE = ui_schemas.paging(MEMORY_OPTIONS, BLOCK_OPTIONS, MAX_LEN_OPTIONS)
ui_share.restore("paging", SHARE)
PICTURE = ui_present.key_slot()  # presenter mode: the waste comparison first
st.caption(T.UNITS_NOTE)

# ----------------------------------------------------------------------------- controls
with st.expander(T.CONTROLS, expanded=True):
    c = st.columns(4)
    memory = c[0].select_slider(T.MEMORY, MEMORY_OPTIONS, key="pg_memory",
                                help=T.MEMORY_HELP)
    block = c[1].select_slider(T.BLOCK, BLOCK_OPTIONS, key="pg_block", help=T.BLOCK_HELP)
    requests = c[2].slider(T.REQUESTS, 1, 300, key="pg_requests", help=T.REQUESTS_HELP)
    prefix = c[3].slider(T.PREFIX, 0, 1024, step=8, key="pg_prefix", help=T.PREFIX_HELP)
    c = st.columns(4)
    prompt = c[0].slider(T.PROMPT, 1, 2048, key="pg_prompt")
    output = c[1].slider(T.OUTPUT, 1, 2048, key="pg_output", help=T.OUTPUT_HELP)
    max_len = c[2].select_slider(T.MAX_LEN, MAX_LEN_OPTIONS, key="pg_max_len",
                                 help=T.MAX_LEN_HELP)
    seed = c[3].number_input(T.SEED, 0, 10_000, key="pg_seed")
    c = st.columns([2, 1])
    reservation = c[0].radio(T.RESERVATION, RESERVATION_POLICIES, key="pg_reservation", horizontal=True,
                             format_func=T.RESERVATION_OPTIONS.get, help=T.RESERVATION_HELP)
    sharing = c[1].checkbox(T.SHARING, key="pg_sharing")

cfg = PagingConfig(
    memory_tokens=int(memory), block_size=int(block), num_requests=int(requests), shared_prefix=int(prefix),
    prompt_min=int(prompt[0]), prompt_max=int(prompt[1]), output_min=int(output[0]), output_max=int(output[1]),
    max_model_len=int(max_len), reservation=str(reservation), share_prefix=bool(sharing), seed=int(seed),
)
try:
    cfg.validate()
except ValueError as exc:
    st.error(T.BAD_CONFIG.format(error=exc), icon=":material/error:")
    st.stop()

overview = V.compare(cfg)
V.headline(overview)
V.waste(overview, PICTURE)

# ----------------------------------------------------------------------------- layout at one step
st.subheader(T.LAYOUT_HEADER)
rows = F.rows_for(cfg.memory_tokens // cfg.block_size)
st.markdown(T.LAYOUT_INTRO.format(memory=cfg.memory_tokens, row=cfg.memory_tokens // rows, block=cfg.block_size))
last = V.default_step(overview)
step = int(st.slider(T.STEP, 0, max(1, last), key=V.K_STEP, help=T.STEP_HELP))
paged_snapshot = V.layouts(cfg, overview, rows, step)
V.block_table(paged_snapshot, cfg.block_size)

# ----------------------------------------------------------------------------- over time
st.subheader(T.TIME_HEADER)
ui_chart.plotly_chart(V.over_time(cfg, current_lang(), style.presenter(), step), width="stretch", key="pg_time")
ui_share.sync("paging", SHARE)
ui_present.next_link("pages/paging.py", ui_share.current_params(SHARE))
