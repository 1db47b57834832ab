"""The "Your traffic" page's sections: the trace (example or upload, read once and cached), the model and
marks, the headline numbers, the hit-rate curve, the curve over time, the block pool, reuse distances,
shared prefixes and statistics. Every number comes from kvviz.analysis.workload; the page script
(pages/workload.py) calls these in order."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from fractions import Fraction

import pandas as pd
import streamlit as st

from kvviz.analysis.sizes import kv_formula, kvsize
from kvviz.analysis.sizes.hf_config import parse_config_text
from kvviz.analysis.sizes.kv_capacity import budget_blocks, gib_bytes
from kvviz.analysis.sizes.kvsize import KVSizeError
from kvviz.analysis.sizes.presets import PRESETS, get_preset
from kvviz.analysis.workload.example import EXAMPLE_PATH
from kvviz.analysis.workload.load import load_trace
from kvviz.analysis.workload.pool import PoolReplay, replay_block_pool
from kvviz.analysis.workload.report import (
    curve,
    parse_capacities,
    report,
    timeline,
    top_prefixes,
    trace_stats,
)
from kvviz.analysis.workload.reuse_distance import (
    WorkloadProfile,
    analyze,
    distance_histogram,
    log_grid,
    replay_lru,
)
from kvviz.analysis.workload.trace import BadLines, Progress, WorkloadError, WorkloadTrace
from kvviz.util.units import format_bytes
from kvviz_app.edit.explain import md
from kvviz_app.shell import ui, ui_chart
from kvviz_app.shell.i18n import texts, tr
from kvviz_app.workload import figures as F

TC = texts("calculator_config")
T = texts("workload")

GRID_POINTS = 200
#: The largest trace the page reads, in MB (the server's upload cap, .streamlit/config.toml, is above it so a
#: larger file reaches the page and is refused in words, not by the browser in Streamlit's English).
TRACE_LIMIT_MB = 1024
CONFIG_OPTION = "config.json"
CAP_KEY = "wl_capacity"


@st.cache_resource(show_spinner=False, max_entries=4)
def _trace(digest: str, block_size: int | None, model: str, _data: bytes,
           _progress) -> tuple[WorkloadTrace, BadLines]:
    def tokenizer():
        from kvviz.model.loader import load_tokenizer

        return load_tokenizer(model)

    bad = BadLines()  # counted and skipped, as the CLI does by default
    return load_trace(_data, block_size, tokenizer, progress=_progress, bad=bad), bad


def _show_progress(bar, p: Progress) -> None:
    eta = T.PROGRESS_ETA.format(eta=ui.loc(f"{p.eta_s:,.0f}")) if p.eta_s is not None else ""
    bar.progress(min(1.0, p.done / p.total) if p.total else 0.0,
                 text=T.PROGRESS.format(done=ui.loc(f"{p.done:,}"), total=ui.loc(f"{p.total:,}"),
                                        requests=ui.loc(f"{p.requests:,}"), rate=ui.loc(f"{p.rate:,.0f}"), eta=eta))


@st.cache_resource(show_spinner=False, max_entries=8)
def _profile(digest: str, block_size: int | None, model: str, ttl: int, _trace: WorkloadTrace) -> WorkloadProfile:
    return analyze(_trace, ttl or None, track=[0])


@st.cache_resource(show_spinner=False, max_entries=8)
def _replay(digest: str, block_size: int | None, model: str, capacity: int, _trace: WorkloadTrace) -> list[int]:
    """Per-request hit tokens at one capacity (one plain replay; the curve itself never re-runs)."""
    return replay_lru(_trace, capacity)


@st.cache_resource(show_spinner=False, max_entries=8)
def _pool(digest: str, block_size: int | None, model: str, capacity: int, concurrency: int,
          _trace: WorkloadTrace) -> PoolReplay:
    return replay_block_pool(_trace, capacity, concurrency)



@dataclass(frozen=True)
class TraceInput:
    """The trace shown and the keys its cached results go under (its digest, block size and tokenizer)."""

    trace: WorkloadTrace
    digest: str
    block_size: int | None
    model_name: str

    @property
    def key(self) -> tuple[str, int | None, str]:
        return self.digest, self.block_size, self.model_name


@dataclass(frozen=True)
class ModelChoice:
    """The model and marks the curve is drawn with: bytes per token (None: none chosen), TTL, marks, budget."""

    bpt: Fraction | None
    model_label: str
    dtype: str
    ttl: int
    marks: list[int]
    budget: float


def trace_input() -> TraceInput:
    """The source radio, the upload (refused in words when too large or malformed) and the read trace."""
    c = st.columns([2, 3, 1])
    source = c[0].radio(T.SOURCE, list(T.SOURCE_OPTIONS), format_func=T.SOURCE_OPTIONS.get, key="wl_source")
    data: bytes | None = None
    if source == "upload":
        upload = c[1].file_uploader(T.UPLOAD, type=["jsonl", "json", "txt"], key="wl_upload", help=T.UPLOAD_HELP)
        block_input = int(c[2].number_input(T.BLOCK_SIZE, 0, 1 << 20, 0, key="wl_block", help=T.BLOCK_SIZE_HELP))
        c[1].caption(T.UPLOAD_LIMIT.format(limit=ui.loc(f"{TRACE_LIMIT_MB:,}")))
        if upload is None:
            st.info(T.UPLOAD_WAITING, icon=":material/upload_file:")
            st.stop()
        refusal = T.upload_refusal(md(upload.name), upload.size, TRACE_LIMIT_MB)
        if refusal:  # nothing of it, and nothing of the previous trace, is shown
            st.error(refusal, icon=":material/error:")
            st.stop()
        data = upload.getvalue()
    else:
        block_input = 0
        data = EXAMPLE_PATH.read_bytes()
    block_size = block_input or None
    digest = hashlib.sha256(data).hexdigest()
    model_name = ui.selected_model_name()
    bar = st.empty()  # lines read, rate and ETA while a trace is read (its first time: then it is cached)
    try:
        with st.spinner(T.TOKENIZING):
            trace, bad_lines = _trace(digest, block_size, model_name, data, lambda p: _show_progress(bar, p))
    except WorkloadError as exc:
        bar.empty()
        st.error(T.BAD_TRACE.format(error=T.trace_error(exc)), icon=":material/error:")
        st.stop()
    bar.empty()
    if bad_lines.count:
        st.warning(T.BAD_LINES.format(count=bad_lines.count, shown=len(bad_lines.errors))
                   + "".join(f"\n- {T.trace_error(e)}" for e in bad_lines.errors), icon=":material/warning:")
    if source == "upload":  # a file the browser refused leaves the last one here: say whose numbers these are
        c[1].caption(T.TRACE_SHOWN.format(name=md(upload.name), size=ui.loc(format_bytes(upload.size))))
    if source == "example":
        first, last = trace.requests[0].timestamp_ms or 0, trace.requests[-1].timestamp_ms or 0
        c[1].caption(T.EXAMPLE_NOTE.format(requests=trace.num_requests, minutes=(last - first) / 60000))
    return TraceInput(trace, digest, block_size, model_name)


def model_choice(trace: WorkloadTrace) -> ModelChoice:
    """The model (a preset or a config.json), dtype, TTL, capacity marks and a memory budget."""
    c = st.columns([3, 1, 1])
    model_options = [p.key for p in PRESETS] + [CONFIG_OPTION]
    labels = {p.key: tr(p.label) for p in PRESETS} | {CONFIG_OPTION: T.CONFIG_UPLOAD}
    model_key = c[0].selectbox(T.MODEL, model_options, index=model_options.index("llama-3-8b"),
                               format_func=labels.get, key="wl_model", help=T.MODEL_HELP)
    dtype = c[1].selectbox(T.DTYPE, list(kvsize.DTYPES), index=list(kvsize.DTYPES).index("fp16"), key="wl_dtype")
    ttl_choice = c[2].selectbox(T.TTL, list(T.TTL_OPTIONS), format_func=T.TTL_OPTIONS.get, key="wl_ttl",
                                disabled=not trace.has_timestamps,
                                help=None if trace.has_timestamps else T.TTL_NO_TIMESTAMPS)
    ttl = int(ttl_choice) if trace.has_timestamps else 0
    c = st.columns([2, 1])
    marks_text = c[0].text_input(T.MARKS, "", key="wl_marks", help=T.MARKS_HELP, placeholder="256, 1024")
    budget = c[1].number_input(T.BUDGET, 0.0, 100_000.0, 0.0, step=1.0, key="wl_budget", help=T.BUDGET_HELP)

    bpt: Fraction | None = None
    model_label = ""
    try:
        if model_key == CONFIG_OPTION:
            cfg = st.file_uploader(T.CONFIG_UPLOAD, type=["json"], key="wl_config")
            if cfg is not None:
                parsed = parse_config_text(cfg.getvalue(), cfg.name)
                bpt, model_label = kv_formula.bytes_per_token(parsed.shape, dtype), parsed.shape.name
        else:
            preset = get_preset(model_key)
            bpt, model_label = kv_formula.bytes_per_token(preset.shape(), dtype), tr(preset.label)
    except KVSizeError as exc:
        st.error(T.BAD_CONFIG.format(error=TC.size_error(exc)), icon=":material/error:")
    marks: list[int] = []
    try:
        marks = parse_capacities(marks_text) if marks_text.strip() else []
    except ValueError as exc:
        st.error(T.BAD_MARKS.format(error=exc), icon=":material/error:")
    return ModelChoice(bpt, model_label, dtype, ttl, marks, budget)


def capacity_grid(trace: WorkloadTrace) -> tuple[list[int], int]:
    """The curve's capacity grid and the capacity chosen on the timeline slider (kept in its widget key)."""
    grid = log_grid(max(trace.num_blocks, 1), GRID_POINTS)
    default_cap = grid[len(grid) // 2] if grid else 1
    if st.session_state.get(CAP_KEY) not in grid:
        st.session_state[CAP_KEY] = default_cap
    return grid, int(st.session_state[CAP_KEY])


def profile_of(t: TraceInput, ttl: int) -> WorkloadProfile:
    return _profile(*t.key, ttl, t.trace)


def headline(profile: WorkloadProfile) -> None:
    c = st.columns(3)
    c[0].metric(T.M_REQUESTS, ui.fmt_count(profile.num_requests))
    c[1].metric(T.M_TOKENS, ui.fmt_count(profile.input_tokens), help=ui.loc(f"{profile.input_tokens:,}"))
    c[2].metric(T.M_BLOCKS, ui.fmt_count(profile.unique_blocks),
                help=T.M_BLOCKS_HELP.format(touched=profile.num_block_accesses))
    c = st.columns(3)
    c[0].metric(T.M_INFINITE, ui.loc(f"{profile.hit_rate_infinite:.1%}"), help=T.M_INFINITE_HELP)
    c50, c90 = profile.capacity_for(0.5), profile.capacity_for(0.9)
    c[1].metric(T.M_NEED, T.M_NEED_VALUE.format(c50=c50, c90=c90), help=T.M_NEED_HELP)


def curve_section(profile: WorkloadProfile, grid: list[int], m: ModelChoice, bs: int) -> None:
    """The hit rate at every capacity, with the marks, the budget and the 50 % / 90 % needs."""
    c50, c90 = profile.capacity_for(0.5), profile.capacity_for(0.9)
    infinite_rate = profile.hit_rate_infinite
    st.subheader(T.CURVE_HEADER)
    units = ["blocks", "tokens"] + (["bytes"] if m.bpt is not None else [])
    unit = st.radio(T.AXIS_UNIT, units, format_func=T.AXIS_UNITS.get, horizontal=True, key="wl_unit")
    mark_caps = list(m.marks)
    budget_cap = None
    if m.budget > 0 and m.bpt is not None:
        budget_cap = budget_blocks(m.bpt, gib_bytes(m.budget), bs).usable_blocks  # the null block left out
        if budget_cap >= 1:
            mark_caps.append(budget_cap)
    points = curve(profile, sorted(set(grid + mark_caps + [c for c in (c50, c90) if c > 0])), m.bpt)
    by_cap = {p.capacity_blocks: p for p in points}
    mark_pairs = [(ui.loc(f"{mk:,}"), by_cap[mk]) for mk in m.marks]
    if budget_cap is not None and budget_cap >= 1:
        mark_pairs.append((T.CURVE_BUDGET.format(gib=m.budget), by_cap[budget_cap]))
    needs = [(pct, by_cap[cap]) for pct, cap in ((50, c50), (90, c90)) if cap > 0]
    ui_chart.plotly_chart(F.curve_figure(points, infinite_rate, unit, mark_pairs, needs,
                                         T.TTL_OPTIONS[m.ttl] if m.ttl else None), width="stretch")
    model_note = ""
    if m.bpt is not None:
        model_note = T.CURVE_MODEL_NOTE.format(name=m.model_label, dtype=m.dtype, bpt=ui.loc(format_bytes(m.bpt)),
                                               block=ui.loc(format_bytes(m.bpt * bs)), bs=bs)
    st.caption(T.CURVE_CAPTION.format(requests=profile.num_requests, model_note=model_note))


def timeline_section(t: TraceInput, profile: WorkloadProfile, grid: list[int], capacity: int) -> None:
    """The hit rate over the trace at the slider's capacity, against an infinite cache."""
    st.subheader(T.TIMELINE_HEADER)
    st.select_slider(T.TIMELINE_CAPACITY, grid, key=CAP_KEY, format_func=lambda v: ui.loc(f"{v:,}"))
    xs, lru_rates, inf_rates, by_time = timeline(t.trace, _replay(*t.key, capacity, t.trace), profile.tracked[0])
    ui_chart.plotly_chart(F.timeline_figure(xs, lru_rates, inf_rates, capacity,
                                            T.TIMELINE_X_TIME if by_time else T.TIMELINE_X_INDEX), width="stretch")
    st.caption(T.TIMELINE_CAPTION)


def pool_section(t: TraceInput, profile: WorkloadProfile, capacity: int) -> float:
    """vLLM's block pool at one capacity and concurrency against plain LRU; the LRU hit rate."""
    st.subheader(T.POOL_HEADER)
    c = st.columns([2, 3])
    concurrency = int(c[0].slider(T.POOL_CONCURRENCY, 1, 64, 1, key="wl_concurrency", help=T.POOL_CONCURRENCY_HELP))
    pool = _pool(*t.key, capacity, concurrency, t.trace)
    lru_rate = profile.hit_rate(capacity)
    ui_chart.plotly_chart(F.pool_figure(lru_rate, pool.hit_rate, profile.hit_rate_infinite), width="stretch")
    diff = (pool.hit_rate - lru_rate) * 100
    explain = T.POOL_EXPLAIN.format(cap=capacity, lru=lru_rate, pool=pool.hit_rate, diff=diff,
                                    partial=pool.uncached_partial_blocks, waited=pool.waited,
                                    refused=T.POOL_REFUSED.format(n=pool.refused) if pool.refused else "")
    if abs(diff) < 0.1:
        explain += " " + T.POOL_SAME
    st.markdown(explain)
    return lru_rate


def distances_section(trace: WorkloadTrace, profile: WorkloadProfile) -> None:
    """Reuse distances and the most shared prefixes."""
    st.subheader(T.HIST_HEADER)
    ui_chart.plotly_chart(F.histogram_figure(distance_histogram(profile)), width="stretch")
    st.caption(T.HIST_CAPTION.format(cold=profile.cold_accesses, total=profile.num_block_accesses))
    st.subheader(T.PREFIX_HEADER)
    nodes = top_prefixes(trace, profile, k=40)
    if nodes:
        ui_chart.plotly_chart(F.prefix_tree_figure(nodes), width="stretch")
        st.caption(T.PREFIX_CAPTION)
    else:
        st.info(T.PREFIX_NONE)


def stats_section(trace: WorkloadTrace, profile: WorkloadProfile, bpt: Fraction | None) -> None:
    """The trace's statistics and the whole report as JSON (what ``python -m kvviz workload --json`` prints)."""
    st.subheader(T.STATS_HEADER)
    stats = trace_stats(trace, profile)
    rows = [(T.STATS_ROWS[k], ", ".join(v) if isinstance(v, list) else (ui.loc(f"{v:,}") if isinstance(v, (int, float)) else "—"))
            for k, v in stats.items() if k in T.STATS_ROWS]
    st.dataframe(pd.DataFrame(rows, columns=[T.STATS_NAME, T.STATS_VALUE]), hide_index=True, width="stretch")
    full = report(trace, profile, None, bpt)
    st.download_button(T.DOWNLOAD, json.dumps(full, indent=1), file_name="workload.json", mime="application/json",
                       key="wl_download")
