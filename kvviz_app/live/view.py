"""The Live engine page's live part (pages/live.py), redrawn every 2 s as one fragment: the
subscriber's numbers, rates, prefix trees, latest stores and the engine's own hit rate. Views only: the
numbers come from kvviz.fleet (read_view, hit_rate)."""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from kvviz.fleet import demo as D
from kvviz.fleet.engine_http import EngineHTTPError, hit_rate, scrape_metrics
from kvviz.fleet.engine_model import hash_label
from kvviz.fleet.subscriber import LiveConfig, read_view
from kvviz.mirror.hashing import REFERENCE_RELEASE
from kvviz_app.live import figures as F
from kvviz_app.shell import ui, ui_chart
from kvviz_app.shell.i18n import texts

T = texts("live")

K_DECODE, K_METRICS, K_SCRAPES = "lv_decode", "lv_metrics", "lv_scrapes"  # session keys this view reads
RATE_WINDOW_S = 10
MAX_SCRAPES = 300


@st.cache_resource(show_spinner=False)
def _decoder():
    from kvviz.model.loader import load_tokenizer

    return load_tokenizer()



def _scrape(url: str) -> None:
    scrapes = st.session_state.setdefault(K_SCRAPES, [])
    try:
        scrapes.append((time.time(), scrape_metrics(url)))
        del scrapes[:-MAX_SCRAPES]
    except EngineHTTPError as exc:
        st.warning(T.METRICS_ERROR.format(error=exc), icon=":material/warning:")
    if len(scrapes) >= 2:
        st.markdown(f"**{T.HIT_HEADER}**")
        points = [(b[0], r) for a, b in zip(scrapes, scrapes[1:], strict=False)
                  if (r := hit_rate(a[1], b[1])) is not None]
        (_, before), (_, after) = scrapes[-2], scrapes[-1]
        rate = hit_rate(before, after)
        st.caption(T.HIT_NONE if rate is None else T.HIT_NOW.format(
            rate=rate, queries=after.queries - before.queries, hits=after.hits, total=after.queries))
        if points:
            ui_chart.plotly_chart(F.hit_rate_figure(points, T.HIT_TITLE, T.X_SECONDS, T.HIT_Y), width="stretch",
                                  key="lv_hit")


def live_numbers(sub, config: LiveConfig) -> None:
    """The subscriber's state now, with the demo's published count read in the same pass as its metrics."""
    view = read_view(sub)
    s = view.summary
    st.caption(T.STATUS[view.status].format(endpoint=config.endpoint, error=view.last_error or ""))
    recent = view.samples[-RATE_WINDOW_S:]
    rate = sum(x.stored + x.removed + x.cleared for x in recent) / len(recent) if recent else 0.0
    media = view.media
    if (demo := D.running_demo(config.endpoint)) is not None:  # read with the metrics, so they agree
        st.caption(T.DEMO_PUBLISHED.format(n=demo.seq))
    cols = st.columns(4)
    cols[0].metric(T.M_STATUS, T.STATUS_WORD[view.status])
    cols[1].metric(T.M_BATCHES, ui.loc(f"{s['batches']:,}"), help=T.M_BATCHES_HELP)
    cols[2].metric(T.M_RATE, ui.loc(f"{rate:,.1f}"), help=T.M_RATE_HELP.format(n=len(recent)))
    cols[3].metric(T.M_BLOCKS, ui.loc(f"{s['cached_blocks']:,}"), help=T.M_BLOCKS_HELP)
    cols = st.columns(4)
    cols[0].metric(T.M_TOKENS, ui.loc(f"{s['stored_tokens']:,}"), help=T.M_TOKENS_HELP)
    cols[1].metric(T.M_MEDIA, ui.loc(f"{media.get('GPU', 0):,} / {media.get('CPU', 0):,}"), help=T.M_MEDIA_HELP)
    cols[2].metric(T.M_REPLAYED, ui.loc(f"{s['replayed']:,}"), help=T.M_REPLAYED_HELP)
    cols[3].metric(T.M_MISSED, ui.loc(f"{s['missed']:,} / {s['decode_errors']:,}"), help=f"{T.M_MISSED_HELP} {T.M_ERRORS_HELP}")
    if view.overflow:
        st.warning(T.OVERFLOW.format(cap=view.max_blocks, overflow=view.overflow), icon=":material/warning:")
    if view.unknown_kinds or view.unknown_fields:
        st.caption(T.SKIPPED.format(kinds=view.unknown_kinds, fields=view.unknown_fields))
    if not s["batches"]:
        st.info(T.NO_EVENTS_YET, icon=":material/hourglass_empty:")
    elif view.samples:
        left, right = st.columns(2)
        ui_chart.plotly_chart(F.events_rate_figure(view.samples, T.RATE_TITLE, T.RATE_LABELS, T.X_SECONDS, T.Y_EVENTS),
                              width="stretch", key="lv_rate", where=left)
        ui_chart.plotly_chart(F.blocks_held_figure(view.samples, T.BLOCKS_TITLE, T.BLOCKS_LABELS, T.X_SECONDS,
                                                   T.Y_BLOCKS), width="stretch", key="lv_blocks", where=right)
    st.markdown(f"**{T.TREES_HEADER}**")
    st.caption(T.TREES_CAPTION)
    if not view.trees:
        st.caption(T.NO_TREES)
    else:
        decode = st.session_state.get(K_DECODE, False)
        rows = [{T.COL_ROOT: hash_label(t.root, 12), T.COL_BLOCKS: t.blocks, T.COL_TOKENS: t.tokens,
                 T.COL_DEPTH: t.depth, T.COL_LEAVES: t.leaves, T.COL_WHERE: ", ".join(t.where) or "—",
                 T.COL_SESSION: t.session_id or "—",
                 T.COL_TEXT: _decoder().decode(list(t.chain_tokens[:400])) if decode
                 else T.COL_TEXT_TOKENS.format(n=len(t.chain_tokens))} for t in view.trees]
        st.table(pd.DataFrame(rows), hide_index=True)  # an HTML table: its 8 columns fit 1024 px (a grid scrolled)
    _stores(view)
    if url := st.session_state.get(K_METRICS, "").strip():
        _scrape(url)


def _stores(view) -> None:
    """vLLM 0.33.0's placement fields: groups and their spec, copies per locality, sessions, latest stores."""
    if not view.recent:
        return
    st.markdown(f"**{T.STORES_HEADER}**")
    groups = "; ".join(T.GROUP_ITEM.format(group=g, kind=k or T.UNSPECIFIED) + (
        T.GROUP_WINDOW.format(window=w) if w else "") for g, (k, w) in sorted(view.groups.items()))
    places = ", ".join(f"{loc or T.UNSPECIFIED}: {ui.loc(f'{n:,}')}" for loc, n in view.localities.items())
    st.caption(T.STORES_CAPTION.format(groups=groups or "—", places=places or "—", release=REFERENCE_RELEASE))
    if view.sessions:
        st.caption(T.SESSIONS_LINE.format(sessions=", ".join(
            f"{T.OTHER_SESSIONS if sid.startswith(chr(0)) else sid}: {ui.loc(f'{n:,}')}" for sid, n in view.sessions)))
    now = time.time()
    rows = [{T.COL_AGO: ui.loc(f"{max(now - r.t, 0.0):,.0f}"), T.COL_FIRST: hash_label(r.first_hash, 12),
             T.COL_BLOCKS: r.blocks, T.COL_PLACE: " · ".join(
                 [r.medium, r.locality or "—", r.ownership or "—"] + ([T.RANK_ITEM.format(rank=r.rank)] if r.rank else [])),
             T.COL_SESSION: r.session_id or "—",
             T.COL_GROUP: f"{r.group_idx}: {r.kv_cache_spec_kind or '—'}", T.COL_LORA: r.lora_name or "—",
             T.COL_EXTRA: _extra_text(r.extra_keys), T.COL_LOOKAHEAD: r.lookahead_tokens}
            for r in reversed(view.recent)]
    st.table(pd.DataFrame(rows), hide_index=True)  # 12 rows at most; an HTML table fits 1024 px (a grid scrolled)


def _extra_text(keys: tuple | None) -> str:
    if not keys:
        return "—"
    return ", ".join(k.hex()[:12] if isinstance(k, bytes) else str(k) for k in keys)[:80]
