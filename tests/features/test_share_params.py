"""kvviz_app.shell.share: typed URL params (parsers, read with rejection, write without defaults), links, LAN, QR."""

from __future__ import annotations

import pytest

from kvviz_app.shell import share as S
from kvviz_app.shell.paths import PATHS, step_index, total_minutes
from kvviz_app.shell.share import Param

SCHEMA = {
    "n": Param("k_n", S.integer(1, 1024), 100),
    "x": Param("k_x", S.number(0.01, 1e6), 40.0, S.dump_number),
    "c": Param("k_c", S.choice([1, 4, 16]), 16),
    "t": Param("k_t", S.text(50)),
    "f": Param("k_f", S.flag, False, S.dump_flag),
    "r": Param("k_r", S.int_pair(1, 2048), (16, 600), S.dump_pair),
}


@pytest.mark.parametrize("raw", ["", "abc", "1.5", "1e3", "0", "1025", "-5", "9" * 40, "0x10", " ", "1;DROP TABLE"])
def test_integer_rejects(raw):
    with pytest.raises(ValueError):
        S.integer(1, 1024)(raw)


@pytest.mark.parametrize("raw", ["nan", "inf", "-inf", "1e400", "0", "2e6", "0x1p3", "1,5", "", "--1"])
def test_number_rejects(raw):
    with pytest.raises(ValueError):
        S.number(0.01, 1e6)(raw)


def test_parsers_accept_good_values():
    assert S.integer(1, 1024)(" 512 ") == 512
    assert S.number(0.01, 1e6)("40") == 40.0 and S.number(0.01, 1e6)(".5") == 0.5
    assert S.choice([1, 4, 16])("4") == 4
    assert S.flag("true") is True and S.flag("0") is False
    assert S.int_pair(1, 2048)("16-600") == (16, 600)
    assert S.text(50)("<script>alert(1)</script>") == "<script>alert(1)</script>"  # shown as text
    assert S.text(50)("a\r\nb") == "a\nb"
    parse, dump = S.coded({"preset": "Preset", "char": "Change one character"})
    assert parse("char") == "Change one character" and dump("Preset") == "preset"


def test_read_rejects_hostile_values_by_name():
    raw = {
        "n": ["99999999999999999999"], "x": ["nan"], "c": ["5"], "t": ["a" * 51], "f": ["maybe"],
        "r": ["600-16"], "unknown": ["1"],
    }
    values, rejected = S.read(SCHEMA, raw)
    assert values == {}
    assert sorted(rejected) == ["c", "f", "n", "r", "t", "x"]
    values, rejected = S.read(SCHEMA, {"t": ["\x00bad"], "n": ["5", "6"], "c": ["4", "4"]})
    assert rejected == ["n", "t"] and values == {"c": 4}  # repeated with different values: rejected
    values, rejected = S.read(SCHEMA, {"t": ["x" * (S.MAX_VALUE_CHARS + 1)]})
    assert rejected == ["t"]


def test_write_round_trips_and_omits_defaults():
    values = {"n": 100, "x": 12.5, "c": 4, "t": "héllo & bye?", "f": True, "r": (1, 2)}
    written = S.write(SCHEMA, values)
    assert "n" not in written and written["x"] == "12.5" and written["r"] == "1-2" and written["f"] == "1"
    back, rejected = S.read(SCHEMA, {k: [v] for k, v in written.items()})
    assert not rejected and back == {k: v for k, v in values.items() if k != "n"}


def test_link_and_public_url():
    url = S.link("http://localhost:8501/edit?old=1#x", {"mode": "free", "a": "x y&z"})
    assert url == "http://localhost:8501/edit?mode=free&a=x+y%26z"
    assert S.public_url(url, "192.168.1.20").startswith("http://192.168.1.20:8501/edit?")
    assert S.public_url("http://10.0.0.5:8501/x", "192.168.1.20") == "http://10.0.0.5:8501/x"
    assert S.public_url(url, "localhost") == url
    assert S.is_local_host("127.0.1.1") and not S.is_local_host("192.168.1.2")


def test_lan_address_is_an_address():
    address = S.lan_address()
    assert address == "localhost" or address.count(".") == 3


def test_qr_svg_is_a_local_svg():
    svg = S.qr_svg("http://192.168.1.20:8501/")
    assert svg.startswith("<svg") and "<path" in svg and svg.rstrip().endswith("</svg>")
    assert S.qr_svg("http://a/") != svg  # the code encodes its data


def test_paths_are_consistent():
    assert total_minutes("workshop") == 45
    assert step_index("self", "pages/calculator.py", {"mode": "preset", "preset": "llama-3-8b"}) == 3
    assert step_index("self", "pages/calculator.py", {}) == 2
    assert step_index("workshop", "pages/collisions.py") is None
    for steps in PATHS.values():
        assert steps[0].page == "pages/home.py"


def test_write_leaves_an_unset_value_out_of_the_link():
    """An unset value (None: e.g. no hash seed) has no link form: never the text "None"; a coded value
    may still give None a code of its own (the calculator's custom budget)."""
    parse, dump = S.coded({"custom": None, "40": 40})
    schema = {"seed": S.Param("seed", S.text(64), None), "t": S.Param("t", S.text(10), "", S.dump_text(10)),
              "budget": S.Param("budget", parse, 40, dump)}
    assert S.write(schema, {"seed": None, "t": None, "budget": None}) == {"budget": "custom"}
    assert S.write(schema, {"seed": "42", "t": "x", "budget": 40}) == {"seed": "42", "t": "x"}
    assert S.write(schema, {"t": "x" * 11}) == {} and S.too_long(schema, {"t": "x" * 11}) == {"t": 10}


def test_a_subset_round_trips_in_the_options_order_and_rejects_unknown_names():
    parse, dump = S.subset(["system", "tools", "history"])
    assert parse("history,system") == ["system", "history"]
    assert dump(["history", "system"]) == "system,history"
    assert parse(dump([])) == [] and parse(dump(["tools"])) == ["tools"]
    for bad in ("system,system", "bogus", "system,,tools"):
        with pytest.raises(ValueError):
            parse(bad)
