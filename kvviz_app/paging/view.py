"""The paging page's sections (pages/paging.py): the headline numbers and their table, the waste, both layouts at
one step, one request's block table and the over-time figure, each from cached, shared results. Views only:
every number comes from kvviz.analysis.paging.sim."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from kvviz.analysis.paging.experiment import PAPER_UTILISATION_BAND, PagingConfig
from kvviz.analysis.paging.sim import PagingComparison, Snapshot, StepRecord, compare_layouts, snapshot_at
from kvviz_app.paging import figures as F
from kvviz_app.shell import ui, ui_chart, ui_present
from kvviz_app.shell.i18n import texts

T = texts("paging")

K_STEP, K_TABLE_REQUEST = "pg_step", "pg_table_request"
LAYOUTS = ("contiguous", "paged")


# Shared, read-only results (st.cache_resource): the page only reads them, and unpickling a copy per run
# (st.cache_data) cost ~50 ms of every rerun.
@st.cache_resource(show_spinner=False, max_entries=32)
def compare(cfg: PagingConfig) -> PagingComparison:
    return compare_layouts(cfg)


@st.cache_resource(show_spinner=False, max_entries=64)
def _snapshot(cfg: PagingConfig, layout: str, step: int) -> tuple[Snapshot, StepRecord]:
    return snapshot_at(cfg, layout, step)


@st.cache_resource(show_spinner=False, max_entries=64)
def over_time(cfg: PagingConfig, lang: str, sized: bool, step: int):
    """The over-time figure per config, language, presenter sizing and step (~130 ms of Plotly work per
    build); st.plotly_chart only reads it."""
    overview = compare(cfg)
    return F.over_time_figure({"contiguous": overview.contiguous, "paged": overview.paged}, cfg.memory_tokens, step)


def headline(overview: PagingComparison) -> None:
    """The three headline numbers, both allocators side by side in a table, and the paper's band beside them."""
    cont, paged = overview.contiguous, overview.paged
    results = {"contiguous": cont, "paged": paged}
    st.subheader(T.RESULTS)
    c = st.columns(3)
    c[0].metric(T.M_UTIL, T.M_UTIL_VALUE.format(cont=cont.utilisation, paged=paged.utilisation), help=T.M_UTIL_HELP)
    c[1].metric(T.M_FIT, T.M_FIT_VALUE.format(cont=cont.requests_fit_at_start, paged=paged.requests_fit_at_start),
                help=T.M_FIT_HELP)
    c[2].metric(T.M_SPEEDUP, T.M_SPEEDUP_VALUE.format(ratio=overview.speedup_steps), help=T.M_SPEEDUP_HELP)
    table = pd.DataFrame(
        {T.TABLE_COLUMNS[name]: [
            ui.loc(f"{res.utilisation:.1%}"), ui.loc(f"{res.requests_fit_at_start:,}"), ui.loc(f"{res.max_running:,}"),
            ui.loc(f"{res.mean_running:,.1f}"), ui.loc(f"{res.steps:,}"), ui.loc(f"{res.throughput:,.2f}"),
            ui.loc(f"{res.preemptions:,}"),
        ] for name, res in results.items()},
        index=list(T.COMPARE_ROWS.values()),
    )
    st.dataframe(table, width="stretch")
    low, high = PAPER_UTILISATION_BAND
    st.info(T.PAPER_NOTE.format(low=low, high=high, cont=cont.utilisation, paged=paged.utilisation),
            icon=":material/description:")
    if paged.preemptions:
        st.caption(T.PREEMPT_NOTE.format(count=paged.preemptions))


def waste(overview: PagingComparison, picture) -> None:
    """Where the waste is (presenter mode: the key picture), and what each kind of waste means."""
    st.subheader(T.WASTE_HEADER)
    st.markdown(T.WASTE_INTRO)
    ui_present.picture(picture, F.waste_figure({"contiguous": overview.contiguous, "paged": overview.paged}),
                       width="stretch", key="pg_waste")
    st.markdown("  \n".join(f"**{T.KIND_LABELS[k]}**: {T.KIND_HELP[k]}" for k in T.KIND_LABELS))


def default_step(overview: PagingComparison) -> int:
    """The step slider's last step; with no step yet, or one past a shorter run's end, a third into the paged run."""
    last = max(overview.contiguous.steps, overview.paged.steps)
    given = st.session_state.get(K_STEP)
    if not isinstance(given, int) or not 0 <= given <= max(1, last):
        st.session_state[K_STEP] = min(last, max(1, overview.paged.steps // 3))
    return last


def layouts(cfg: PagingConfig, overview: PagingComparison, rows: int, step: int) -> Snapshot:
    """Both memories at ``step`` side by side; returns the paged snapshot (its block tables come next)."""
    results = {"contiguous": overview.contiguous, "paged": overview.paged}
    snaps = {name: _snapshot(cfg, name, step) for name in LAYOUTS}
    c = st.columns(2)
    for col, name in zip(c, LAYOUTS, strict=True):
        snapshot, rec = snaps[name]
        with col:
            if step > results[name].steps:
                st.info(T.FINISHED.format(step=results[name].steps), icon=":material/check_circle:")
            if name == "contiguous":
                title = T.CONT_TITLE.format(step=step, running=rec.running, waiting=rec.waiting)
                fig = F.contiguous_layout_figure(snapshot, cfg.memory_tokens, rows)
            else:
                title = T.PAGED_TITLE.format(step=step, running=rec.running, waiting=rec.waiting)
                fig = F.paged_layout_figure(snapshot, cfg.block_size, rows)
            st.markdown(f"**{title}**")
            ui_chart.plotly_chart(fig, width="stretch", key=f"pg_layout_{name}")
    return snaps["paged"][0]


def block_table(paged_snapshot: Snapshot, block_size: int) -> None:
    """One running request's block table at this step (a selectbox of the requests), or that there is none."""
    st.markdown(f"**{T.TABLE_HEADER}.** {T.TABLE_INTRO}")
    tables = paged_snapshot.block_tables
    if not tables:
        st.caption(T.TABLE_NONE)
        return
    lengths = paged_snapshot.lengths
    rid = st.selectbox(T.TABLE_REQUEST, list(tables), key=K_TABLE_REQUEST,
                       format_func=lambda r: T.TABLE_REQUEST_LABEL.format(rid=r, length=lengths[r]))
    by_id = {b.block_id: b for b in paged_snapshot.blocks}
    rows_out = []
    for i, block_id in enumerate(tables[rid]):
        b = by_id[block_id]
        first = i * block_size + 1
        last_token = min((i + 1) * block_size, lengths[rid])
        rows_out.append({
            T.TABLE_TOKENS: T.TABLE_ROW.format(first=first, last=last_token),
            T.TABLE_BLOCK: block_id,
            T.TABLE_STATE: T.TABLE_NOTE.format(ref=b.ref_cnt) if b.kind == "shared" else T.BLOCK_KINDS[b.kind],
        })
    st.dataframe(pd.DataFrame(rows_out), hide_index=True, width="stretch", height=min(400, 38 + 35 * len(rows_out)))
