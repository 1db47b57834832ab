"""The side-channel page's parts (pages/side_channel.py): the measurement and the attacker game run once at a
time on the engine with a progress bar, and their latest shared results drawn. Views only: every number comes
from kvviz.experiments.security.side_channel and kvviz.experiments.security.attacker."""

from __future__ import annotations

import time
from collections.abc import Callable

import pandas as pd
import streamlit as st

from kvviz.experiments.security.attacker import attacker_game
from kvviz.experiments.security.exclusive import latest_result, run_exclusive
from kvviz.experiments.security.side_channel import measure_side_channel
from kvviz.model.settings import InputError
from kvviz_app.security import figures as F
from kvviz_app.security.room_labels import age_label
from kvviz_app.shell import ui, ui_chart
from kvviz_app.shell.i18n import texts

T = texts("security")


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


def measure(trials: int, blocks: int) -> None:
    """Times ``trials`` cached and uncached probes of ``blocks`` blocks, salts off then on (one run at a time)."""
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


def measurement() -> None:
    """The latest measurement: the latencies' figure, per salt setting its medians, ratio and AUC, and its notes."""
    # model time: the engine compute of its prefills, not its length (which includes waits for a quiet engine)
    results = _latest_results("side_channel", T.SC_NO_RESULTS, lambda rs: sum(r.compute_s for r in rs))
    if results is None:
        return
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


def play(rounds: int, template: str, candidates: list[str]) -> None:
    """Plays ``rounds`` rounds of the attacker's guess, salts off then on (one run at a time); a bad template or
    candidate list is one error line."""
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


def games() -> None:
    """The latest game: accuracy per salt setting, its two figures and every round in a table."""
    played = _latest_results("game", T.GAME_NO_RESULTS, lambda gs: sum(g.seconds for g in gs))
    if played is None:
        return
    c = st.columns(len(played) + 1)
    for col, g in zip(c, played, strict=False):
        col.metric(f"{T.M_GAME_ACC}, {T.SALT_ON if g.salted else T.SALT_OFF}",
                   T.M_GAME_ACC_VALUE.format(correct=g.correct, rounds=len(g.rounds), acc=g.accuracy),
                   help=T.M_GAME_ACC_HELP.format(n=len(g.candidates), chance=g.chance))
    # one under the other, full width: side by side (a third, two thirds) their titles and labels were cut at 1024 px
    ui_chart.plotly_chart(F.game_accuracy_figure(played), width="stretch", key="sc_game_acc")
    ui_chart.plotly_chart(F.game_figure(played), width="stretch", key="sc_game_rounds")
    cols = T.GAME_COLUMNS
    rows = []
    for g in played:
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
