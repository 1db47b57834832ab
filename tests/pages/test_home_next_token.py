"""Issue 27 item 10: the Overview's next token is rendered as the Edit page renders tokens: a token that is
only the first byte of a letter shows as ``<0xD0>``, never as the replacement character '\ufffd'."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from kvviz_app.shell.i18n import texts

T = texts("home")


pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "Он сказал: «"  # SmolLM2 continues with the first byte of a Cyrillic letter


def test_a_partial_utf8_next_token_shows_its_byte_not_a_replacement_character():
    import torch  # noqa: F401 - before kvviz.model's lazy imports

    from kvviz.experiments.edit.diffs import piece_text
    from kvviz.model import load_model, prefill

    lm = load_model()
    expected = piece_text(lm, int(prefill(lm, text=PROMPT).last_logits.argmax()))
    assert expected.startswith("<0x"), expected  # the premise: this prompt's next token is a byte
    at = AppTest.from_file(str(ROOT / "pages" / "home.py"), default_timeout=240).run()
    at.text_area[0].input(PROMPT)
    at.button[0].click().run()
    assert not at.exception
    shown = next(m.value for m in at.metric if m.label == T.TRY_NEXT)
    assert "\ufffd" not in shown and shown == repr(expected)
