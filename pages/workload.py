"""Your traffic: the prefix-cache hit rate a request trace gets at every LRU capacity, the infinite-cache
maximum, TTLs, the block pool at one capacity, a host tier under it, replicas and routing, reuse distances
and shared prefixes. UI only: every number comes from kvviz.analysis.workload; the sections are
kvviz_app.workload.view."""

from __future__ import annotations

import streamlit as st

from kvviz_app.shell import ui
from kvviz_app.shell.i18n import texts
from kvviz_app.workload import view as V
from kvviz_app.workload.routing import routing_section
from kvviz_app.workload.tiers import tiers_section

T = texts("workload")

ui.page_header(T.TITLE, T.INTRO)
with st.expander(T.DEFINITIONS_HEADER, expanded=False):
    st.markdown(T.DEFINITIONS)

t = V.trace_input()
m = V.model_choice(t.trace)
grid, capacity = V.capacity_grid(t.trace)
profile = V.profile_of(t, m.ttl)

V.headline(profile)
V.curve_section(profile, grid, m, t.trace.block_size)
V.timeline_section(t, profile, grid, capacity)
lru_rate = V.pool_section(t, profile, capacity)
tiers_section(t.key, t.trace, grid, capacity, m.bpt)
routing_section(t.key, t.trace, profile, grid, capacity, lru_rate)
V.distances_section(t.trace, profile)
V.stats_section(t.trace, profile, m.bpt)
