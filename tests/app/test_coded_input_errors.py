"""Input errors below the app are CodedErrors, worded by the app in both languages: the
edit experiment's inputs, the tokenizer's text checks, block sizes and hash names."""

from __future__ import annotations

import pytest

from kvviz.errors import CodedError, CodedLine
from kvviz.experiments.edit.inputs import edit_inputs
from kvviz.mirror import limits
from kvviz.model.settings import InputError
from kvviz_app.shell.i18n import texts

EN, RU = texts("common", "en"), texts("common", "ru")


@pytest.mark.parametrize(("args", "code"), [
    (("   ", "x"), "bad_prompt"), (("x", b"x"), "bad_prompt"), (("a", "b", 0), "block_size_range"),
    (("a", "b", "16"), "block_size_not_int"), (("a", "b", 16, "md5"), "unknown_hash"),
    (("a", "b", 16, "sha256", 7), "seed_not_text"),
])
def test_edit_inputs_raise_coded_errors_the_app_words_in_both_languages(args, code):
    with pytest.raises(InputError) as err:
        edit_inputs(*args)
    exc = err.value
    assert isinstance(exc, CodedError) and exc.code == code
    english, russian = EN.error_text(exc), RU.error_text(exc)
    assert english and russian and english != russian
    assert "\u0400" <= russian[0] <= "\u04ff", russian  # a Russian sentence, not the English line


def test_a_bad_prompt_names_the_prompt_and_the_reason():
    with pytest.raises(InputError) as err:
        edit_inputs("fine", "\n\t")
    assert str(err.value).startswith("edited prompt (B): The text is empty")  # the CLI's English line
    assert EN.error_text(err.value) == "Edited prompt (B): " + EN.ERROR_EMPTY_TEXT
    assert RU.error_text(err.value).startswith("Изменённый промпт (B): ") and RU.ERROR_EMPTY_TEXT in RU.error_text(err.value)


def test_block_size_errors_are_coded_and_still_value_errors():
    with pytest.raises(ValueError) as err:
        limits.block_size(999)
    assert err.value.code == "block_size_range" and err.value.params["high"] == limits.MAX_BLOCK_SIZE


def test_the_truncation_notice_is_a_coded_line_worded_by_the_app():
    line = CodedLine("The input has 5,000 tokens; only the first 2,048 are used (the limit is 2,048 tokens).",
                     "truncated", total=5000, kept=2048, limit=2048, more_than=False)
    assert EN.notice(line) == str(line)
    assert RU.notice(line) != str(line) and "2\u202f048" in RU.notice(line)
    assert EN.notice("plain words") == "plain words"
