"""The edit page's numbers and sentences agree: no negative saving or speed-up
below 1x when the timings overlap, the sentence about identical prompts follows the reuse metrics, and
an edit past the token limit is named as such instead of "same token sequence"."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from kvviz.analysis.timing_compare import compare_samples
from kvviz.experiments.edit.timing import EditTiming
from kvviz_app.shell.i18n import texts

T = texts("edit")

pytestmark = pytest.mark.model

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "edit.py")


def texts(elements) -> str:
    return " ".join(str(e.value) for e in elements)


def metric(at: AppTest, label: str):
    return next(m for m in at.metric if m.label == label)


def tokens(at: AppTest, label: str) -> int:
    return int(metric(at, label).value.split()[0].replace(",", ""))


@pytest.fixture(scope="module")
def at() -> AppTest:
    app = AppTest.from_file(PAGE, default_timeout=600)
    app.run()
    assert not app.exception, app.exception
    app.radio(key="edit_mode").set_value(T.MODE_FREE).run()
    return app


def free(at: AppTest, a: str, b: str) -> None:
    at.text_area(key="edit_free_a").set_value(a)
    at.text_area(key="edit_free_b").set_value(b).run()
    assert not at.exception, at.exception


def test_identical_short_prompt_says_nothing_is_reused(at):
    free(at, "same text 1234", "same text 1234")
    assert tokens(at, T.M_REUSED) == 0
    n = tokens(at, T.M_RECOMPUTE)
    info = texts(at.info)
    assert "except the last token" not in info
    assert "nothing is reused" in info and f"all {n} tokens are recomputed" in info


def test_identical_long_prompt_sentence_carries_the_metrics(at):
    text = "The cat sat on the mat and looked at the rain falling on the street. " * 3
    free(at, text, text)
    reused, recompute = tokens(at, T.M_REUSED), tokens(at, T.M_RECOMPUTE)
    assert reused > 0
    info = texts(at.info)
    assert f"reuses the {reused:,} tokens" in info and f"recomputes the other {recompute:,}" in info


def canned(comparison):
    """``time_edit`` answering with these samples (the page's sentences are what is tested here)."""
    return lambda *a, **k: EditTiming(comparison, (1.0,), (1.0,), (0,), (0,), -1)


def test_overlapping_timings_print_no_saving(at, monkeypatch):
    import kvviz.experiments.edit.report as R

    noisy = compare_samples([230, 380, 250, 400, 240], [367, 240, 390, 235, 260])
    monkeypatch.setattr(R, "time_edit", canned(noisy))
    a = "A unique sentence for the noisy timing test, about twenty eight tokens long, ending here."
    free(at, a, a[:-1] + "!")
    assert tokens(at, T.M_REUSED) > 0
    saved, full = metric(at, T.M_SAVED), metric(at, T.M_FULL_MS)
    for m in (saved, full):
        assert m.delta in (None, "", T.M_WITHIN_NOISE), m.delta
    assert "Too short to measure a difference on this machine" in texts(at.info)


def test_measured_saving_is_positive_and_speedup_above_one(at, monkeypatch):
    import kvviz.experiments.edit.report as R

    clear = compare_samples([100, 104, 98, 101, 99], [20, 22, 19, 21, 25])
    monkeypatch.setattr(R, "time_edit", canned(clear))
    a = "Another unique sentence, for the clear timing test, long enough to fill a few blocks of tokens."
    free(at, a, a[:-1] + "?")
    assert metric(at, T.M_SAVED).delta == T.M_SAVED_MS.format(ms=79)
    assert metric(at, T.M_FULL_MS).delta == T.M_SPEEDUP.format(x=100 / 21)
    assert metric(at, T.M_FULL_MS).value == T.MS_MEDIAN.format(ms=100)


def test_edit_past_the_token_limit_is_named(at, monkeypatch):
    monkeypatch.setenv("KVVIZ_MAX_TOKENS", "64")
    a = ("Paste of a long document about caches. " * 60)[:2000]
    b = a[:-1] + "!"
    free(at, a, b)
    warnings = texts(at.warning)
    assert "beyond the 64-token limit" in warnings and f"character {len(a) - 1:,}" in warnings
    assert T.IDENTICAL_TEXT_ONLY.split("(")[0] not in texts(at.caption)


def test_byte_tokens_show_the_letter_they_start():
    from kvviz.analysis.prompt_compare import compare_prompts
    from kvviz_app.edit import figures as F

    pieces, ids = ["<0xD0>", "П", "о"], [1, 2, 3]
    fig = F.token_strip_figure(pieces, ids, pieces, ids, [], [], compare_prompts(ids, ids, block_size=2))
    cells = [c for row in fig.data[0].text for c in row if c]
    assert any("D0" in c and "П" in c for c in cells), cells
    hovers = " ".join(str(h) for tr in fig.data for h in (tr.hovertext or []))
    assert "D0 9F" in hovers


def test_russian_prompt_gets_a_measured_tokens_per_letter_note(at):
    from kvviz.model.tokens import ENGLISH_SAMPLE, letter_cost
    from kvviz.util.utf8 import letters

    a = "Почему один символ ломает кэш промптов? Объясни на простом примере."
    free(at, a, a[:-1] + "!")
    ru_tokens, ru_letters = letter_cost(a)
    en_tokens, en_letters = letter_cost(ENGLISH_SAMPLE)
    assert ru_letters == letters(a) and ru_tokens / ru_letters > 2 * en_tokens / en_letters
    info = texts(at.info)
    assert T.CYRILLIC_NOTE.format(tokens=ru_tokens, letters=ru_letters, ru=ru_tokens / ru_letters,
                                  en_tokens=en_tokens, en_letters=en_letters, en=en_tokens / en_letters,
                                  ratio=(ru_tokens / ru_letters) / (en_tokens / en_letters)) in info


def test_an_emoji_prompt_gets_no_tokens_per_letter_note(at):
    """Issue 27 item 8: a prompt of emoji with a few Cyrillic letters printed "14.33 tokens per Cyrillic
    letter"; a ratio over the letters present means nothing there, so no note is shown."""
    a = "🙂🎉🚀🔥 кот 🐱🐈😺😸😹 рыба 🐟🐠🐡🦈 " * 3
    free(at, a, a[:-2] + "🐳 ")
    assert "tokens per Cyrillic letter" not in texts(at.info)
