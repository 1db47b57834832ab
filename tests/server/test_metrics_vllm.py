"""/metrics over the real engine (a tiny random Llama): each of vLLM 0.33.0's metrics that kvviz has moves by
the amount vLLM's rules give, and the text parses with prometheus_client's own parser."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kvviz.engine import EngineConfig, LLMEngine, SamplingParams
from kvviz.server.metrics import ServerMetrics, request_tokens_buckets

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
from tiny_llm import tiny_lm  # noqa: E402

BLOCK = 4


def _key(name: str, labels: dict[str, str]) -> str:
    extra = {k: v for k, v in labels.items() if k not in ("model_name", "engine", "le")}
    return name + "".join(f"[{v}]" for _, v in sorted(extra.items()))


def scrape(metrics: ServerMetrics) -> dict[str, float]:
    """Every sample of the text /metrics serves (buckets apart), keyed by name and extra label values."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for s in family.samples:
            if not s.name.endswith("_bucket") and not s.name.endswith("_created"):
                out[_key(s.name, s.labels)] = s.value
    return out


def delta(after: dict[str, float], before: dict[str, float], name: str) -> float:
    return after.get(name, 0.0) - before.get(name, 0.0)


@pytest.fixture
def served_engine():
    engine = LLMEngine(tiny_lm(seed=5), EngineConfig(block_size=BLOCK, kv_cache_bytes=64 * 4 * 256,
                                                     max_num_batched_tokens=64))
    metrics = ServerMetrics(engine.stats, "tiny")
    unsubscribe = metrics.attach(SimpleNamespace(engine=engine))
    yield engine, metrics
    unsubscribe()


def run(engine: LLMEngine, rid: str, prompt: list[int], params: SamplingParams) -> None:
    engine.add_request(rid, prompt, params)
    while engine.has_unfinished_requests():
        engine.step()


def test_a_request_moves_each_metric_by_its_amount(served_engine):
    engine, metrics = served_engine
    warm = [3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
    run(engine, "warm", warm, SamplingParams(max_tokens=2, ignore_eos=True))
    before = scrape(metrics)
    prompt = warm[:8] + [40, 41, 42]  # its first 2 full blocks are cached: H = 8 of P = 11
    P, H, G, MAX = len(prompt), 8, 5, 5
    run(engine, "r", prompt, SamplingParams(max_tokens=MAX, ignore_eos=True))
    after = scrape(metrics)
    d = lambda name: delta(after, before, name)  # noqa: E731
    assert d("vllm:prompt_tokens_total") == P and d("vllm:generation_tokens_total") == G
    assert d("vllm:prompt_tokens_cached_total") == H
    assert d("vllm:prompt_tokens_by_source_total[local_cache_hit]") == H
    assert d("vllm:prompt_tokens_by_source_total[local_compute]") == P - H
    assert d("vllm:prompt_tokens_by_source_total[external_kv_transfer]") == 0
    assert d("vllm:prompt_tokens_cached_by_source_total[device]") == H == d("vllm:prefix_cache_hits_total")
    assert d("vllm:prompt_tokens_cached_by_source_total[host]") == 0
    assert d("vllm:request_prompt_tokens_sum") == P and d("vllm:request_prompt_tokens_count") == 1
    assert d("vllm:request_generation_tokens_sum") == G
    assert d("vllm:request_prefill_kv_computed_tokens_sum") == P - H
    assert d("vllm:request_params_max_tokens_sum") == MAX
    assert d("vllm:request_num_preemptions_count") == 1 and d("vllm:request_num_preemptions_sum") == 0
    assert d("vllm:request_success_total[length]") == 1 and d("vllm:request_success_total[stop]") == 0
    # one step per token (the prompt's 3 new tokens fit one step): P - H computed + G generated
    assert d("vllm:iteration_tokens_total_count") == G and d("vllm:iteration_tokens_total_sum") == P - H + G
    assert d("vllm:time_to_first_token_seconds_count") == 1 and d("vllm:inter_token_latency_seconds_count") == G - 1
    for name in ("e2e_request_latency", "request_queue_time", "request_prefill_time", "request_decode_time",
                 "request_inference_time", "request_time_per_output_token"):
        assert d(f"vllm:{name}_seconds_count") == 1, name
    # vLLM's phases: inference = prefill + decode; decode = the inter-token latencies; tpot = decode / (G - 1)
    prefill, decode = d("vllm:request_prefill_time_seconds_sum"), d("vllm:request_decode_time_seconds_sum")
    assert d("vllm:request_inference_time_seconds_sum") == pytest.approx(prefill + decode, abs=1e-9)
    assert d("vllm:inter_token_latency_seconds_sum") == pytest.approx(decode, abs=1e-9)
    assert d("vllm:request_time_per_output_token_seconds_sum") == pytest.approx(decode / (G - 1), abs=1e-9)
    e2e = d("vllm:e2e_request_latency_seconds_sum")
    assert e2e >= d("vllm:request_queue_time_seconds_sum") + d("vllm:request_inference_time_seconds_sum") - 1e-9
    assert d("vllm:time_to_first_token_seconds_sum") <= e2e


def test_stop_abort_and_gauges(served_engine):
    engine, metrics = served_engine
    before = scrape(metrics)
    run(engine, "s", [5, 6, 7], SamplingParams(max_tokens=8, stop_token_ids=tuple(range(61))))  # stops at once
    engine.add_request("a", [9, 10, 11], SamplingParams(max_tokens=8, ignore_eos=True))
    engine.add_request("w", [9, 10, 12], SamplingParams(max_tokens=8, ignore_eos=True))
    waiting = scrape(metrics)
    assert waiting["vllm:num_requests_waiting_by_reason[capacity]"] == 2 == waiting["vllm:num_requests_waiting"]
    assert waiting["vllm:num_requests_waiting_by_reason[deferred]"] == 0
    engine.step()
    engine.abort_request("a")  # a client's abort: vLLM 0.33.0 records no finished request for it
    engine.abort_request("w")
    while engine.has_unfinished_requests():
        engine.step()
    after = scrape(metrics)
    assert delta(after, before, "vllm:request_success_total[stop]") == 1
    for reason in ("length", "abort", "error", "repetition"):
        assert delta(after, before, f"vllm:request_success_total[{reason}]") == 0, reason
    assert delta(after, before, "vllm:e2e_request_latency_seconds_count") == 1
    assert delta(after, before, "vllm:request_prefill_time_seconds_count") == 1
    # the aborted pair's prompts were computed in the step before the abort: counted with their first token
    assert delta(after, before, "vllm:prompt_tokens_total") == 3 + 3 + 3
    assert after["vllm:engine_sleep_state[awake]"] == 1


def test_preemptions_per_request(served_engine):
    engine, metrics = served_engine
    small = LLMEngine(engine.lm, EngineConfig(block_size=BLOCK, kv_cache_bytes=engine.kv_cache_bytes * 5 // 64,
                                              max_num_batched_tokens=64))
    m = ServerMetrics(small.stats, "tiny")
    m.attach(SimpleNamespace(engine=small))
    for i in range(3):
        small.add_request(f"p{i}", [3 + i, 4, 5], SamplingParams(max_tokens=8, ignore_eos=True))
    while small.has_unfinished_requests():
        small.step()
    out = scrape(m)
    assert out["vllm:num_preemptions_total"] > 0
    assert out["vllm:request_num_preemptions_sum"] == out["vllm:num_preemptions_total"]
    assert out["vllm:request_num_preemptions_count"] == 3 == out["vllm:request_success_total[length]"]
    assert out["vllm:prompt_tokens_total"] == 9  # a preempted prompt's recompute is not counted again


def test_buckets_labels_and_info(served_engine):
    engine, metrics = served_engine
    run(engine, "x", [3, 4, 5], SamplingParams(max_tokens=2, ignore_eos=True))
    families = {f.name: f for f in text_string_to_metric_families(metrics.render().decode())}
    bounds = sorted({float(s.labels["le"]) for s in families["vllm:request_prompt_tokens"].samples
                     if s.name.endswith("_bucket") and s.labels["le"] != "+Inf"})
    assert bounds == [float(b) for b in request_tokens_buckets(engine.max_model_len)]
    assert request_tokens_buckets(100) == (1, 2, 5, 10, 20, 50, 100)
    assert families["vllm:iteration_tokens_total"].type == "histogram"
    assert families["vllm:prompt_tokens_cached"].type == "counter"
    info = families["vllm:cache_config_info"].samples[0].labels
    assert info["block_size"] == str(BLOCK) and info["num_gpu_blocks"] == str(engine.num_blocks)
    assert info["prefix_caching_hash_algo"] == "sha256" and info["enable_prefix_caching"] == "True"
    assert info["cache_dtype"] == "auto" and info["engine"] == "0"
    sources = {s.labels["source"] for s in families["vllm:prompt_tokens_cached_by_source"].samples}
    assert sources == {"device", "host", "p2p", "disk", "external_unspecified"}
    for family in families.values():
        for s in family.samples:
            if "model_name" in s.labels:  # vLLM's admission counter is the API server's: no engine label
                admission = family.name.startswith("vllm:admission_rejections")
                assert s.labels["model_name"] == "tiny" and s.labels.get("engine") == (None if admission else "0")


def test_arrival_before_the_engine_added_it(served_engine):
    """A submit waits for the running step: TTFT and e2e run from arrival, the queue time from the add."""
    import time

    engine, metrics = served_engine
    before = scrape(metrics)
    engine.add_request("late", [3, 4, 5], SamplingParams(max_tokens=2, ignore_eos=True),
                       arrival_time=time.monotonic() - 30.0)
    while engine.has_unfinished_requests():
        engine.step()
    after = scrape(metrics)
    assert delta(after, before, "vllm:time_to_first_token_seconds_sum") >= 30.0
    assert delta(after, before, "vllm:e2e_request_latency_seconds_sum") >= 30.0
    assert delta(after, before, "vllm:request_queue_time_seconds_sum") < 30.0
