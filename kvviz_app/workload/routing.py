"""The "Your traffic" page's replicas-and-routing section: hit rate and load imbalance against the replica
count at the chosen total capacity, and hit rate against the total capacity at the largest count.
UI only: every number comes from kvviz.analysis.workload.routing (and the page's exact profile)."""

from __future__ import annotations

import streamlit as st

from kvviz.analysis.workload.columns import as_columns
from kvviz.analysis.workload.reuse_distance import WorkloadProfile
from kvviz.analysis.workload.routing import POLICIES, route
from kvviz.analysis.workload.trace import WorkloadTrace
from kvviz_app.shell import ui_chart
from kvviz_app.shell.i18n import texts
from kvviz_app.workload import figures as F

T = texts("workload")

CAPACITY_POINTS = 6


@st.cache_resource(show_spinner=False, max_entries=8)
def _routing(digest: str, block_size: int | None, model: str, totals: tuple[int, ...], counts: tuple[int, ...],
             _trace: WorkloadTrace) -> list[dict]:
    """Every policy at each replica count and total capacity, the total split evenly over the replicas."""
    cols = as_columns(_trace)
    return [route(cols, n, max(1, c // n), p).as_dict() for c in totals for n in counts for p in POLICIES]


def capacity_points(grid: list[int], capacity: int) -> tuple[int, ...]:
    """About ``CAPACITY_POINTS`` totals spread over the curve's grid, with the chosen capacity."""
    step = max(1, len(grid) // (CAPACITY_POINTS - 1))
    return tuple(sorted(set(grid[::step] + grid[-1:] + [capacity])))


def routing_section(key: tuple[str, int | None, str], trace: WorkloadTrace, profile: WorkloadProfile,
                    grid: list[int], capacity: int, lru_rate: float) -> None:
    st.subheader(T.ROUTE_HEADER)
    counts = st.multiselect(T.ROUTE_REPLICAS, [1, 2, 4, 8, 16], default=[1, 2, 4, 8], key="wl_replicas",
                            help=T.ROUTE_HELP.format(cap=capacity))
    if not counts:
        return
    counts = sorted(counts)
    rows = _routing(*key, (capacity,), tuple(counts), trace)
    ui_chart.plotly_chart(F.routing_figure(rows, "hit_rate", T.ROUTE_HIT_TITLE, T.CURVE_Y), width="stretch")
    ui_chart.plotly_chart(F.routing_figure(rows, "load_imbalance", T.ROUTE_LOAD_TITLE, T.ROUTE_LOAD_Y),
                          width="stretch")
    st.caption(T.ROUTE_CAPTION.format(one=lru_rate))
    n = counts[-1]
    totals = capacity_points(grid, capacity)
    by_c = _routing(*key, totals, (n,), trace)
    single = [(c, profile.hit_rate(c)) for c in totals]
    ui_chart.plotly_chart(F.routing_capacity_figure(by_c, single, n), width="stretch")
    st.caption(T.ROUTE_CAP_CAPTION)
