"""AppTest of the "Edit one character" page: a preset, an edit made with the one-character tools, block
size as a control, and bad input, with the reported counts checked against the mirror and the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from kvviz.analysis.prompt_compare import compare_prompts
from kvviz.experiments.edit.diffs import replace_char
from kvviz.experiments.edit.presets import load_edit_presets
from kvviz.model import tokenize
from kvviz_app.shell.i18n import texts

T = texts("edit")

pytestmark = pytest.mark.model

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "edit.py")
T_PRESET_TITLES = {p.id: p.title for p in load_edit_presets()}
SENTENCE = "The cat sat on the mat and looked at the rain falling on the street."


def tokens(at: AppTest, label: str) -> int:
    return int(next(m.value for m in at.metric if m.label == label).split()[0].replace(",", ""))


def texts(elements) -> str:
    return " ".join(str(e.value) for e in elements)


@pytest.fixture(scope="module")
def at() -> AppTest:
    app = AppTest.from_file(PAGE, default_timeout=300)
    app.run()
    assert not app.exception, app.exception
    return app


def test_default_preset_shows_the_whole_story(at):
    preset = {p.id: p for p in load_edit_presets()}["cat_tail"]
    cmp = compare_prompts(tokenize(preset.a).ids, tokenize(preset.b).ids, block_size=preset.block_size)
    assert tokens(at, T.M_COMMON) == cmp.common_prefix_tokens
    # the hero default is a long prompt edited near its end, most of it reused
    assert tokens(at, T.M_REUSED) == cmp.reused_tokens >= 0.9 * len(cmp.blocks) * preset.block_size - 16
    assert tokens(at, T.M_RECOMPUTE) == cmp.recompute_tokens
    assert "On kvviz's engine" in texts(at.caption)  # the counts are the engine's
    values = {m.label: m.value for m in at.metric}
    assert values[T.M_FULL_MS].endswith(" ms") and values[T.M_REUSE_MS].endswith(" ms")
    md = texts(at.markdown)
    assert "every layer is identical (max |Δ| = 0)" in md and "layer 0 is unchanged" in md
    assert T.REUSE_EXACT_HEADER in md and T.WRONG_HEADER in md
    assert len(at.get("plotly_chart")) == 3  # tokens, chains, heatmap
    assert not at.error


def test_the_same_edit_at_the_start_is_one_click_away(at):
    """The other face of the lesson: the next preset edits the same prompt's first word: nothing reused."""
    options = at.selectbox(key="edit_preset").options
    assert options[:2] == [T_PRESET_TITLES["cat_tail"], T_PRESET_TITLES["cat_start"]]
    at.selectbox(key="edit_preset").set_value("cat_start").run()
    assert not at.exception and tokens(at, T.M_REUSED) == 0
    assert T.NOTHING_COMMON in texts(at.info) or tokens(at, T.M_COMMON) < 16
    at.selectbox(key="edit_preset").set_value("cat_tail").run()


def test_change_one_character_then_block_size(at):
    at.radio(key="edit_mode").set_value("char").run()
    at.text_area(key="edit_char_text").set_value(SENTENCE).run()
    position = SENTENCE.index("street") + 1
    at.slider(key="edit_char_pos").set_value(position)
    at.text_input(key="edit_char_repl").set_value("p").run()
    assert not at.exception, at.exception
    edited = replace_char(SENTENCE, position, "p")
    ids_a, ids_b = tokenize(SENTENCE).ids, tokenize(edited).ids
    for block_size in (16, 4):
        at.select_slider(key="edit_block_size").set_value(block_size).run()
        assert not at.exception
        cmp = compare_prompts(ids_a, ids_b, block_size=block_size)
        assert tokens(at, T.M_REUSED) == cmp.reused_tokens
        assert tokens(at, T.M_RECOMPUTE) == cmp.recompute_tokens
        assert tokens(at, T.M_COMMON) == cmp.common_prefix_tokens
    assert "One character changed at position" in texts(at.markdown)


def test_free_text_bad_input(at, monkeypatch):
    at.radio(key="edit_mode").set_value("free").run()
    at.text_area(key="edit_free_a").set_value("   ").run()
    assert not at.exception and T.EMPTY_A in texts(at.info)
    at.text_area(key="edit_free_a").set_value(SENTENCE)
    at.text_area(key="edit_free_b").set_value(SENTENCE).run()
    assert not at.exception and "same token sequence" in texts(at.info)
    at.text_area(key="edit_free_b").set_value("שלום 👋 \x07 مرحبا").run()
    assert not at.exception and not at.error
    info = texts(at.info)  # the bell is named by its code point and its kind (no English Unicode names)
    assert T.NOTHING_COMMON in info and "0007" in info and T.CHAR_KINDS["C"] in info
    monkeypatch.setenv("KVVIZ_MAX_TOKENS", "12")
    at.text_area(key="edit_free_b").set_value(SENTENCE + " And then it slept.").run()
    assert not at.exception and "only the first 12" in texts(at.warning)
