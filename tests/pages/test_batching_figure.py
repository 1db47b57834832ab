"""The batching timeline figure: one bar per engine step, each request split into read / computed / padding."""

from __future__ import annotations

from kvviz.engine import StepItem, StepRecord
from kvviz_app.batching.figures import padding_tokens, step_timeline
from kvviz_app.shell.i18n import texts

T = texts("batching")


def _step(n: int, ms: float, *items) -> StepRecord:
    its = tuple(StepItem(rid, "", kind, start, tokens, 0) for rid, kind, start, tokens in items)
    decode = sum(i.num_tokens for i in its if i.kind == "decode")
    return StepRecord(n, sum(i.num_tokens for i in its) - decode, decode, len(its), (), ms / 1000, 1.0, its)


def test_engine_steps_are_split_by_what_each_request_computed():
    steps = [_step(7, 90.0, ("burst-me-0", "scratch", 0, 40)),
             _step(8, 200.0, ("burst-me-1", "cached", 48, 9), ("other", "decode", 300, 1), ("burst-me-0", "scratch", 40, 12))]
    fig = step_timeline(steps, mine="burst-me-")
    by_name = {t.name: t for t in fig.data if t.name}
    assert list(by_name[T.FIG_REUSED].x) == [48, 300, 40]
    assert list(by_name[T.FIG_REUSED].base) == [0, 48 + 9 + 3, 48 + 9 + 3 + 300 + 1 + 11]
    assert list(by_name[T.FIG_SCRATCH].x) == [40, 12] and list(by_name[T.FIG_CACHED].x) == [9]
    assert list(by_name[T.FIG_DECODE].x) == [1] and list(by_name[T.FIG_DECODE].marker.line.width) == [0]
    assert list(by_name[T.FIG_CACHED].marker.line.width) == [1.5]  # the burst's own requests are outlined
    assert list(by_name[T.FIG_PADDING].x) == [3, 11] and padding_tokens(steps[1]) == 3 + 11
    times = [t for t in fig.data if t.name == T.FIG_TIME_TITLE][0]
    assert list(times.x) == [90.0, 200.0]
    assert list(fig.layout.yaxis.categoryarray) == [T.FIG_STEP_LABEL.format(id=7, n=1),
                                                     T.FIG_STEP_LABEL.format(id=8, n=3)]


def test_the_legend_speaks_the_language_of_the_session_drawing_it():
    """The kinds' legend names are read when a figure is drawn, not when the module is imported (an English
    session imported it first here)."""
    from kvviz_app.shell.i18n import use_lang

    steps = [_step(1, 120.0, ("a", "scratch", 0, 40), ("b", "cached", 512, 16), ("c", "decode", 300, 1))]
    english = {t.name for t in step_timeline(steps).data if t.name}
    with use_lang("ru"):
        russian = {t.name for t in step_timeline(steps).data if t.name}
        expected = {T.FIG_SCRATCH, T.FIG_CACHED, T.FIG_DECODE, T.FIG_REUSED, T.FIG_PADDING}
    assert expected <= russian and not (russian & english), (russian, english)
