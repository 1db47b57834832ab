"""Continuous batching: the model's last forward passes as a timeline, and a burst to watch them share
passes. UI only: the scheduler is kvviz.model.prefill.scheduler_for(lm), the burst kvviz.batching.burst."""

from __future__ import annotations

import secrets
import statistics
import time

import pandas as pd
import streamlit as st

from kvviz.batching.burst import run_burst
from kvviz.batching.demo import DEMO_FRESH, DEMO_PROMPT, DEMO_QUESTIONS
from kvviz.model.prefill import scheduler_for
from kvviz.model.settings import InputError
from kvviz_app import ui, ui_chart
from kvviz_app.figures import batching as F
from kvviz_app.i18n import texts

T = texts("batching")

ui.page_header(T.TITLE, T.INTRO)
lm = ui.get_model()
sched = scheduler_for(lm)
sid = st.session_state.setdefault("batching_sid", secrets.token_hex(8))

st.subheader(T.KINDS_HEADER)
st.markdown(T.KINDS)
st.caption(T.SETTINGS.format(tokens=sched.max_tokens, wait=sched.max_wait_s * 1000,
                             mode=T.MODE_PACKED if sched.max_requests > 1 else T.MODE_ONE) + " " + T.PROBES_ALONE)

st.subheader(T.DEMO_HEADER)
st.markdown(T.DEMO_INTRO)
if st.button(T.DEMO_BUTTON, type="primary", icon=":material/bolt:", key="batching_burst"):
    try:
        with st.spinner(T.DEMO_RUNNING):
            burst = run_burst(lm, sid, DEMO_PROMPT, DEMO_QUESTIONS, DEMO_FRESH)
    except InputError as exc:
        ui.show_error(exc)
    else:
        st.success(T.DEMO_DONE.format(requests=burst.requests, passes=len(burst.passes), shared=burst.shared),
                   icon=":material/check:")

st.subheader(T.TIMELINE_HEADER)
live = st.toggle(T.LIVE, value=False, key="batching_live")


def _timeline() -> None:
    passes = sched.history(limit=16)
    if not passes:
        st.info(T.NO_PASSES, icon=":material/info:")
        return
    sizes = [p.batch_size for p in passes]
    c = st.columns(4)
    c[0].metric(T.M_PASSES, len(passes))
    c[1].metric(T.M_BATCH, T.MEAN_VALUE.format(mean=statistics.mean(sizes)), help=T.M_BATCH_HELP.format(max=max(sizes)))
    c[2].metric(T.M_SHARED, sum(s for s in sizes if s > 1))
    c[3].metric(T.M_PASS_MS, T.MS_VALUE.format(ms=statistics.median(p.ms for p in passes)), help=T.M_PASS_MS_HELP)
    st.markdown(f"**{T.FIG_TITLE}**")
    ui_chart.plotly_chart(F.pass_timeline(passes, viewer=sid), width="stretch", key="batching_timeline")
    cols = T.TABLE_COLUMNS
    now = time.time()
    rows = [{
        cols["pass"]: p.pass_id, cols["ago"]: T.AGO_VALUE.format(s=max(0.0, now - p.started_at)), cols["ms"]: round(p.ms, 1),
        cols["requests"]: p.batch_size, cols["computed"]: p.new_tokens, cols["reused"]: p.past_tokens,
        cols["padding"]: p.padding_tokens,
        cols["kinds"]: ", ".join(sorted({T.KIND_NAMES[F.request_kind(i.past_tokens, i.new_tokens)] for i in p.items})),
    } for p in reversed(passes)]
    with st.expander(T.TABLE):
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


st.fragment(run_every=3 if live else None)(_timeline)()
