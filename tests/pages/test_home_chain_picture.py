"""The landing page draws the lesson in one picture before any page is opened: the Edit page's default
example as two block chains, and a caption whose numbers are that comparison's."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from kvviz.analysis.prompt_compare import compare_prompts
from kvviz.experiments.edit.presets import DEFAULT_PRESET_ID, load_edit_presets
from kvviz.model import tokenize
from kvviz_app.shell.i18n import texts

T = texts("home")
pytestmark = pytest.mark.model
ROOT = Path(__file__).resolve().parents[2]


def test_the_landing_page_shows_the_default_edit_as_two_chains():
    preset = {p.id: p for p in load_edit_presets()}[DEFAULT_PRESET_ID]
    cmp = compare_prompts(tokenize(preset.a).ids, tokenize(preset.b).ids, block_size=preset.block_size)
    assert 0 < cmp.reused_blocks < len(cmp.blocks)  # the premise: the picture shows both hits and misses
    at = AppTest.from_file(str(ROOT / "pages" / "home.py"), default_timeout=240).run()
    assert not at.exception
    assert T.PICTURE_HEADER in [h.value for h in at.subheader]
    assert at.get("plotly_chart"), "no chart on the landing page"
    caption = T.PICTURE_CAPTION.format(tokens=cmp.num_tokens_b, blocks=len(cmp.blocks), size=cmp.block_size,
                                       reused=cmp.reused_blocks, first=cmp.first_changed_token)
    assert caption in [c.value for c in at.caption]
