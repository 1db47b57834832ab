"""Engine (live): kvviz's serving engine as it runs: requests and block tables, the pool's ref_cnt and
free queue, the step timeline and a block's real K/V. UI only: the engine is kvviz.engine."""

from __future__ import annotations

import secrets

import pandas as pd
import streamlit as st

from kvviz.engine import SamplingParams
from kvviz.engine.snapshot import BURST_NEW_TOKENS, burst_prompts, engine_view
from kvviz.mirror.events import usable_blocks
from kvviz.model.tokens import token_pieces, tokenize
from kvviz.server.embedded import get_api_url, recent_requests
from kvviz_app.engine_view import figures as F
from kvviz_app.engine_view.tiers import tiers_section
from kvviz_app.shell import ui, ui_chart
from kvviz_app.shell.i18n import texts
from kvviz_app.shell.page_engine import engine_loop_or_stop

T = texts("engine_view")

ui.page_header(T.TITLE, T.INTRO)
lm = ui.get_model()
loop = engine_loop_or_stop()
engine = loop.engine
st.caption(T.SIZES.format(blocks=engine.num_blocks, bs=engine.block_size,
                          tokens=usable_blocks(engine.num_blocks) * engine.block_size, mib=engine.kv_cache_bytes / 2**20,
                          block_kib=engine.memory.block_bytes / 1024))

st.subheader(T.BURST_HEADER)
st.markdown(T.BURST_INTRO.format(new=BURST_NEW_TOKENS))
if st.button(T.BURST_BUTTON, type="primary", icon=":material/bolt:", key="engine_burst"):
    tag = secrets.token_hex(3)
    prompts = burst_prompts()
    for i, text in enumerate(prompts):
        loop.submit(f"burst-{tag}-{i}", tokenize(text).ids, SamplingParams(max_tokens=BURST_NEW_TOKENS))
    st.success(T.BURST_SENT.format(n=len(prompts)), icon=":material/check:")
live = st.toggle(T.LIVE, value=False, key="engine_live")


def _requests(view) -> None:
    st.subheader(T.REQUESTS_HEADER)
    if not view.requests:
        st.info(T.NO_REQUESTS, icon=":material/info:")
        return
    rows = [{T.COL_REQUEST: r.request_id, T.COL_CLIENT: r.client, T.COL_STATUS: r.status,
             T.COL_PROMPT: r.num_prompt_tokens,
             T.COL_CACHED: r.num_cached_tokens, T.COL_COMPUTED: r.num_computed_tokens,
             T.COL_OUTPUT: r.num_output_tokens, T.COL_TABLE: " ".join(map(str, r.block_ids))} for r in view.requests]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


def _api_requests() -> None:
    st.subheader(T.API_HEADER)
    url = get_api_url()
    if url is None:
        st.caption(T.API_OFF)
        return
    st.caption(T.API_INTRO.format(url=url))
    done = recent_requests()[::-1][:20]
    if not done:
        st.info(T.API_NONE, icon=":material/info:")
        return
    rows = [{T.COL_CLIENT: r.client, T.COL_REQUEST: r.request_id, T.COL_PROMPT: r.prompt_tokens,
             T.COL_CACHED: r.cached_tokens, T.COL_OUTPUT: r.output_tokens,
             T.COL_TTFT: None if r.ttft_s is None else round(r.ttft_s, 3)} for r in done]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


def _view() -> None:
    view = loop.call(engine_view)
    s = view.stats
    c = st.columns(5)
    c[0].metric(T.M_RUNNING, s.num_running)
    c[1].metric(T.M_WAITING, s.num_waiting)
    c[2].metric(T.M_USAGE, f"{s.kv_cache_usage:.0%}")
    c[3].metric(T.M_HIT, f"{s.prefix_cache_hits / s.prefix_cache_queries:.0%}" if s.prefix_cache_queries else "—",
                help=T.M_HIT_HELP)
    c[4].metric(T.M_PREEMPTIONS, s.num_preemptions)
    _requests(view)
    _api_requests()
    st.subheader(T.STEPS_HEADER)
    if view.steps:
        ui_chart.plotly_chart(F.step_timeline(view.steps), width="stretch", key="engine_steps")
    else:
        st.info(T.NO_STEPS, icon=":material/info:")
    st.subheader(T.POOL_HEADER)
    st.caption(T.POOL_CAPTION.format(head=", ".join(map(str, view.free_queue[:16])) + " …"))
    ui_chart.plotly_chart(F.pool_grid(view.ref_cnt, view.cached), width="stretch", key="engine_pool")
    tiers_section(view.tiers)


st.fragment(run_every=1 if live else None)(_view)()

st.subheader(T.BLOCK_HEADER)
view = loop.call(engine_view)
used = [i for i in range(1, view.num_blocks) if view.ref_cnt[i] > 0 or view.cached[i]]
if not used:
    st.info(T.NO_BLOCKS, icon=":material/info:")
else:
    c = st.columns(3)
    block_id = c[0].selectbox(T.BLOCK_PICK, used, key="engine_block")
    layer = c[1].slider(T.BLOCK_LAYER, 0, lm.info.num_layers - 1, 0, key="engine_layer")
    which = c[2].radio(T.BLOCK_WHICH, ("K", "V"), horizontal=True, key="engine_kv")
    k, v, tokens = loop.call(lambda e: e.kv_of_block(int(block_id)))
    if tokens:
        pieces = token_pieces(lm.tokenizer, tokens)
        st.caption(T.BLOCK_TOKENS.format(id=block_id, tokens=" | ".join(ui.visible_piece(p) for p in pieces)))
    else:
        pieces = []
        st.caption(T.BLOCK_EMPTY.format(id=block_id))
    values = (k if which == "K" else v)[layer].flatten(1).tolist()  # [block_size, kv_heads * head_dim]
    ui_chart.plotly_chart(F.block_heatmap(values, pieces, T.FIG_KV_TITLE.format(which=which, id=block_id, layer=layer)),
                          width="stretch", key="engine_heatmap")
