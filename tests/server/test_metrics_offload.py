"""/metrics with the host tier (--kv-offloading-size) over the real engine (a tiny random Llama): a prompt whose
prefix was evicted from the device pool but copied back from the host tier moves
``vllm:prompt_tokens_cached_by_source{source="host"}``, the external (connector) counters and
``prompt_tokens_by_source{external_kv_transfer}`` by its host hit, as vLLM 0.33.0's loggers count them."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

from prometheus_client.parser import text_string_to_metric_families

from kvviz.engine import EngineConfig, LLMEngine, SamplingParams
from kvviz.server.metrics import ServerMetrics

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
from test_metrics_vllm import delta, run, scrape  # noqa: E402
from tiny_llm import tiny_lm  # noqa: E402

BLOCK = 4
BLOCK_BYTES = BLOCK * 2 * 2 * 2 * 8 * 4  # 4 tokens x K and V x 2 layers x 2 kv heads x head_dim 8 x fp32


def test_a_host_hit_is_counted_by_source():
    engine = LLMEngine(tiny_lm(seed=5), EngineConfig(block_size=BLOCK, kv_cache_bytes=6 * BLOCK_BYTES,
                                                     max_num_batched_tokens=64,
                                                     kv_offloading_size=16 * BLOCK_BYTES / (1 << 30)))
    metrics = ServerMetrics(engine.stats, "tiny")
    unsubscribe = metrics.attach(SimpleNamespace(engine=engine))
    params = SamplingParams(max_tokens=1, ignore_eos=True)
    prompt = [3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]  # 2 full blocks, copied to the host tier after its step
    run(engine, "a", prompt, params)
    run(engine, "b", [20 + i for i in range(19)], params)  # 5 blocks: evicts a's from the 5-block device pool
    before = scrape(metrics)
    run(engine, "a2", prompt, params)
    after = scrape(metrics)
    unsubscribe()
    d = lambda name: delta(after, before, name)  # noqa: E731
    assert d("vllm:prompt_tokens_cached_total") == 8 and d("vllm:prefix_cache_hits_total") == 0
    assert d("vllm:prompt_tokens_cached_by_source_total[host]") == 8
    assert d("vllm:prompt_tokens_cached_by_source_total[device]") == 0
    assert d("vllm:external_prefix_cache_hits_total") == 8 and d("vllm:external_prefix_cache_queries_total") == 11
    assert d("vllm:prompt_tokens_by_source_total[external_kv_transfer]") == 8
    assert d("vllm:prompt_tokens_by_source_total[local_cache_hit]") == 0
    assert d("vllm:prompt_tokens_by_source_total[local_compute]") == 3
    info = next(f for f in text_string_to_metric_families(metrics.render().decode())
                if f.name == "vllm:cache_config_info").samples[0].labels
    assert info["kv_offloading_backend"] == "native" and float(info["kv_offloading_size"]) == 16 * BLOCK_BYTES / (1 << 30)
