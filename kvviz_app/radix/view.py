"""The radix page's parts (pages/radix.py): its cached scenario, comparison and figures, the scenario and step in
session_state, the step's caption and totals, the LRU lines and the request and eviction tables. Views only:
every number comes from kvviz.analysis.radix_compare."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from kvviz.analysis.radix_compare import RadixComparison, compare_radix_pool
from kvviz.analysis.scenarios.load import load_builtin
from kvviz.analysis.scenarios.records import Scenario
from kvviz.mirror.events import usable_blocks
from kvviz_app.radix import figures as F
from kvviz_app.shell import ui, ui_table
from kvviz_app.shell.i18n import texts

T = texts("radix")

DEFAULT_SCENARIO = "branching_prompts"
K_NAME, K_STEP, K_WINDOW, K_PAGE = "rx_name", "rx_step", "rx_window", "rx_page"


@st.cache_data(show_spinner=False, max_entries=16)
def scenario_of(name: str, extra: tuple) -> Scenario:
    return load_builtin(name).with_steps(extra)


@st.cache_data(show_spinner=False, max_entries=32)
def compare(scenario: Scenario, window: int, page_size: int, lang: str) -> RadixComparison:  # lang: events carry sentences
    return compare_radix_pool(scenario, window, page_size)


@st.cache_resource(show_spinner=False, max_entries=128)
def figures(scenario: Scenario, window: int, page_size: int, lang: str, sized: bool, k: int) -> tuple:
    """(structures, reuse) figures of step ``k``, shared between reruns and sessions (~100 ms of Plotly work
    per build); read-only: presenter mode draws a fresh structures figure, which ui_present.picture resizes."""
    comparison = compare(scenario, window, page_size, lang)
    return F.radix_chain_figure(comparison, k), F.reuse_figure(comparison, k)


def extra(name: str) -> tuple:
    """Requests the user added to this scenario (on the block-table page) join the same history here."""
    return ui.user_steps(name)


def on_scenario() -> None:
    name = st.session_state[K_NAME]
    st.session_state[K_STEP] = scenario_of(name, extra(name)).last_arrival_step  # the most telling moment


def default_scenario(names: list[str]) -> None:
    """The default goes into session_state, not the widget: a link may have set the key (a duplicate-value warning)."""
    st.session_state.setdefault(K_NAME, DEFAULT_SCENARIO if DEFAULT_SCENARIO in names else names[0])


def clamp_step(scenario: Scenario, n: int) -> None:
    """The step slider's value: the last arrival at first, then always within 0..n."""
    if K_STEP not in st.session_state:
        st.session_state[K_STEP] = scenario.last_arrival_step
    st.session_state[K_STEP] = max(0, min(int(st.session_state[K_STEP]), n))


def step_caption(scenario: Scenario, comparison: RadixComparison, k: int) -> None:
    """The pool, the capacity and what step ``k`` does; a request the radix tree refused, as a warning."""
    step = scenario.steps[k - 1] if k else None
    if step is None:
        action = T.ACTION[None]
    else:
        action = T.ACTION[step.op].format(id=step.id, tokens=len(step.tokens),
                                          salt=T.SALT.format(salt=step.salt) if step.salt else "")
    st.caption(T.CAPTION.format(blocks=scenario.num_blocks, usable=usable_blocks(scenario.num_blocks),
                                bs=scenario.block_size, capacity=comparison.capacity_tokens, k=k,
                                n=comparison.num_steps, action=action))
    if comparison.radix_errors[k]:
        st.warning(T.RADIX_REFUSED.format(k=k, error=comparison.radix_errors[k]), icon=":material/block:")


def totals(comparison: RadixComparison, k: int) -> None:
    """Tokens reused until step ``k``: radix tree, block pool, sliding window and the partial tails."""
    st.markdown(f"**{T.METRICS_HEADER}**")
    labels = {"radix": T.METRIC_RADIX, "pool": T.METRIC_POOL, "window": T.METRIC_WINDOW, "tail": T.METRIC_TAIL}
    cols = st.columns(4)
    for col, (key, value) in zip(cols, comparison.reuse_totals(k).items(), strict=True):
        col.metric(labels[key], T.METRIC_VALUE.format(tokens=value), help=T.METRIC_HELP[key])


def lru_lines(comparison: RadixComparison, k: int) -> None:
    """The radix tree's LRU leaves and the block pool's free queue at step ``k``, in eviction order."""
    tree = comparison.radix_states[k]
    sizes = {node.id: node.num_tokens for node in tree.nodes}
    leaves = [T.LRU_ITEM.format(id=i, tokens=sizes[i]) for i in tree.lru_leaves]
    queued = sorted((c for c in comparison.chain_at(k) if c.queue_pos is not None), key=lambda c: c.queue_pos)
    st.caption(T.LRU_LINE.format(leaves=", ".join(leaves)) if leaves else T.LRU_NONE)
    st.caption(T.QUEUE_LINE.format(blocks=", ".join(T.QUEUE_ITEM.format(id=c.block_id, pos=c.queue_pos + 1)
                                                    for c in queued)) if queued else T.QUEUE_NONE)


def requests_table(comparison: RadixComparison, k: int) -> None:
    """Each request until step ``k``: its tokens and what each structure reused of them."""
    cols_t = T.TABLE_COLUMNS
    rows = []
    for r in comparison.requests_until(k):
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


def evictions(comparison: RadixComparison, k: int) -> None:
    """What each engine evicted until step ``k``, or that nothing was."""
    st.subheader(T.EVICTIONS_HEADER)
    st.markdown(T.EVICTIONS_INTRO)
    evicted = [(i, e) for i in range(1, k + 1) for e in comparison.evictions[i]]
    if not evicted:
        st.caption(T.EVICTIONS_NONE)
        return
    cols_e = T.EVICTION_COLUMNS
    st.dataframe(pd.DataFrame([{
        cols_e["step"]: i,
        cols_e["engine"]: T.ENGINE_LABELS[e.engine],
        cols_e["what"]: (T.EVICT_NODE if e.engine == "radix" else T.EVICT_BLOCK).format(id=e.node_or_block),
        cols_e["tokens"]: T.EVICT_TOKENS.format(first=e.start + 1, last=e.end),
        cols_e["count"]: e.num_tokens,
        cols_e["request"]: e.request_id or "",
    } for i, e in evicted]), hide_index=True, width="stretch")
