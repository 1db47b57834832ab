"""The block-table page's host tier evicts by LRU (the default) or ARC, as vLLM 0.33.0's OffloadingConnector
``eviction_policy``: the replayed host state says which block is dropped next under either policy (checked
against the drops the next step really makes) and, under ARC, where T1 ends; the page offers the policy
beside the host-tier choice and carries it in its share link."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from kvviz.analysis.scenarios.load import load_builtin
from kvviz.analysis.scenarios.play import play_scenario
from kvviz.mirror.events import EventKind
from kvviz_app.shell.i18n import texts, use_lang

ROOT = Path(__file__).resolve().parents[2]
PAGE = str(ROOT / "pages" / "block_table.py")
T = texts("block_table")


@pytest.mark.parametrize("policy", ["lru", "arc"])
@pytest.mark.parametrize("name", ["pool_pressure", "branching_prompts"])
def test_the_block_marked_dropped_next_is_the_one_the_next_drop_takes(name, policy):
    run = play_scenario(load_builtin(name).with_host_tier(8, policy))
    drops = 0
    for k in range(run.num_steps):
        host = run.view_at(k).state.host
        assert (host.t1 is None) == (policy == "lru")
        events = run.events_of_step(k + 1)
        dropped = [h for e in events if e.kind is EventKind.HOST_EVICT for h in e.block_hashes]
        offered = {h for e in events if e.kind is EventKind.HOST_STORE for h in e.block_hashes}
        if dropped and host.lru[host.next_drop][0] not in offered:  # a request's own offer is never dropped
            assert host.lru[host.next_drop][0] == dropped[0], (k, policy)
            drops += 1
    assert drops > 0


def test_arc_and_lru_replay_to_the_same_hits_but_their_own_order():
    lru = play_scenario(load_builtin("pool_pressure").with_host_tier(8))
    arc = play_scenario(load_builtin("pool_pressure").with_host_tier(8, "arc"))
    assert lru.scenario.fingerprint != arc.scenario.fingerprint  # two cache entries on the page
    k = lru.num_steps
    assert arc.view_at(k).state.host.t1 is not None and lru.view_at(k).state.host.t1 is None


def _page(params: dict, lang: str = "en") -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=120)
    for key, value in params.items():
        at.query_params[key] = value
    with use_lang(lang):
        at.run()
    assert not at.exception, at.exception
    return at


def _titles(at: AppTest) -> list[str]:
    return [json.loads(c.proto.spec)["layout"].get("title", {}).get("text", "") for c in at.get("plotly_chart")]


@pytest.mark.parametrize("lang", ["en", "ru"])
def test_the_page_offers_arc_beside_the_host_tier_and_links_it(lang):
    L = texts("block_table", lang)
    at = _page({"scenario": "pool_pressure", "host": "8", "host_policy": "arc", "step": "6", "lang": lang}, lang)
    assert not at.warning
    choice = at.selectbox(key="bt_host_policy")
    assert choice.value == "arc" and choice.label == L.HOST_POLICY
    assert any(L.HOST_QUEUE_TITLE_ARC.format(n=0).split("0")[0] in t for t in _titles(at)), _titles(at)
    assert at.query_params["host_policy"] == ["arc"] or at.query_params["host_policy"] == "arc"
    with use_lang(lang):
        choice.set_value("lru").run()
    assert not at.exception and not any(L.HOST_QUEUE_TITLE_ARC.format(n=0).split("0")[0] in t for t in _titles(at))


def test_the_policy_waits_for_a_host_tier():
    at = _page({"scenario": "pool_pressure", "host_policy": "arc"})
    assert not [s for s in at.selectbox if s.key == "bt_host_policy"]  # shown under the size once a tier is on
    at = _page({"scenario": "pool_pressure", "host": "8", "host_policy": "mru"})
    assert at.selectbox(key="bt_host_policy").value == "lru" and "host_policy" in at.warning[0].value
