"""AppTest of the Edit page's shareable state (both prompts, block size, hash, seed; hostile values) and its
predict-then-reveal box (first missing block, reused tokens)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from kvviz.analysis.prompt_compare import compare_prompts
from kvviz.model import tokenize
from kvviz_app.shell.i18n import texts

T = texts("edit")
T_SHARE = texts("share")

pytestmark = pytest.mark.model

PAGE = str(Path(__file__).resolve().parent.parent.parent / "pages" / "edit.py")
A = "You are a careful assistant. Answer in one short sentence. The cat sat on the mat by the window."
B = "You are a careful assistant. Answer in one short sentence. The dog sat on the mat by the window."


def _run(params: dict) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=300)
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


def _metric(at: AppTest, label: str) -> int:
    return int(next(m.value for m in at.metric if m.label == label).split()[0].replace(",", ""))


def test_both_prompts_block_size_hash_and_seed_come_from_the_link():
    at = _run({"mode": "free", "a": A, "b": B, "block": "4", "hash": "xxhash_cbor", "seed": "42"})
    assert not at.exception and not at.warning
    assert at.text_area(key="edit_free_a").value == A and at.text_area(key="edit_free_b").value == B
    assert at.select_slider(key="edit_block_size").value == 4
    assert at.selectbox(key="edit_hash").value == "xxhash_cbor" and at.text_input(key="edit_seed").value == "42"
    cmp = compare_prompts(tokenize(A).ids, tokenize(B).ids, block_size=4)
    assert _metric(at, T.M_REUSED) == cmp.reused_tokens
    query = dict(at.query_params)
    assert query["a"] == A and query["block"] == "4" and query["mode"] == "free"


def test_hostile_values_keep_the_defaults_with_a_notice():
    at = _run({"mode": "<img src=x onerror=alert(1)>", "block": "3", "hash": "md5", "seed": "s" * 100,
               "a": "x" * 7000, "preset": ["cat_window", "other"], "pos": "-1"})
    assert not at.exception
    notice = at.warning[0].value
    for name in ("mode", "block", "hash", "seed", "a", "preset", "pos"):
        assert name in notice
    # Widget values are codes now (labels come from kvviz_app.text via format_func), and the default hash follows
    # vLLM's CacheConfig.prefix_caching_hash_algo default, "sha256" (pickle), no longer "sha256_cbor".
    assert at.radio(key="edit_mode").value == "preset"
    assert at.radio(key="edit_mode").format_func("preset") == T.MODE_PRESET
    assert at.selectbox(key="edit_hash").value == "sha256"


def test_predict_then_reveal_on_the_edit_page():
    at = _run({"mode": "free", "a": A, "b": B, "block": "4", "path": "self"})
    assert not at.exception
    assert at.toggle(key="predict_edit").value is True  # on for self-study
    assert not any(m.label == T.M_REUSED for m in at.metric)  # the answers wait for the reveal
    cmp = compare_prompts(tokenize(A).ids, tokenize(B).ids, block_size=4)
    first_miss = next(b.index for b in cmp.blocks if not b.reused)
    at.selectbox(key="predict_edit_block").set_value(first_miss)
    at.number_input(key="predict_edit_tokens").set_value(cmp.reused_tokens + 4)
    at.button(key="predict_edit_reveal").click().run()
    assert not at.exception
    assert any("Right" in s.value for s in at.success)  # the block was right
    assert any("Not quite" in w.value for w in at.warning)  # the token count was not
    assert _metric(at, T.M_REUSED) == cmp.reused_tokens


def test_the_default_link_carries_no_seed_and_the_seed_field_is_empty():
    at = _run({})
    assert not at.exception
    assert "seed" not in dict(at.query_params), dict(at.query_params)  # not "None": a seed of its own
    assert at.text_input(key="edit_seed").value in ("", None)
    again = _run(dict(at.query_params))  # the link opened in a fresh session
    assert not again.exception and again.text_input(key="edit_seed").value in ("", None)
    assert _metric(again, T.M_REUSED) == _metric(at, T.M_REUSED)


def test_a_rerun_that_brings_an_earlier_url_keeps_what_was_typed():
    """Quick keystrokes: the browser sends the next rerun before it applied the URL the last run wrote, so
    the rerun carries an older URL of this session. That URL is this session's own: it must not be
    restored over what the person typed since."""
    at = _run({"mode": "char", "text": A, "pos": "30", "repl": "x"})
    assert not at.exception
    stale = dict(at.query_params)
    at.text_input(key="edit_char_repl").input("y").run()
    assert dict(at.query_params)["repl"] == "y"
    for name in list(at.query_params):
        del at.query_params[name]
    for name, value in stale.items():  # the rerun of the next keystroke, with the URL of two runs ago
        at.query_params[name] = value
    at.slider(key="edit_char_pos").set_value(31).run()
    assert not at.exception
    assert at.text_input(key="edit_char_repl").value == "y" and at.slider(key="edit_char_pos").value == 31
    assert dict(at.query_params)["repl"] == "y" and dict(at.query_params)["pos"] == "31"


def test_a_prompt_too_long_for_a_link_stays_out_of_the_url_and_the_page_says_so():
    long_a = "The cat sat on the mat. " * 400  # 9,600 characters: more than a link carries
    at = _run({"mode": "free", "a": A, "b": B})
    at.text_area(key="edit_free_a").input(long_a).run()
    assert not at.exception
    assert at.text_area(key="edit_free_a").value == long_a and at.text_area(key="edit_free_b").value == B
    query = dict(at.query_params)
    assert "a" not in query and query["b"] == B, sorted(query)
    assert any(T_SHARE.TOO_LONG_TO_SHARE.split("{")[0] in c.value for c in at.caption), [c.value for c in at.caption]
