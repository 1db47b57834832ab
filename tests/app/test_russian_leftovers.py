"""Russian sentences carry no English details: endpoint and fleet-list errors, a JSON decoder's reason, the
plural of "all N lines are bad", the chat table's header, the side channel's template and the room's
presets are Russian in a Russian session (each was English inside a Russian sentence)."""

from __future__ import annotations

import re

import pytest

from kvviz.analysis.workload.parse import parse_trace
from kvviz.analysis.workload.trace import BadLines, WorkloadError
from kvviz.experiments.room.presets import PRESETS, preset_prompt
from kvviz.experiments.security.attacker import GAME_CANDIDATES, GAME_TEMPLATE
from kvviz.fleet.subscriber import LiveConfig
from kvviz_app.live.fleet import specs_from_text
from kvviz_app.shell.i18n import texts

RU = texts("common", "ru")
LATIN_WORD = re.compile(r"\b(?!tcp\b)(?![A-Z]+\b)[A-Za-z]{4,}\b")  # an English word (tcp, acronyms aside)


def _latin_words(text: str) -> list[str]:
    return LATIN_WORD.findall(re.sub(r"`[^`]*`", "", text))  # code spans hold the user's own value


@pytest.mark.parametrize(("config", "code"), [
    (LiveConfig("tcp://127.0.0.1:70000"), "port_range"),
    (LiveConfig("tcp://*:5557"), "endpoint_bind_address"),
    (LiveConfig("localhost:5557"), "endpoint_not_tcp"),
    (LiveConfig("tcp://127.0.0.1:5557", replay_endpoint="tcp://127.0.0.1:0"), "port_range"),
])
def test_endpoint_errors_are_russian_sentences(config, code):
    with pytest.raises(ValueError) as err:
        config.validated()
    assert getattr(err.value, "code", "") == code
    words = RU.error_text(err.value)
    assert not _latin_words(words.replace("replay", "")), words  # "replay" is the engine's term, kept
    assert "port must be" in str(err.value) or code != "port_range"  # the CLI keeps its English line


@pytest.mark.parametrize("text", ["a=tcp://127.0.0.1:5557 b c", "\n".join(["tcp://127.0.0.1:5557"] * 17),
                                  "a=tcp://127.0.0.1:99999"])
def test_fleet_list_errors_are_russian_sentences(text):
    with pytest.raises(ValueError) as err:
        specs_from_text(text, 1)
    words = RU.error_text(err.value)
    assert not _latin_words(words.replace("replay", "")), words  # "replay" is the engine's term, kept


def test_a_json_decoder_reason_is_worded_in_russian():
    with pytest.raises(WorkloadError) as err:
        parse_trace(b'{"hash_ids": [1], "input_length": 5}\n{oops')
    words = texts("workload", "ru").trace_error(err.value)
    assert "Expecting" in str(err.value)  # the CLI's English line keeps the decoder's words
    assert "Expecting" not in words and not _latin_words(words), words


@pytest.mark.parametrize(("lines", "words"), [(2, "все 2 строки"), (5, "все 5 строк")])
def test_all_bad_lines_take_the_russian_plural(lines, words):
    bad = BadLines()
    with pytest.raises(WorkloadError) as err:
        parse_trace(b"[1,]\n" * lines, bad=bad)
    said = texts("workload", "ru").trace_error(err.value)
    assert words in said, said


def test_the_chat_tables_computed_column_is_a_whole_russian_header():
    header = texts("sessions", "ru").CHAT_TABLE["computed"]
    assert header != "вычислен" and "токен" in header, header


def test_the_side_channel_game_defaults_follow_the_language():
    en, ru = texts("security", "en"), texts("security", "ru")
    assert en.GAME_TEMPLATE_DEFAULT == GAME_TEMPLATE and ", ".join(GAME_CANDIDATES) == en.GAME_CANDIDATES_DEFAULT
    assert ru.GAME_TEMPLATE_DEFAULT.count("{secret}") == 1
    assert not _latin_words(ru.GAME_TEMPLATE_DEFAULT.replace("{secret}", ""))
    assert not _latin_words(ru.GAME_CANDIDATES_DEFAULT)
    assert len({c.strip() for c in ru.GAME_CANDIDATES_DEFAULT.split(",")}) == len(GAME_CANDIDATES)


def test_the_rooms_presets_are_russian_prompts_in_russian():
    for label, english in PRESETS.items():
        assert preset_prompt(label, "en") == english
        if english:
            russian = preset_prompt(label, "ru")
            assert russian and not _latin_words(russian), russian
