"""EngineLoop: streams from several threads get every delta and one finished output; abort ends a stream."""

from __future__ import annotations

import threading

from tiny_llm import greedy_reference, tiny_lm

from kvviz.engine import EngineConfig, EngineLoop, LLMEngine, SamplingParams


def test_streams_from_threads_and_abort():
    lm = tiny_lm(seed=3)
    loop = EngineLoop(LLMEngine(lm, EngineConfig(block_size=4, kv_cache_bytes=64 * 4 * 256)))
    try:
        prompts = [[1 + i, 2, 3, 4, 5, 6 + i] for i in range(4)]
        results: dict[int, list] = {}

        def client(i: int) -> None:
            results[i] = list(loop.submit(f"t{i}", prompts[i], SamplingParams(max_tokens=12, ignore_eos=True)))

        threads = [threading.Thread(target=client, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        for i, outs in results.items():
            assert outs[-1].finished and sum(len(o.new_token_ids) for o in outs) == 12
            assert outs[-1].token_ids == greedy_reference(lm, prompts[i], 12)
            assert "".join(o.delta_text for o in outs) == outs[-1].text
        stream = loop.submit("long", [7, 8, 9], SamplingParams(max_tokens=4000, ignore_eos=True))
        first = next(iter(stream))
        assert not first.finished
        stream.abort()
        assert stream.result().finish_reason == "abort"
        assert loop.stats().num_running == 0
        assert loop.call(lambda e: e.pool.get_num_free_blocks()) == loop.engine.num_blocks - 1
    finally:
        loop.close()
