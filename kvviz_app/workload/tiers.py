"""The "Your traffic" page's second-tier section: hit rate by source (device, host) against the device
capacity for a few host sizes, and the host tier's load bandwidth.
UI only: every number comes from kvviz.analysis.workload.tiers (exact, one host replay per host size)."""

from __future__ import annotations

from fractions import Fraction

import streamlit as st

from kvviz.analysis.workload.columns import as_columns
from kvviz.analysis.workload.tiers import two_tier_grid
from kvviz.analysis.workload.trace import WorkloadTrace
from kvviz.mirror.host_arc import EVICTION_POLICIES
from kvviz.util.units import format_bytes
from kvviz_app.shell import ui, ui_chart
from kvviz_app.shell.i18n import texts
from kvviz_app.workload import figures as F

T = texts("workload")

DEVICE_POINTS = 8
HOST_SHARES = (16, 4, 1)
"""Offered host sizes: the trace's distinct blocks over these (and the device capacity chosen above)."""


@st.cache_resource(show_spinner=False, max_entries=8)
def _grid(digest: str, block_size: int | None, model: str, devices: tuple[int, ...], hosts: tuple[int, ...],
          policy: str, _trace: WorkloadTrace) -> tuple[list[dict], float | None]:
    grid = two_tier_grid(as_columns(_trace), list(devices), list(hosts), policy)
    return grid.rows(1.0), grid.duration_s  # bytes a second per byte of a block: scaled by the model below


def host_options(unique_blocks: int, capacity: int) -> list[int]:
    """Host sizes to offer: fractions of the trace's distinct blocks, and the chosen device capacity."""
    return sorted({max(1, unique_blocks // s) for s in HOST_SHARES} | {capacity})


def tiers_section(key: tuple[str, int | None, str], trace: WorkloadTrace, grid: list[int], capacity: int,
                  bpt: Fraction | None) -> None:
    st.subheader(T.TIER_HEADER)
    options = host_options(max(trace.num_blocks, 1), capacity)
    default = [options[0], options[-1]] if len(options) > 1 else options
    c = st.columns([3, 1], vertical_alignment="bottom")
    hosts = c[0].multiselect(T.TIER_HOSTS, options, default=default, key="wl_hosts", help=T.TIER_HOSTS_HELP,
                             format_func=lambda v: ui.loc(f"{v:,}"))
    policy = c[1].selectbox(T.TIER_POLICY, EVICTION_POLICIES, key="wl_host_policy", help=T.TIER_POLICY_HELP,
                            format_func=T.TIER_POLICY_NAMES.get)
    step = max(1, len(grid) // (DEVICE_POINTS - 1))
    devices = tuple(sorted(set(grid[::step] + grid[-1:])))
    hosts_all = tuple(sorted({0, *hosts}))
    rows, duration = _grid(*key, devices, hosts_all, policy, trace)
    ui_chart.plotly_chart(F.tier_figure(rows, list(hosts_all)), width="stretch")
    per_block = float(bpt * trace.block_size) if bpt is not None else None
    per_second = per_block is not None and duration is not None
    if hosts:
        shown = [dict(r, load_bytes_per_s=(r["load_bytes_per_s"] or 0) * per_block) if per_second else r
                 for r in rows]
        ui_chart.plotly_chart(F.tier_load_figure(shown, list(hosts_all), per_second), width="stretch")
    note = T.TIER_LOAD_NOTE_BLOCKS
    if per_second:
        note = T.TIER_LOAD_NOTE.format(block=ui.loc(format_bytes(per_block)), seconds=ui.loc(f"{duration:,.0f}"))
    st.caption(T.TIER_CAPTION.format(load_note=note))
