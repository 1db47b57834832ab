"""Continuous batching: the engine's last steps as a timeline (its own StepRecords), and a burst to watch
prompts share steps. UI only: the engine is kvviz.engine (the process-wide loop), the burst kvviz.experiments.batching.burst."""

from __future__ import annotations

import secrets
import statistics
import time

import pandas as pd
import streamlit as st

from kvviz.experiments.batching.burst import run_burst
from kvviz.experiments.batching.burst_prompts import DEMO_PROMPT, DEMO_QUESTIONS, fresh_prompt
from kvviz.model.tokens import tokenize
from kvviz_app.batching import figures as F
from kvviz_app.shell import ui, ui_chart
from kvviz_app.shell.i18n import texts
from kvviz_app.shell.page_engine import engine_loop_or_stop

T = texts("batching")

NEW_TOKENS = 8
STEPS_SHOWN = 16

ui.page_header(T.TITLE, T.INTRO)
ui.get_model()
loop = engine_loop_or_stop()
engine = loop.engine
sid = st.session_state.setdefault("batching_sid", secrets.token_hex(4))

st.subheader(T.KINDS_HEADER)
st.markdown(T.KINDS)
cfg = engine.config
st.caption(T.SETTINGS.format(tokens=cfg.max_num_batched_tokens, seqs=cfg.max_num_seqs, bs=engine.block_size,
                             blocks=engine.num_blocks) + " " + T.PROBES_ALONE)

st.subheader(T.DEMO_HEADER)
st.markdown(T.DEMO_INTRO.format(new=NEW_TOKENS))
if st.button(T.DEMO_BUTTON, type="primary", icon=":material/bolt:", key="batching_burst"):
    prompts = [tokenize(fresh_prompt(secrets.token_hex(4))).ids] + [tokenize(DEMO_PROMPT + q).ids for q in DEMO_QUESTIONS]
    with st.spinner(T.DEMO_RUNNING):
        burst = run_burst(loop, prompts, tokenize(DEMO_PROMPT + DEMO_QUESTIONS[0]).ids, NEW_TOKENS, owner=sid)
    st.session_state["batching_prefix"] = burst.prefix
    st.success(T.DEMO_DONE.format(requests=burst.requests, steps=len(burst.steps), shared=burst.shared),
               icon=":material/check:")

st.subheader(T.TIMELINE_HEADER)
live = st.toggle(T.LIVE, value=False, key="batching_live")


def _kinds(step) -> str:
    return ", ".join(sorted({T.KIND_NAMES[i.kind] for i in step.items}))


def _timeline() -> None:
    steps = [s for s in loop.read(lambda e: list(e.steps[-STEPS_SHOWN:])) if s.items]
    if not steps:
        st.info(T.NO_STEPS, icon=":material/info:")
        return
    sizes = [s.num_requests for s in steps]
    c = st.columns(4)
    c[0].metric(T.M_STEPS, len(steps))
    c[1].metric(T.M_BATCH, T.MEAN_VALUE.format(mean=statistics.mean(sizes)), help=T.M_BATCH_HELP.format(max=max(sizes)))
    c[2].metric(T.M_TOKENS, T.MEAN_VALUE.format(mean=statistics.mean(s.prefill_tokens + s.decode_tokens for s in steps)),
                help=T.M_TOKENS_HELP)
    c[3].metric(T.M_STEP_MS, T.MS_VALUE.format(ms=statistics.median(s.duration_s for s in steps) * 1000),
                help=T.M_STEP_MS_HELP)
    st.markdown(f"**{T.FIG_TITLE}**")
    mine = st.session_state.get("batching_prefix")
    ui_chart.plotly_chart(F.step_timeline(steps, mine=mine), width="stretch", key="batching_timeline")
    cols = T.TABLE_COLUMNS
    now = time.time()
    rows = [{
        cols["step"]: s.step, cols["ago"]: T.AGO_VALUE.format(s=max(0.0, now - s.started_at)),
        cols["ms"]: round(s.duration_s * 1000, 1), cols["requests"]: s.num_requests,
        cols["computed"]: s.prefill_tokens + s.decode_tokens, cols["reused"]: sum(i.start for i in s.items),
        cols["padding"]: F.padding_tokens(s), cols["kinds"]: _kinds(s), cols["preempted"]: len(s.preempted),
    } for s in reversed(steps)]
    with st.expander(T.TABLE):
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


st.fragment(run_every=3 if live else None)(_timeline)()
