"""Paged vs contiguous memory: one seeded request stream served from one KV memory by two allocators.
UI only: every number comes from kvviz.analysis.paging.sim."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from kvviz.analysis.paging.experiment import PAPER_UTILISATION_BAND, RESERVATION_POLICIES, PagingConfig
from kvviz.analysis.paging.sim import PagingComparison, Snapshot, StepRecord, compare_layouts, snapshot_at
from kvviz.mirror import limits
from kvviz_app.paging import figures as F
from kvviz_app.shell import style, ui, ui_chart, ui_present, ui_schemas, ui_share
from kvviz_app.shell.i18n import current_lang, texts

T = texts("paging")

MEMORY_OPTIONS = [2048, 4096, 8192, 16384, 32768, 65536]
BLOCK_OPTIONS = [b for b in limits.BLOCK_SIZE_CHOICES if b <= 128]  # typed BlockSize values
MAX_LEN_OPTIONS = [1024, 2048, 4096, 8192]
_D = PagingConfig()


# Shared, read-only results (st.cache_resource): the page only reads them, and unpickling a copy per run
# (st.cache_data) cost ~50 ms of every rerun.
@st.cache_resource(show_spinner=False, max_entries=32)
def _compare(cfg: PagingConfig) -> PagingComparison:
    return compare_layouts(cfg)


@st.cache_resource(show_spinner=False, max_entries=64)
def _snapshot(cfg: PagingConfig, layout: str, step: int) -> tuple[Snapshot, StepRecord]:
    return snapshot_at(cfg, layout, step)


@st.cache_resource(show_spinner=False, max_entries=64)
def _over_time(cfg: PagingConfig, lang: str, sized: bool, step: int):
    """The over-time figure per config, language, presenter sizing and step (~130 ms of Plotly work per
    build); st.plotly_chart only reads it."""
    overview = _compare(cfg)
    return F.over_time_figure({"contiguous": overview.contiguous, "paged": overview.paged}, cfg.memory_tokens, step)


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

overview = _compare(cfg)
cont, paged = overview.contiguous, overview.paged
results = {"contiguous": cont, "paged": paged}

# ----------------------------------------------------------------------------- headline numbers
st.subheader(T.RESULTS)
c = st.columns(3)
c[0].metric(T.M_UTIL, T.M_UTIL_VALUE.format(cont=cont.utilisation, paged=paged.utilisation), help=T.M_UTIL_HELP)
c[1].metric(T.M_FIT, T.M_FIT_VALUE.format(cont=cont.requests_fit_at_start, paged=paged.requests_fit_at_start),
            help=T.M_FIT_HELP)
c[2].metric(T.M_SPEEDUP, T.M_SPEEDUP_VALUE.format(ratio=overview.speedup_steps), help=T.M_SPEEDUP_HELP)
table = pd.DataFrame(
    {T.TABLE_COLUMNS[name]: [
        ui.loc(f"{res.utilisation:.1%}"), ui.loc(f"{res.requests_fit_at_start:,}"), ui.loc(f"{res.max_running:,}"),
        ui.loc(f"{res.mean_running:,.1f}"), ui.loc(f"{res.steps:,}"), ui.loc(f"{res.throughput:,.2f}"), ui.loc(f"{res.preemptions:,}"),
    ] for name, res in results.items()},
    index=list(T.COMPARE_ROWS.values()),
)
st.dataframe(table, width="stretch")
low, high = PAPER_UTILISATION_BAND
st.info(T.PAPER_NOTE.format(low=low, high=high, cont=cont.utilisation, paged=paged.utilisation),
        icon=":material/description:")
if paged.preemptions:
    st.caption(T.PREEMPT_NOTE.format(count=paged.preemptions))

# ----------------------------------------------------------------------------- where the waste is
st.subheader(T.WASTE_HEADER)
st.markdown(T.WASTE_INTRO)
ui_present.picture(PICTURE, F.waste_figure(results), width="stretch", key="pg_waste")
st.markdown("  \n".join(f"**{T.KIND_LABELS[k]}**: {T.KIND_HELP[k]}" for k in T.KIND_LABELS))

# ----------------------------------------------------------------------------- layout at one step
st.subheader(T.LAYOUT_HEADER)
rows = F.rows_for(cfg.memory_tokens // cfg.block_size)
st.markdown(T.LAYOUT_INTRO.format(memory=cfg.memory_tokens, row=cfg.memory_tokens // rows, block=cfg.block_size))
last = max(cont.steps, paged.steps)
given = st.session_state.get("pg_step")
if not isinstance(given, int) or not 0 <= given <= max(1, last):  # none yet, or past a shorter run's end
    st.session_state["pg_step"] = min(last, max(1, paged.steps // 3))
step = st.slider(T.STEP, 0, max(1, last), key="pg_step", help=T.STEP_HELP)
snaps = {name: _snapshot(cfg, name, int(step)) for name in ("contiguous", "paged")}
c = st.columns(2)
for col, name in zip(c, ("contiguous", "paged"), strict=True):
    snapshot, rec = snaps[name]
    with col:
        if int(step) > results[name].steps:
            st.info(T.FINISHED.format(step=results[name].steps), icon=":material/check_circle:")
        if name == "contiguous":
            title = T.CONT_TITLE.format(step=int(step), running=rec.running, waiting=rec.waiting)
            fig = F.contiguous_layout_figure(snapshot, cfg.memory_tokens, rows)
        else:
            title = T.PAGED_TITLE.format(step=int(step), running=rec.running, waiting=rec.waiting)
            fig = F.paged_layout_figure(snapshot, cfg.block_size, rows)
        st.markdown(f"**{title}**")
        ui_chart.plotly_chart(fig, width="stretch", key=f"pg_layout_{name}")

# ----------------------------------------------------------------------------- a block table
st.markdown(f"**{T.TABLE_HEADER}.** {T.TABLE_INTRO}")
paged_snapshot = snaps["paged"][0]
tables = paged_snapshot.block_tables
if not tables:
    st.caption(T.TABLE_NONE)
else:
    lengths = paged_snapshot.lengths
    rid = st.selectbox(T.TABLE_REQUEST, list(tables), key="pg_table_request",
                       format_func=lambda r: T.TABLE_REQUEST_LABEL.format(rid=r, length=lengths[r]))
    by_id = {b.block_id: b for b in paged_snapshot.blocks}
    bs = cfg.block_size
    rows_out = []
    for i, block_id in enumerate(tables[rid]):
        b = by_id[block_id]
        first = i * bs + 1
        last_token = min((i + 1) * bs, lengths[rid])
        rows_out.append({
            T.TABLE_TOKENS: T.TABLE_ROW.format(first=first, last=last_token),
            T.TABLE_BLOCK: block_id,
            T.TABLE_STATE: T.TABLE_NOTE.format(ref=b.ref_cnt) if b.kind == "shared" else T.BLOCK_KINDS[b.kind],
        })
    st.dataframe(pd.DataFrame(rows_out), hide_index=True, width="stretch", height=min(400, 38 + 35 * len(rows_out)))

# ----------------------------------------------------------------------------- over time
st.subheader(T.TIME_HEADER)
ui_chart.plotly_chart(_over_time(cfg, current_lang(), style.presenter(), int(step)), width="stretch", key="pg_time")
ui_share.sync("paging", SHARE)
ui_present.next_link("pages/paging.py", ui_share.current_params(SHARE))
