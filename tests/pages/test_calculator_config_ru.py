"""The config.json reader speaks codes (kvviz.analysis.sizes.hf_config); the view words them: every note and error
code has English and Russian words, and the Russian calculator page shows no English sentence from the library."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from kvviz.analysis.sizes.hf_config import (
    ERROR_CODES,
    NOTE_CODES,
    ConfigError,
    load_config_file,
    parse_config_text,
)
from kvviz.analysis.sizes.kvsize import KVSizeError, check_count
from kvviz.analysis.sizes.presets import CONFIG_DIR
from kvviz_app.shell.i18n import texts, use_lang

TC = texts("calculator_config")

ROOT = Path(__file__).resolve().parents[2]
PAGE = str(ROOT / "pages" / "calculator.py")
CYRILLIC = re.compile("[а-яё]", re.IGNORECASE)


def test_every_code_has_words():
    wrapped = {"bad_value", "bad_shape"}  # worded by SIZE_ERRORS from their reason
    assert set(TC.CONFIG_NOTES) == set(NOTE_CODES)
    assert set(TC.CONFIG_ERRORS) | wrapped == set(ERROR_CODES)


def test_notes_of_every_shipped_config_read_in_russian():
    seen = set()
    for path in CONFIG_DIR.glob("*.json"):
        for note in load_config_file(path).notes:
            seen.add(note.code)
            english = TC.config_note(note)
            with use_lang("ru"):
                russian = TC.config_note(note)
            assert CYRILLIC.search(russian) and russian != english, (note, russian)
            assert "{" not in russian
    assert {"nested_config", "default_head_dim", "state_layers", "mla_latent"} <= seen


def test_russian_plurals_and_ordinals_in_notes():
    cfg = dict(model_type="qwen3_next", num_hidden_layers=21, num_attention_heads=16, num_key_value_heads=2,
               hidden_size=2048, full_attention_interval=3)
    notes = parse_config_text(json.dumps(cfg)).notes
    with use_lang("ru"):
        words = [TC.config_note(n) for n in notes]
    assert "каждый 3-й слой" in words[-2]
    assert words[-1].startswith("14 из 21 слоя")  # genitive singular after 21
    falcon = parse_config_text(json.dumps(dict(model_type="falcon", num_hidden_layers=2, num_attention_heads=8,
                                               hidden_size=512, new_decoder_architecture=True, num_kv_heads=2)))
    with use_lang("ru"):
        assert "2 группы KV-голов" in TC.config_note(falcon.notes[0])


BAD = [
    ('{"model_type": "llama", "num_hidden_layers": 32', "invalid_json", "некорректный JSON"),
    ("[1, 2]", "not_object", "JSON-массив"),
    ("{}", "missing_field", "число слоёв"),
    (json.dumps({"model_type": "llama", "num_hidden_layers": 0, "num_attention_heads": 8, "hidden_size": 64}),
     "bad_value", "должно быть положительным"),
    (json.dumps({"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4,
                 "num_key_value_heads": 8, "hidden_size": 64}), "bad_shape", "не может быть больше"),
]


@pytest.mark.parametrize(("text", "code", "russian"), BAD)
def test_errors_read_in_russian(text, code, russian):
    with pytest.raises(ConfigError) as info:
        parse_config_text(text)
    assert info.value.code == code
    with use_lang("ru"):
        assert russian in TC.size_error(info.value)


def test_kvsize_errors_carry_codes_and_read_in_russian():
    with pytest.raises(KVSizeError) as info:
        check_count("layers", 10**9, high=10)
    assert info.value.code == "absurd" and info.value.params == {"name": "layers", "value": 10**9, "high": 10}
    assert TC.size_error(info.value) == str(info.value)  # the English words are the CLI's line
    with use_lang("ru"):
        assert TC.size_error(info.value) == "layers = 1\u202f000\u202f000\u202f000 — нереально много (предел 10)"


def _ru_page() -> AppTest:
    app = AppTest.from_file(PAGE, default_timeout=120)
    app.query_params["lang"] = "ru"
    with use_lang("ru"):
        app.run()
    assert not app.exception
    return app


def test_russian_calculator_page_shows_config_notes_and_errors_in_russian():
    at = _ru_page()
    with use_lang("ru"):
        at.radio(key="calc_mode").set_value("config").run()
        at.text_area(key="calc_config_text").input((CONFIG_DIR / "gemma-3-12b-it.json").read_text()).run()
    assert not at.exception and not at.error
    notes = " ".join(m.value for m in at.markdown)
    assert "прочитан вложенный text_config" in notes and "read the nested" not in notes
    with use_lang("ru"):
        at.text_area(key="calc_config_text").input("[1, 2]").run()
    errors = [e.value for e in at.error]
    assert errors and "JSON-массив" in errors[0] and "must be" not in errors[0], errors


def test_russian_page_names_the_generic_reader_and_words_its_note():
    at = _ru_page()
    cfg = json.dumps({"model_type": "brand_new_lm", "num_hidden_layers": 4, "num_attention_heads": 8,
                      "num_key_value_heads": 2, "hidden_size": 512})
    with use_lang("ru"):
        at.radio(key="calc_mode").set_value("config").run()
        at.text_area(key="calc_config_text").input(cfg).run()
    assert not at.exception and not at.error
    assert any("**общий формат**" in c.value for c in at.caption)
    notes = " ".join(m.value for m in at.markdown)
    assert "kvviz не знает" in notes and "is not one kvviz knows" not in notes


@pytest.mark.parametrize(("text", "code"), [
    ("[" * 100_000 + "]" * 100_000, "too_deep"),
    ('{"n": ' + "9" * 5000 + "}", "long_number"),
    (json.dumps({"model_type": "gemma3_text", "num_hidden_layers": 1, "num_attention_heads": 2, "head_dim": 8,
                 "layer_types": {"a": 1}}), "layer_types_not_list"),
    (b"\xff\xfe{}", "not_utf8"),
])
def test_every_error_template_fills_from_the_params_core_gives(text, code):
    with pytest.raises(ConfigError) as info:
        parse_config_text(text)
    assert info.value.code == code
    for lang in ("en", "ru"):
        with use_lang(lang):
            words = TC.size_error(info.value)
        assert "{" not in words and "'" not in words.replace("'x'", ""), words
    with use_lang("ru"):
        assert CYRILLIC.search(TC.size_error(info.value))


def test_file_errors_read_in_russian(tmp_path):
    cases = [("/dev/null", "not_file", "не обычный файл"), (tmp_path / "none.json", "no_file", "файл не найден"),
             (tmp_path, "is_dir", "это каталог")]
    for path, code, russian in cases:
        with pytest.raises(ConfigError) as info:
            load_config_file(path)
        assert info.value.code == code
        with use_lang("ru"):
            assert russian in TC.size_error(info.value), TC.size_error(info.value)
