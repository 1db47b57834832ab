"""Russian words where English or broken grammar used to show: segment labels after a preposition, counts
of heads, the animation buttons, the edit slider's first step, the provider policy values."""

from __future__ import annotations

import re

from kvviz.analysis.providers import POLICIES
from kvviz_app.shell.i18n import texts, tr, use_lang

CALC = texts("calculator")
EDIT = texts("edit")
ENGINE = texts("block_table")
SEC = texts("security")
SESS = texts("sessions")

LATIN_WORD = re.compile(r"[A-Za-z]{2,}")


def test_segment_label_is_not_inflected_after_a_preposition():
    with use_lang("ru"):
        line = SESS.WHY_DIFF.format(segment=SESS.segment_label("user 3"), pos=120)
    assert "пользователь 3" in line
    assert not re.search(r"\bв «?пользователь", line), line


def test_head_counts_read_without_a_wrong_case():
    with use_lang("ru"):
        gqa = CALC.FIG_TITLE_GQA.format(heads=9, kv=3, group=3)
        detail = CALC.ATTENTION_DETAIL["GQA"].format(group=8)
        reason = CALC.NAIVE_REASON["GQA"].format(kv=3, heads=9)
    assert "3 KV-голов" not in gqa and "9 голов" not in gqa, gqa
    assert "8 головы" not in detail, detail
    assert "3 KV-голов" not in reason, reason


def test_animation_buttons_and_slider_start_are_russian():
    with use_lang("ru"):
        words = [EDIT.FIG_PLAY, EDIT.FIG_PAUSE, EDIT.FIG_SLIDER_START, ENGINE.PLAY, SEC.GAME_RUN]
    for word in words:
        assert not LATIN_WORD.search(word), word


def test_policy_values_are_translated():
    with use_lang("ru"):
        for policy in POLICIES.values():
            for value in policy.values:
                assert tr(value.name) != value.name, value.name
                if " " in value.value and "_" not in value.value:  # a sentence, not a list of field names
                    assert tr(value.value) != value.value, value.value


def test_model_source_is_worded_by_the_view():
    from kvviz_app.shell.i18n import texts
    C = texts("common")

    with use_lang("ru"):
        kinds = C.MODEL_SOURCE_KINDS
        line = C.MODEL_SOURCE.format(load_s=1.5, source=kinds["folder"].format(where="/m"), backend="x")
    assert set(kinds) == {"embedded", "folder", "hub"}
    assert all(re.search("[а-я]", v) for v in kinds.values())
    assert "из локальной папки /m" in line


def test_every_load_step_the_loader_reports_has_words():
    """kvviz.model.loader and kvviz.model.embedded report ``LoadStep(code, params)``; the progress bar words
    them (read from the source, so this stays a fast test without torch)."""
    from pathlib import Path

    from kvviz_app.shell.i18n import texts
    C = texts("common")

    model_dir = Path(__file__).resolve().parents[2] / "kvviz" / "model"
    source = "".join((model_dir / name).read_text(encoding="utf-8") for name in ("loader.py", "embedded.py"))
    codes = set(re.findall(r'LoadStep\("(\w+)"', source))
    assert codes and codes == set(C.LOAD_STEPS)
    params = {"name": "m", "why": "w", "done": 1, "total": 2, "device": "cpu"}
    with use_lang("ru"):
        words = [C.LOAD_STEPS[c].format(**params) for c in sorted(codes)]
    assert all(re.search("[а-я]", w) for w in words), words
