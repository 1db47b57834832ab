"""The API's KVVIZ_* variables, parsed once in kvviz.settings; a bad one is a one-line error for the app."""

from __future__ import annotations

import pytest

from kvviz import settings as S
from kvviz.server import config


def test_defaults_and_values():
    s = S.parse({})
    assert (s.api, s.api_host, s.api_port, s.api_key, s.api_max_waiting, s.kv_events_endpoint) == \
        (True, "127.0.0.1", 8000, None, 64, None)
    s = S.parse({"KVVIZ_API": "off", "KVVIZ_API_HOST": " 0.0.0.0 ", "KVVIZ_API_PORT": "0", "KVVIZ_API_KEY": " k ",
                 "KVVIZ_API_MAX_WAITING": "5", "KVVIZ_KV_EVENTS_ENDPOINT": "tcp://*:5557"})
    assert (s.api, s.api_host, s.api_port, s.api_key, s.api_max_waiting, s.kv_events_endpoint) == \
        (False, "0.0.0.0", 0, "k", 5, "tcp://*:5557") and not s.errors


@pytest.mark.parametrize(("name", "bad"), [("KVVIZ_API_PORT", "65536"), ("KVVIZ_API_PORT", "80.5"),
                                           ("KVVIZ_API_PORT", "-1"), ("KVVIZ_API_MAX_WAITING", "0"),
                                           ("KVVIZ_API_MAX_WAITING", "many")])
def test_a_bad_value_keeps_the_default_and_fails_the_server_config(monkeypatch, name, bad):
    s = S.parse({name: bad})
    assert list(s.errors) == [name] and s.errors[name].startswith(f"{name}={bad!r}")
    assert (s.api_port, s.api_max_waiting) == (8000, 64)
    monkeypatch.setenv(name, bad)
    with pytest.raises(ValueError, match=name):
        config.from_env()
