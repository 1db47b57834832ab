"""Safer default: with no KVVIZ_PRESENTER_KEY the process-wide room gets a generated
presenter key, printed once in the server log with the room's URL, and reset requires it."""

from __future__ import annotations

import pytest

import kvviz.experiments.room.service as room_mod
from kvviz.experiments.room.service import ENV_PRESENTER_KEY, get_room, presenter_key_generated
from kvviz_app.shell.i18n import texts

T = texts("security")


@pytest.fixture
def fresh_room(monkeypatch):
    monkeypatch.setattr(room_mod, "_ROOM", None)
    monkeypatch.setattr(room_mod, "_KEY_GENERATED", False)
    yield
    room_mod._ROOM = None


def test_room_without_env_key_gets_a_generated_key_and_reset_needs_it(fresh_room, monkeypatch):
    monkeypatch.delenv(ENV_PRESENTER_KEY, raising=False)
    room = get_room()
    key = room.presenter_key
    assert key and len(key) >= 12 and presenter_key_generated()
    assert T.refusal(room.reset(None)) == T.ERR_PRESENTER_KEY_MISSING  # no key typed: say one is needed
    assert T.refusal(room.reset("")) == T.ERR_PRESENTER_KEY_MISSING
    assert T.refusal(room.reset("not-the-key")) == T.ERR_PRESENTER_KEY
    assert room.reset(key).ok


def test_generated_keys_differ_between_servers(fresh_room, monkeypatch):
    monkeypatch.delenv(ENV_PRESENTER_KEY, raising=False)
    first = get_room().presenter_key
    room_mod._ROOM = None
    assert get_room().presenter_key != first


def test_env_key_is_used_as_given(fresh_room, monkeypatch):
    monkeypatch.setenv(ENV_PRESENTER_KEY, "s3cret-key")
    room = get_room()
    assert room.presenter_key == "s3cret-key" and not presenter_key_generated()


def test_server_log_prints_the_generated_key_once_with_the_url(fresh_room, monkeypatch, capsys):
    from kvviz_app.shell import ui

    monkeypatch.delenv(ENV_PRESENTER_KEY, raising=False)
    monkeypatch.setattr(ui, "_ANNOUNCED", False)
    ui.announce_presenter_key()
    ui.announce_presenter_key()
    err = capsys.readouterr().err
    key = get_room().presenter_key
    assert err.count(key) == 1 and "/room" in err and "http://" in err
