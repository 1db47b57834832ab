"""One check for a reader's coded error and its words: the code and params it carries, the English words
equal to the line the CLI prints, and Russian words with no placeholder left."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kvviz_app.shell.i18n import use_lang

CYRILLIC = re.compile("[а-яё]", re.IGNORECASE)


def check_coded_words(exc: Any, code: str, params: Mapping[str, Any], text: Any, words: str,
                      literal_brace: str = "") -> str:
    """Assert ``exc`` carries ``code`` and at least ``params``, that ``text.<words>`` (a kvviz_app.text module and
    its wording function, looked up in each language: every language has its own) gives its English line in
    English and Cyrillic without a ``{`` (besides ``literal_brace``) in Russian; returns the Russian words."""
    assert exc.code == code and params.items() <= exc.params.items(), exc.params
    assert getattr(text, words)(exc) == str(exc)  # the English words are the CLI's line
    with use_lang("ru"):
        russian = getattr(text, words)(exc)
    assert CYRILLIC.search(russian) and "{" not in (russian.replace(literal_brace, "") if literal_brace
                                                    else russian), russian
    return russian
