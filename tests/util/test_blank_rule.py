"""One rule for invisible-only text: zero-width spaces are as blank as spaces, in
kvviz.util.blank's rule, in the model's text check and in the CLI's."""

from __future__ import annotations

import pytest

from kvviz.util.blank import is_blank

INVISIBLE_ONLY = ["", "   ", "\n\t ", "\u200b\u200b\u200b", "\u200c\u200d\u2060", "\ufeff", "\u00ad", " \u200b\n",
                  "\u3000", "\x07\x00"]
VISIBLE = ["a", " x ", "\u200bword", "Привет", "日本", "😀", ".", "\u200b1"]


@pytest.mark.parametrize("text", INVISIBLE_ONLY)
def test_invisible_only_text_is_blank(text):
    assert is_blank(text)


@pytest.mark.parametrize("text", VISIBLE)
def test_text_with_a_visible_character_is_not_blank(text):
    assert not is_blank(text)


@pytest.mark.parametrize("text", ["   ", "\u200b\u200b\u200b"])
def test_clean_text_refuses_spaces_and_zero_width_spaces_alike(text):
    from kvviz.model.settings import InputError
    from kvviz.model.tokens import clean_text
    from kvviz_app.shell.i18n import texts
    T = texts("common")

    with pytest.raises(InputError) as err:
        clean_text(text)
    assert str(err.value) == T.ERROR_EMPTY_TEXT


@pytest.mark.parametrize("text", ["   ", "\u200b\u200b\u200b"])
def test_cli_text_check_refuses_zero_width_spaces(text):
    from kvviz.cli import CliError
    from kvviz.cli.hash import tokens_from_text

    with pytest.raises(CliError, match="empty"):
        tokens_from_text(text)


def test_session_file_text_refuses_zero_width_spaces():
    from kvviz.experiments.sessions.schema import SessionError, _text

    with pytest.raises(SessionError) as caught:
        _text("\u200b\u200b", "user", turn=1)
    assert caught.value.code == "not_text" and "turn 1 'user'" in str(caught.value)
