"""Radix tree vs hash chain: one request history in SGLang's radix tree, vLLM's block pool and vLLM's
sliding-window hit search. UI only: every number comes from kvviz.analysis.radix_compare."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from kvviz.analysis.radix_compare import RadixComparison, compare_radix_pool
from kvviz.analysis.scenarios.load import builtin_names, load_builtin
from kvviz.analysis.scenarios.records import Scenario, ScenarioError
from kvviz.mirror.events import usable_blocks
from kvviz_app.radix import figures as F
from kvviz_app.shell import style, ui, ui_chart, ui_present, ui_schemas, ui_share, ui_table
from kvviz_app.shell.i18n import current_lang, texts, tr

TE = texts("block_table")
T = texts("radix")

WINDOWS = [8, 16, 32, 48, 64, 128]
PAGE_SIZES = [1, 4, 16]
DEFAULT_SCENARIO = "branching_prompts"
K_NAME, K_STEP, K_WINDOW, K_PAGE = "rx_name", "rx_step", "rx_window", "rx_page"


@st.cache_data(show_spinner=False, max_entries=16)
def _scenario(name: str, extra: tuple) -> Scenario:
    return load_builtin(name).with_steps(extra)


@st.cache_data(show_spinner=False, max_entries=32)
def _compare(scenario: Scenario, window: int, page_size: int, lang: str) -> RadixComparison:  # lang: events carry sentences
    return compare_radix_pool(scenario, window, page_size)


@st.cache_resource(show_spinner=False, max_entries=128)
def _figures(scenario: Scenario, window: int, page_size: int, lang: str, sized: bool, k: int) -> tuple:
    """(structures, reuse) figures of step ``k``, shared between reruns and sessions (~100 ms of Plotly work
    per build); read-only: presenter mode draws a fresh structures figure, which ui_present.picture resizes."""
    comparison = _compare(scenario, window, page_size, lang)
    return F.radix_chain_figure(comparison, k), F.reuse_figure(comparison, k)


def _extra(name: str) -> tuple:
    """Requests the user added to this scenario (on the block-table page) join the same history here."""
    return ui.user_steps(name)


def _on_scenario() -> None:
    name = st.session_state[K_NAME]
    st.session_state[K_STEP] = _scenario(name, _extra(name)).last_arrival_step  # the most telling moment


ui.page_header(T.TITLE, T.INTRO)
SHARE = ui_schemas.radix(WINDOWS, PAGE_SIZES)
ui_share.restore("radix", SHARE)
PICTURE = ui_present.key_slot()  # presenter mode: both structures first
with st.expander(T.LEGEND_HEADER):
    st.markdown(T.LEGEND)

names = builtin_names()
# the default goes into session_state, not the widget: a link may have set the key (a duplicate-value warning)
st.session_state.setdefault(K_NAME, DEFAULT_SCENARIO if DEFAULT_SCENARIO in names else names[0])
c = st.columns([3, 1, 1])
name = c[0].selectbox(T.SCENARIO, names,
                      key=K_NAME, on_change=_on_scenario, help=T.SCENARIO_HELP,
                      format_func=lambda n: tr(_scenario(n, ()).title))
window = c[1].selectbox(T.WINDOW, WINDOWS, key=K_WINDOW, help=T.WINDOW_HELP)
page_size = c[2].selectbox(T.PAGE_SIZE, PAGE_SIZES, key=K_PAGE, help=T.PAGE_SIZE_HELP)
scenario = _scenario(name, _extra(name))
try:
    comparison = _compare(scenario, int(window), int(page_size), current_lang())
except ScenarioError as exc:
    st.error(T.BAD_SETTINGS.format(error=TE.scenario_error(exc)), icon=":material/error:")
    st.stop()
n = comparison.num_steps
if K_STEP not in st.session_state:
    st.session_state[K_STEP] = scenario.last_arrival_step
st.session_state[K_STEP] = max(0, min(int(st.session_state[K_STEP]), n))
st.markdown(tr(_scenario(name, ()).description))
k = st.slider(T.STEP, 0, max(n, 1), key=K_STEP, help=T.STEP_HELP)
k = min(int(k), n)

step = scenario.steps[k - 1] if k else None
if step is None:
    action = T.ACTION[None]
else:
    action = T.ACTION[step.op].format(id=step.id, tokens=len(step.tokens),
                                      salt=T.SALT.format(salt=step.salt) if step.salt else "")
st.caption(T.CAPTION.format(blocks=scenario.num_blocks, usable=usable_blocks(scenario.num_blocks), bs=scenario.block_size,
                            capacity=comparison.capacity_tokens, k=k, n=n, action=action))
if comparison.radix_errors[k]:
    st.warning(T.RADIX_REFUSED.format(k=k, error=comparison.radix_errors[k]), icon=":material/block:")

# ----------------------------------------------------------------------------- totals
requests = comparison.requests_until(k)
st.markdown(f"**{T.METRICS_HEADER}**")
totals = comparison.reuse_totals(k)
labels = {"radix": T.METRIC_RADIX, "pool": T.METRIC_POOL, "window": T.METRIC_WINDOW, "tail": T.METRIC_TAIL}
cols = st.columns(4)
for col, (key, value) in zip(cols, totals.items(), strict=True):
    col.metric(labels[key], T.METRIC_VALUE.format(tokens=value), help=T.METRIC_HELP[key])

# ----------------------------------------------------------------------------- the structures
st.subheader(T.STRUCTURES_HEADER)
ui.hash_reference()
structures, reuse = _figures(scenario, int(window), int(page_size), current_lang(), style.presenter(), k)
if PICTURE is not None:  # ui_present.picture changes the figure it draws there: never the shared one
    structures = F.radix_chain_figure(comparison, k)
ui_present.picture(PICTURE, structures, width="stretch", key="rx_structures")
tree = comparison.radix_states[k]
sizes = {node.id: node.num_tokens for node in tree.nodes}
leaves = [T.LRU_ITEM.format(id=i, tokens=sizes[i]) for i in tree.lru_leaves]
queued = sorted((c for c in comparison.chain_at(k) if c.queue_pos is not None), key=lambda c: c.queue_pos)
st.caption(T.LRU_LINE.format(leaves=", ".join(leaves)) if leaves else T.LRU_NONE)
st.caption(T.QUEUE_LINE.format(blocks=", ".join(T.QUEUE_ITEM.format(id=c.block_id, pos=c.queue_pos + 1)
                                                for c in queued)) if queued else T.QUEUE_NONE)

st.subheader(T.REUSE_HEADER)
ui_chart.plotly_chart(reuse, width="stretch", key="rx_reuse")

cols_t = T.TABLE_COLUMNS
rows = []
for r in requests:
    rows.append({
        cols_t["request"]: T.REQUEST_LABEL.format(  # as the reuse chart labels its rows
            id=T.REQUEST_SALT.format(id=r.request_id, salt=r.salt) if r.salt else r.request_id, step=r.step),
        cols_t["tokens"]: r.num_tokens,
        cols_t["history"]: r.history_prefix_tokens,
        cols_t["radix"]: T.TABLE_REFUSED if r.radix_tokens is None else r.radix_tokens,
        cols_t["pool"]: T.TABLE_REFUSED if r.pool_tokens is None else r.pool_tokens,
        cols_t["tail"]: r.partial_tail_tokens,
        cols_t["window"]: T.TABLE_REFUSED if r.window_tokens is None else r.window_tokens,
        cols_t["window_blocks"]: (T.WINDOW_BLOCKS.format(kept=r.window_kept_blocks, total=len(r.window_block_ids),
                                                         skipped=len(r.window_block_ids) - r.window_kept_blocks)
                                  if r.window_block_ids else T.WINDOW_NONE),
    })
if rows:
    st.markdown(f"**{T.TABLE_HEADER}**")
    # an HTML table (a data grid would scroll sideways at 1024 px), words kept whole
    ui_table.wrapping_table(pd.DataFrame(rows).astype(str), key="rx_requests")
    st.caption(T.TABLE_NOTE)

# ----------------------------------------------------------------------------- evictions
st.subheader(T.EVICTIONS_HEADER)
st.markdown(T.EVICTIONS_INTRO)
evicted = [(i, e) for i in range(1, k + 1) for e in comparison.evictions[i]]
if not evicted:
    st.caption(T.EVICTIONS_NONE)
else:
    cols_e = T.EVICTION_COLUMNS
    st.dataframe(pd.DataFrame([{
        cols_e["step"]: i,
        cols_e["engine"]: T.ENGINE_LABELS[e.engine],
        cols_e["what"]: (T.EVICT_NODE if e.engine == "radix" else T.EVICT_BLOCK).format(id=e.node_or_block),
        cols_e["tokens"]: T.EVICT_TOKENS.format(first=e.start + 1, last=e.end),
        cols_e["count"]: e.num_tokens,
        cols_e["request"]: e.request_id or "",
    } for i, e in evicted]), hide_index=True, width="stretch")
ui_share.sync("radix", SHARE)
ui_present.next_link("pages/radix.py", ui_share.current_params(SHARE))
