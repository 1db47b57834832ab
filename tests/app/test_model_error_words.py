"""Every error kvviz.model's settings, resolve and loader raise is a CodedError with words in both languages:
the codes are collected from the source, so a new raise without a code or without words fails."""

from __future__ import annotations

import ast
import string
from pathlib import Path

import pytest

from kvviz.analysis.sizes.kvsize import KVSizeError, normalize_dtype
from kvviz.errors import CodedError
from kvviz.model.settings import InputError, ModelLoadError, check_count, check_max_tokens, normalise_dtype
from kvviz_app.shell.i18n import texts, use_lang

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ["kvviz/model/settings.py", "kvviz/model/resolve.py", "kvviz/model/loader.py"]
EN, RU = texts("common", "en"), texts("common", "ru")


def _raised() -> list[tuple[str, int, str | None, tuple[str, ...]]]:
    """(file, line, code or None, keyword params) of every InputError(...) / ModelLoadError(...) call."""
    found = []
    for rel in SOURCES:
        for node in ast.walk(ast.parse((ROOT / rel).read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("InputError", "ModelLoadError"):
                code = node.args[1] if len(node.args) > 1 else None
                value = code.value if isinstance(code, ast.Constant) else None
                if isinstance(code, ast.IfExp):  # "a" if x else "b": both codes, the same params
                    for branch in (code.body, code.orelse):
                        found.append((rel, node.lineno, branch.value, tuple(sorted(k.arg for k in node.keywords))))
                    continue
                found.append((rel, node.lineno, value, tuple(sorted(k.arg for k in node.keywords))))
    return found


RAISED = _raised()


def test_the_sources_raise_many_coded_errors():
    assert len(RAISED) >= 25, RAISED  # the collector found the raise sites (it cannot pass on an empty list)


@pytest.mark.parametrize(("where", "line", "code", "params"), RAISED,
                         ids=[f"{w}:{n}:{c}" for w, n, c, _ in RAISED])
def test_every_raise_has_a_code_with_words_in_english_and_russian(where, line, code, params):
    assert code, f"{where}:{line} raises without a code"
    english, russian = EN.INPUT_ERRORS.get(code), RU.INPUT_ERRORS.get(code)
    assert english and russian and russian != english, f"{where}:{line}: no words for {code!r}"
    assert any("\u0400" <= c <= "\u04ff" for c in russian), russian  # Russian words, not the English line
    for template in (english, russian):
        fields = {name for _, name, _, _ in string.Formatter().parse(template) if name}
        assert fields <= set(params), f"{where}:{line}: {code!r} words {fields - set(params)} the raise does not give"


def test_the_errors_are_coded_and_keep_their_old_bases():
    assert issubclass(ModelLoadError, CodedError) and issubclass(ModelLoadError, RuntimeError)
    assert issubclass(KVSizeError, CodedError) and issubclass(KVSizeError, ValueError)
    with pytest.raises(KVSizeError) as err:
        normalize_dtype("fp7")
    assert err.value.code == "unknown_dtype" and err.value.params["name"] == "'fp7'"


@pytest.mark.parametrize(("call", "english"), [
    (lambda: check_max_tokens(0), "max_tokens must be between 1 and"),
    (lambda: check_max_tokens("9"), "max_tokens must be an integer, got '9'"),
    (lambda: normalise_dtype("fp7"), "unknown dtype 'fp7': use one of float32, bfloat16, float16"),
    (lambda: check_count("steps", 0, 1, 5), "steps must be an integer in 1..5, got 0"),
])
def test_settings_errors_keep_the_cli_line_and_are_worded_in_russian(call, english):
    with pytest.raises(InputError) as err:
        call()
    assert str(err.value).startswith(english)
    russian = RU.error_text(err.value)
    assert russian != str(err.value) and any("\u0400" <= c <= "\u04ff" for c in russian), russian


def test_a_russian_sessions_line_for_a_missing_model_folder_is_russian(tmp_path):
    from kvviz.model.resolve import resolve_model  # imports torch

    missing = str(tmp_path / "no-such-model")
    with pytest.raises(ModelLoadError) as err:
        resolve_model(missing)
    assert str(err.value) == f"model folder {missing!r} does not exist"  # the CLI's line, unchanged
    assert err.value.code == "model_folder_missing"
    with use_lang("ru"):
        line = texts("common").error_text(err.value)
    assert line == f"Папка модели {missing!r} не существует.", line
    with use_lang("en"):
        assert texts("common").error_text(err.value) == f"Model folder {missing!r} does not exist."
