"""The engine mirror: vLLM v1's prefix cache (hashing, block pool, KV cache manager, KV events) and
SGLang's radix tree, in pure Python with the engines' names.

It imports only the standard library, cbor2/xxhash and itself (never the model, the engine runtime, the
simulations or the app: ``.importlinter``), so it is fast to import and fully unit-tested.

Prefix-cache API (vLLM v1 / SGLang semantics; hashes are ``bytes``)::

    hashing:    sha256(obj) (vLLM's default, pickle) / sha256_cbor / xxhash_pickle ("xxhash") /
                xxhash_cbor / python_hash (unsafe) -> bytes; BlockHash; DEFAULT_HASH = "sha256"
                HASH_FUNCTIONS, UNSAFE_HASHES, NON_CRYPTO_HASHES, get_hash_fn(name)
                resolve_none_hash_seed(name, seed=None) -> (seed in force, reason code)
                init_none_hash(hash_fn, seed=None) -> BlockHash   (hash_fn(seed in force))
                hash_block_tokens(hash_fn, parent_block_hash, curr_block_token_ids, extra_keys=None)
                generate_block_hash_extra_keys(start, end, lora_name=, mm_features=, cache_salt=, ...)
                hash_block_chain(token_ids, block_size, hash_fn, none_hash, cache_salt=None) -> [bytes]
                hash_request_blocks(token_ids, block_size, hash_fn, none_hash, cache_salt=None,
                                    lora_name=None) -> [BlockHashRecord(index, start, end, tokens,
                                    parent, hash|None, full, extra_keys)]
                short_hash(h, n=8) -> hex str ("" for None); validate_token_ids (block sizes: kvviz.mirror.limits.block_size)
    kv_events:  vLLM's BlockStored / BlockRemoved / AllBlocksCleared / KVEventBatch (dataclasses)
    events:     EventKind (allocate hit miss cache touch free evict refuse reset), Event(seq, kind,
                request_id, block_ids, block_hashes, code, params, num_tokens, positions, kv_events),
                replay(num_blocks, events[:k], block_size) -> PoolState (ref_cnt, block_hash,
                free_queue head first, hash_to_blocks, requests, counters, blocks, block_table(id))
    kv_cache_utils: KVCacheBlock, FreeKVCacheBlockQueue (popleft(_n) = LRU head, O(1) remove, append_n,
                prepend_n)
    block_pool: BlockPool(num_blocks; block 0 = null block): get_new_blocks,
                cache_full_blocks, touch, free_blocks (unhashed -> head, hashed -> tail),
                reset_prefix_cache, get_cached_block, apply(event), snapshot
    manager:    KVCacheManager(num_blocks, block_size=16, hash_name="sha256", seed=None,
                sliding_window=None): add_request(id, tokens, cache_salt) -> AddResult,
                append_tokens(id, tokens), free_request(id), reset_prefix_cache(), block_table(id),
                peek_cache_hit(tokens), seed_in_force / seed_reason,
                snapshot() -> PoolState, replay(k), events;
    single_type: find_longest_cache_hit(...), find_longest_cache_hit_sliding_window(...), cdiv
    radix:      RadixCache(page_size=1): insert, match_prefix -> MatchResult, lock/unlock,
                inc_lock_ref/dec_lock_ref, evict(num_tokens) (LRU leaves), snapshot() -> [RadixNodeView]
    (kvviz.analysis, built on the mirror)
    compare:    compare_prompts(tokens_a, tokens_b, block_size=16, hash_name=, seed=None, salt_a=,
                salt_b=) -> PromptComparison(blocks=[BlockComparison(status hit|miss|invalidated|
                partial, code, params, reused, ...)], common_prefix_tokens, reused_tokens, recompute_tokens,
                first_changed_token, num_tokens_a, num_tokens_b)
    trace:      load_trace(path) / parse_trace(obj) -> Trace; run_trace(trace) -> TraceRun
"""
