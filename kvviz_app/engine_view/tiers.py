"""The Engine (live) page's two-tier section: the device pool and host memory side by side, prompt tokens
by source per recent request, a block's journey in numbers, and a predict-then-reveal question answered
from the measured requests. UI only: the numbers are ``kvviz.engine.snapshot.TierView``."""

from __future__ import annotations

import streamlit as st

from kvviz.engine.snapshot import RequestHits, TierView
from kvviz_app.engine_view import figures as F
from kvviz_app.shell import ui_chart, ui_present
from kvviz_app.shell.i18n import texts

T = texts("engine_view")
S = texts("share")


def tiers_section(t: TierView | None) -> None:
    """The section; one line on how to turn the host tier on when the engine has none."""
    st.subheader(T.TIERS_HEADER)
    if t is None:
        st.info(T.TIERS_OFF, icon=":material/info:")
        return
    policy = t.policy.upper()  # vLLM's names, LRU or ARC, in every language
    st.markdown(T.TIERS_INTRO.format(host=t.host_blocks, mib=t.host_bytes / 2**20, policy=policy))
    if t.both_on_host:
        st.caption(T.TIERS_CPU_ONLY)
    ui_chart.plotly_chart(F.tiers_bars(t), width="stretch", key="engine_tiers")
    st.caption(T.TIERS_COUNTS.format(dheld=t.device_held, dblocks=t.device_blocks, dfree=t.device_free,
                                     dcached=t.device_cached, in_host=t.cached_in_host, hheld=t.host_held,
                                     hblocks=t.host_blocks, hfree=t.host_free))
    if not _predict(t):
        return
    st.markdown(f"**{T.JOURNEY_HEADER}**")
    st.markdown(T.JOURNEY.format(computed=t.computed, stored=t.stored, evicted=t.evicted, loaded=t.loaded,
                                 dropped=t.dropped, skipped=t.skipped, policy=policy))
    st.caption(T.JOURNEY_NOTE)
    st.markdown(f"**{T.HITS_HEADER}**")
    if not t.recent:
        st.info(T.HITS_NONE, icon=":material/info:")
        return
    ui_chart.plotly_chart(F.hits_by_source(t.recent), width="stretch", key="engine_hits")


def _evidence(t: TierView) -> RequestHits | None:
    """The newest request whose prefix came back from host memory (its device copy was gone)."""
    return next((r for r in t.recent if r.host > 0), None)


def _predict(t: TierView) -> bool:
    """Ask before the numbers; reveal from the newest request copied back from host memory. False while
    the learner has not revealed yet (the journey and the hits stay hidden)."""
    if not ui_present.predict_toggle("engine_view"):
        return True
    ss = st.session_state
    with st.container(border=True):
        st.markdown(f"**{S.PREDICT_HEADER}**")
        if "_predict_engine_tier" not in ss:
            with st.form("predict_engine_tier"):
                guess = st.radio(T.PREDICT_QUESTION, (T.PREDICT_YES, T.PREDICT_NO), key="predict_engine_guess")
                if st.form_submit_button(S.PREDICT_REVEAL, type="primary", key="predict_engine_reveal"):
                    ss["_predict_engine_tier"] = guess
        if "_predict_engine_tier" not in ss:
            st.info(S.PREDICT_WAITING, icon=":material/psychology:")
            return False
        guess, r = ss["_predict_engine_tier"], _evidence(t)
        if r is None:
            st.info(T.PREDICT_NOT_YET, icon=":material/hourglass_empty:")
            return True
        answer = T.PREDICT_ANSWER_NO.format(id=r.request_id, host=r.host, prompt=r.prompt, device=r.device,
                                            computed=r.computed)
        if guess == T.PREDICT_NO:
            st.success(S.PREDICT_RIGHT.format(answer=answer), icon=":material/check_circle:")
        else:
            st.warning(S.PREDICT_WRONG.format(guess=guess, answer=answer), icon=":material/lightbulb:")
    return True
