"""The engine model fed by decoded events: blocks held per medium and rank, removals of unknown
hashes, duplicate stores, clears, the block cap, prefix trees, and prompt status with vLLM's hashes."""

from __future__ import annotations

from kvviz.fleet.engine_model import EngineModel, prompt_status
from kvviz.fleet.wire import EventBatch, to_int_hash
from kvviz.mirror.hashing import hash_block_chain, init_none_hash
from kvviz.mirror.kv_events import AllBlocksCleared, BlockRemoved, BlockStored, KVEventBatch


def _apply(model: EngineModel, events: list, rank: int | None = 0, now: float = 100.0) -> None:
    model.apply(EventBatch(KVEventBatch(now, events, rank)), now)


def _stored(hashes: list, parent, block_size: int = 2, medium: str | None = "GPU") -> BlockStored:
    tokens = [i for i in range(len(hashes) * block_size)]
    return BlockStored(hashes, parent, tokens, block_size, None, medium, None)


def test_chain_tree_and_counts() -> None:
    m = EngineModel()
    _apply(m, [_stored([b"a", b"b", b"c"], None), _stored([b"d"], b"b"), _stored([b"e"], b"a", medium=None)])
    assert m.cached_blocks == 5 and m.stored_tokens == 10
    assert m.blocks_by_medium() == {"GPU": 5}  # medium None is vLLM's GPU
    (tree,) = m.largest_trees()
    assert (tree.root, tree.blocks, tree.tokens, tree.depth, tree.leaves) == (b"a", 5, 10, 3, 3)
    assert m.events == {"BlockStored": 3, "BlockRemoved": 0, "AllBlocksCleared": 0}


def test_removal_of_a_never_stored_hash_changes_nothing() -> None:
    m = EngineModel()
    _apply(m, [_stored([b"a"], None)])
    _apply(m, [BlockRemoved([b"zz"], "GPU"), BlockRemoved([b"a"], "CPU")])
    assert m.cached_blocks == 1 and m.blocks_by_medium() == {"GPU": 1}
    _apply(m, [BlockRemoved([b"a"], "GPU")])
    assert m.cached_blocks == 0 and m.largest_trees() == []


def test_one_hash_in_two_blocks_needs_two_removals_and_media_are_separate() -> None:
    m = EngineModel()
    _apply(m, [_stored([b"a"], None), _stored([b"a"], None), _stored([b"a"], None, medium="CPU")])
    assert m.cached_blocks == 1 and m.blocks_by_medium() == {"CPU": 1, "GPU": 1}
    _apply(m, [BlockRemoved([b"a"], "GPU")])
    assert m.blocks_by_medium() == {"CPU": 1, "GPU": 1}
    _apply(m, [BlockRemoved([b"a"], "GPU")])
    assert m.blocks_by_medium() == {"CPU": 1} and m.cached_blocks == 1


def test_clear_is_per_rank_and_trees_split_when_a_parent_goes() -> None:
    m = EngineModel()
    _apply(m, [_stored([b"a", b"b"], None)], rank=0)
    _apply(m, [_stored([b"a", b"x"], None)], rank=1)
    assert m.dp_ranks == {0, 1} and m.cached_blocks == 3
    _apply(m, [AllBlocksCleared()], rank=0)
    assert set(m.blocks) == {b"a", b"x"}
    _apply(m, [BlockRemoved([b"a"], "GPU")], rank=1)
    assert [t.root for t in m.largest_trees()] == [b"x"]  # its parent left: x roots its own tree


def test_block_cap_counts_overflow() -> None:
    m = EngineModel(max_blocks=3)
    _apply(m, [_stored([b"a", b"b", b"c", b"d", b"e"], None)])
    assert m.cached_blocks == 3 and m.overflow == 2


def test_history_samples_one_per_second() -> None:
    m = EngineModel()
    _apply(m, [_stored([b"a"], None)], now=10.2)
    _apply(m, [_stored([b"b"], b"a")], now=10.7)
    m.tick(11.1)
    m.tick(12.5)
    (first, second) = m.samples()
    assert (first.t, first.batches, first.stored, first.blocks_held) == (10.0, 2, 2, 2)
    assert (second.t, second.batches, second.blocks_held) == (11.0, 0, 2)


def test_prompt_status_uses_vllm_hashes_in_bytes_and_int_form() -> None:
    tokens = list(range(100, 110))  # 5 full blocks of 2 + nothing partial
    digests = hash_block_chain(tokens, 2, "sha256", init_none_hash("sha256", None))
    for int_form in (False, True):
        conv = to_int_hash if int_form else (lambda d: d)
        m = EngineModel()
        _apply(m, [BlockStored([conv(d) for d in digests[:2]], None, tokens[:4], 2, None, "GPU", None),
                   BlockStored([conv(digests[3])], conv(digests[2]), tokens[6:8], 2, None, "GPU", None)])
        st = prompt_status(m, tokens, 2, "sha256", None)
        assert st.blocks == 5 and st.cached == (True, True, False, True, False) and st.cached_run == 2
    other_seed = prompt_status(m, tokens, 2, "sha256", "42")
    assert other_seed.cached_run == 0  # a different NONE_HASH seed changes every hash


def test_vllm_033_fields_locality_session_groups_and_latest_stores() -> None:
    m = EngineModel()
    local = BlockStored([b"a", b"b"], None, [1, 2, 3, 4], 2, None, "GPU", None, extra_keys=[("s",), None],
                        group_idx=0, kv_cache_spec_kind="full_attention", session_id="chat-1")
    remote = BlockStored([b"a"], None, [1, 2], 2, None, "CPU", None, group_idx=0, locality="REMOTE",
                         ownership="tier-2", session_id="chat-2", lookahead_token_ids=[[9]])
    _apply(m, [local, remote])
    assert m.blocks_by_locality() == {"": 2, "REMOTE": 1} and m.groups == {0: ("full_attention", None)}
    assert m.top_sessions() == [("chat-1", 2), ("chat-2", 1)]
    (tree,) = m.largest_trees()
    assert tree.where == ("CPU/REMOTE", "GPU") and tree.session_id == "chat-1"
    first, second = m.recent
    assert (first.session_id, first.extra_keys, first.blocks) == ("chat-1", ("s",), 2)
    assert (second.locality, second.ownership, second.lookahead_tokens) == ("REMOTE", "tier-2", 1)
    # A removal names its tier: the remote copy goes, the local one stays.
    _apply(m, [BlockRemoved([b"a"], "CPU", 0, "REMOTE", "tier-2")])
    assert m.blocks_by_locality() == {"": 2} and m.blocks_by_medium() == {"GPU": 2}
