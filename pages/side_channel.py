"""The timing side channel, measured on the real model: cached vs uncached probe latencies with salts off
and on, and the attacker game, each probe timed alone on the engine. UI only: every number comes from
kvviz.experiments.security.side_channel and kvviz.experiments.security.attacker."""

from __future__ import annotations

import time
from collections.abc import Callable

import pandas as pd
import streamlit as st

from kvviz.experiments.security.attacker import attacker_game
from kvviz.experiments.security.exclusive import latest_result, run_exclusive
from kvviz.experiments.security.side_channel import measure_side_channel
from kvviz.model.settings import InputError
from kvviz.util.blank import is_blank
from kvviz_app.security import figures as F
from kvviz_app.security.room_labels import age_label
from kvviz_app.shell import ui, ui_chart, ui_present
from kvviz_app.shell.i18n import texts

T = texts("security")

ui.page_header(T.SC_TITLE, T.SC_INTRO)
ui.get_model()  # the sidebar's model status; the probes run on the process-wide engine (the embedded model)


def _progress_bar(label: str, total_steps: int):
    bar = st.progress(0.0, text=label.format(done=0, total=total_steps))
    state = {"base": 0}

    def report(done: int, total: int) -> None:
        step = state["base"] + done
        bar.progress(min(step / total_steps, 1.0), text=label.format(done=step, total=total_steps))
        if done == total:
            state["base"] += total

    return bar, report


def _latest_results(name: str, empty_text: str, model_s: Callable[[list], float]) -> list | None:
    """The latest shared results of experiment ``name`` with their age caption (``model_s``: their model
    time), or an info box and None."""
    latest = latest_result(name)
    if latest is None:
        st.info(empty_text, icon=":material/info:")
        return None
    finished, results = latest
    st.caption(T.SC_LATEST.format(ago=age_label(time.time() - finished), secs=model_s(results)))
    return results


# ----------------------------------------------------------------------------- the measurement
st.subheader(T.SC_SETUP)
c = st.columns([1, 1, 1])
trials = c[0].slider(T.SC_TRIALS, 3, 40, 10, key="sc_trials", help=T.SC_TRIALS_HELP)
blocks = c[1].select_slider(T.SC_BLOCKS, [1, 2, 4, 8, 16, 32, 64], value=4, key="sc_blocks", help=T.SC_BLOCKS_HELP)
st.caption(T.SC_HOW.format(blocks=blocks))
if c[2].button(T.SC_RUN, key="sc_run", type="primary", icon=":material/timer:"):
    bar, report = _progress_bar(T.SC_RUNNING, 2 * trials)

    def _measure() -> list:
        return [measure_side_channel(trials=trials, prefix_blocks=blocks, salted=salted, progress=report)
                for salted in (False, True)]

    try:
        if run_exclusive("side_channel", _measure) is None:
            st.warning(T.SC_BUSY, icon=":material/hourglass_top:")
    except InputError as exc:
        ui.show_error(exc)
    bar.empty()

# model time: the engine compute of its prefills, not its length (which includes waits for a quiet engine)
results = _latest_results("side_channel", T.SC_NO_RESULTS, lambda rs: sum(r.compute_s for r in rs))
if results is not None:
    ui_chart.plotly_chart(F.timing_figure(results), width="stretch", key="sc_violin")
    for r in results:
        st.markdown(f"**{T.SALT_ON if r.salted else T.SALT_OFF}**")
        c = st.columns(4)
        for col, label, group, ms in ((c[0], T.M_MEDIAN_CACHED, "cached", r.cached_median_ms),
                                      (c[1], T.M_MEDIAN_UNCACHED, "uncached", r.uncached_median_ms)):
            lo, hi = r.spread_ms(group)
            col.metric(label, T.MS_VALUE.format(ms=ms),
                       help=T.M_MEDIAN_HELP.format(lo=lo, hi=hi, n=len(r.latencies(group))))
        c[2].metric(T.M_RATIO, T.M_RATIO_VALUE.format(ratio=r.ratio), help=T.M_RATIO_HELP)
        c[3].metric(T.M_AUC, ui.loc(f"{r.auc:.2f}"), help=T.M_AUC_HELP.format(acc=r.threshold_accuracy))
        salt = T.SALT_ON if r.salted else T.SALT_OFF
        st.caption((T.SC_WITHIN_NOISE if r.within_noise else T.SC_CLEAR).format(salt=salt))
    r0 = results[0]
    st.caption(T.TRIALS_NOTE.format(trials=r0.trials, n=sum(len(r.probes) for r in results),
                                    device=f"{r0.device}, {r0.dtype}", probe_tokens=r0.probe_tokens,
                                    reused=r0.reused_tokens_on_hit,
                                    waited=max((p.waited_ms for r in results for p in r.probes), default=0.0)))
    st.caption(T.SALT_NOTE.format(probe_tokens=r0.probe_tokens))

# ----------------------------------------------------------------------------- the attacker game
st.subheader(T.GAME)
st.markdown(T.GAME_INTRO)
template = st.text_area(T.GAME_TEMPLATE_LABEL, T.GAME_TEMPLATE_DEFAULT, key="sc_template", height=100)
c = st.columns([3, 1, 1])
candidates_text = c[0].text_input(T.GAME_CANDIDATES_LABEL, T.GAME_CANDIDATES_DEFAULT, key="sc_candidates")
rounds = c[1].slider(T.GAME_ROUNDS, 2, 20, 6, key="sc_rounds")
candidates = [x.strip() for x in candidates_text.split(",") if not is_blank(x)]
if c[2].button(T.GAME_RUN, key="sc_play", type="primary", icon=":material/sports_esports:"):
    bar, report = _progress_bar(T.GAME_RUNNING, 2 * rounds)

    def _play() -> list:
        return [attacker_game(rounds=rounds, salted=salted, template=template, candidates=candidates,
                              progress=report) for salted in (False, True)]

    try:
        if run_exclusive("game", _play) is None:
            st.warning(T.SC_BUSY, icon=":material/hourglass_top:")
    except InputError as exc:
        st.error(T.GAME_BAD.format(error=ui.error_text(exc)), icon=":material/error:")
    bar.empty()

games = _latest_results("game", T.GAME_NO_RESULTS, lambda gs: sum(g.seconds for g in gs))
if games is not None:
    c = st.columns(len(games) + 1)
    for col, g in zip(c, games, strict=False):
        col.metric(f"{T.M_GAME_ACC}, {T.SALT_ON if g.salted else T.SALT_OFF}",
                   T.M_GAME_ACC_VALUE.format(correct=g.correct, rounds=len(g.rounds), acc=g.accuracy),
                   help=T.M_GAME_ACC_HELP.format(n=len(g.candidates), chance=g.chance))
    left, right = st.columns([1, 2])
    ui_chart.plotly_chart(F.game_accuracy_figure(games), width="stretch", key="sc_game_acc", where=left)
    ui_chart.plotly_chart(F.game_figure(games), width="stretch", key="sc_game_rounds", where=right)
    cols = T.GAME_COLUMNS
    rows = []
    for g in games:
        for rnd in g.rounds:
            rows.append({
                cols["round"]: rnd.round + 1, cols["salts"]: T.SALT_ON if g.salted else T.SALT_OFF,
                cols["secret"]: g.candidates[rnd.secret], cols["guess"]: g.candidates[rnd.guess],
                cols["correct"]: T.YES if rnd.correct else T.NO, cols["rank"]: rnd.secret_rank,
                cols["secret_ms"]: round(rnd.latencies_ms[rnd.secret], 1),
                cols["others_ms"]: round(rnd.others_median_ms, 1),
            })
    with st.expander(T.BLOCK_TABLE):
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")

st.subheader(T.DEFENCES)
st.markdown(T.DEFENCES_TEXT)
ui_present.next_link("pages/side_channel.py")
