"""The batching timeline figure: one bar per pass, each request split into reused / computed / padding."""

from __future__ import annotations

from kvviz.engine import StepItem, StepRecord
from kvviz.model.batching import PassItem, PassRecord
from kvviz_app.figures.batching import padding_tokens, pass_timeline, request_kind, step_timeline
from kvviz_app.i18n import texts

T = texts("batching")


def _item(past: int, new: int, owner: str | None = None) -> PassItem:
    return PassItem("room", owner, past, new, 2.0, False, True)


def test_request_kinds():
    assert request_kind(0, 40) == "scratch"
    assert request_kind(512, 16) == "cached"
    assert request_kind(300, 1) == "decode"


def test_each_request_is_split_and_padding_is_only_what_a_padded_batch_adds():
    passes = [PassRecord(1, 0.0, 120.0, (_item(0, 40),)),
              PassRecord(2, 0.1, 300.0, (_item(512, 16, "me"), _item(0, 40), _item(300, 1)))]
    assert passes[1].padding_tokens == (40 - 16) + (40 - 1) and passes[0].padding_tokens == 0
    fig = pass_timeline(passes, viewer="me")
    by_name = {t.name: t for t in fig.data if t.name}
    reused = by_name[T.FIG_REUSED]
    assert list(reused.x) == [512, 300] and list(reused.base) == [0, 512 + 16 + 24 + 40]
    assert list(by_name[T.FIG_SCRATCH].x) == [40, 40] and list(by_name[T.FIG_DECODE].x) == [1]
    assert list(by_name[T.FIG_PADDING].x) == [24, 39]
    assert list(by_name[T.FIG_CACHED].marker.line.width) == [1.5]  # the viewer's request is outlined
    times = [t for t in fig.data if t.name == T.FIG_TIME_TITLE][0]
    assert list(times.x) == [120.0, 300.0]
    assert list(fig.layout.yaxis.categoryarray) == ["#1 · 1 req", "#2 · 3 req"]


def test_the_legend_speaks_the_language_of_the_session_drawing_it():
    """The kinds' legend names are read when a figure is drawn, not when the module is imported (an English
    session imported it first here)."""
    from kvviz_app.i18n import use_lang

    passes = [PassRecord(1, 0.0, 120.0, (_item(0, 40), _item(512, 16), _item(300, 1)))]
    english = {t.name for t in pass_timeline(passes).data if t.name}
    with use_lang("ru"):
        russian = {t.name for t in pass_timeline(passes).data if t.name}
        expected = {T.FIG_SCRATCH, T.FIG_CACHED, T.FIG_DECODE}
    assert expected <= russian and not (russian & english), (russian, english)


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
