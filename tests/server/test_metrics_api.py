"""/metrics through HTTP (over the engine-loop test double): vLLM's per-parent histograms
(``request_params_n``, ``request_max_num_generation_tokens``) count an API request once per prompt, with
its n; the text parses with prometheus_client's parser."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families
from server_http import post, request, sse_events


def scrape(url: str) -> dict[str, float]:
    status, _, data = request(url, "GET", "/metrics")
    assert status == 200
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(data.decode()):
        for s in family.samples:
            extra = "".join(f"[{v}]" for k, v in sorted(s.labels.items()) if k not in ("model_name", "engine"))
            out[s.name + extra] = s.value
    return out


def test_n_and_prompts_observed_once_per_parent(served):
    s = served()
    before = scrape(s.url)
    status, body = post(s.url, "/v1/completions", {"prompt": ["one prompt", "another"], "n": 3,
                                                    "temperature": 0.7, "max_tokens": 4})
    assert status == 200 and len(body["choices"]) == 6
    after = scrape(s.url)
    d = lambda name: after.get(name, 0) - before.get(name, 0)  # noqa: E731
    assert d("vllm:request_params_n_count") == 2 and d("vllm:request_params_n_sum") == 6
    assert d("vllm:request_params_n_bucket[5.0]") == 2 and d("vllm:request_params_n_bucket[2.0]") == 0
    assert d("vllm:request_max_num_generation_tokens_count") == 2
    assert d("vllm:request_max_num_generation_tokens_sum") == 8
    # every child is a finished request of the engine
    assert d("vllm:request_success_total[length]") == 6 and d("vllm:request_generation_tokens_sum") == 24
    assert d("vllm:request_params_max_tokens_sum") == 24


def test_a_streamed_request_with_n_1(served):
    s = served()
    before = scrape(s.url)
    status, headers, data = request(s.url, "POST", "/v1/completions",
                                    {"prompt": "streamed", "max_tokens": 3, "stream": True})
    assert status == 200 and sse_events(data)[-1] == "[DONE]"
    after = scrape(s.url)
    assert after["vllm:request_params_n_sum"] - before.get("vllm:request_params_n_sum", 0) == 1
    assert after["vllm:request_max_num_generation_tokens_sum"] - \
        before.get("vllm:request_max_num_generation_tokens_sum", 0) == 3
    assert after["vllm:iteration_tokens_total_count"] > before.get("vllm:iteration_tokens_total_count", 0)
