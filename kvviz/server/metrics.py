"""``GET /metrics``: Prometheus text with vLLM 0.33.0's metric names (``vllm/v1/metrics/loggers.py``).

Engine-wide numbers (queues, KV usage, prefix-cache queries and hits, token and preemption totals) are
read from ``EngineStats`` at scrape time, so requests from the app's pages count too; the per-request
histograms (TTFT, end-to-end, queue time, time per output token) and ``vllm:request_success`` are
observed when an API request finishes. Labels are vLLM's ``model_name`` and ``engine`` ("0").
Each server has its own registry (no process-global state).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

# vLLM 0.33.0's bucket families (vllm/v1/metrics/buckets.py)
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
                   240.0, 480.0, 960.0, 1920.0, 7680.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
               40.0, 80.0)
CONTENT_TYPE = CONTENT_TYPE_LATEST
LABELS = ("model_name", "engine")
FINISH_REASONS = ("stop", "length", "abort")


class _EngineCollector:
    """vLLM's gauges and counters, read from the engine's stats at each scrape (none before it starts)."""

    def __init__(self, stats: Callable[[], Any | None], model: str) -> None:
        self._stats = stats
        self._labels = [model, "0"]

    def describe(self) -> list[Metric]:
        return []  # collected lazily: the engine may not exist yet

    def collect(self) -> Iterator[Metric]:
        s = self._stats()
        if s is None:
            return
        gauges = (("vllm:num_requests_running", "Requests in model execution batches.", s.num_running),
                  ("vllm:num_requests_waiting", "Requests waiting to be processed.", s.num_waiting),
                  ("vllm:kv_cache_usage_perc", "KV-cache usage (1 = every block in use).", s.kv_cache_usage))
        for name, doc, value in gauges:
            g = GaugeMetricFamily(name, doc, labels=LABELS)
            g.add_metric(self._labels, float(value))
            yield g
        counters = (("vllm:prefix_cache_queries", "Prefix-cache queries, in queried tokens.", s.prefix_cache_queries),
                    ("vllm:prefix_cache_hits", "Prefix-cache hits, in cached tokens.", s.prefix_cache_hits),
                    ("vllm:num_preemptions", "Preemptions in the engine.", s.num_preemptions),
                    ("vllm:prompt_tokens", "Prefill tokens processed.", s.prompt_tokens_total),
                    ("vllm:generation_tokens", "Generation tokens processed.", s.generation_tokens_total))
        for name, doc, value in counters:
            c = CounterMetricFamily(name, doc, labels=LABELS)
            c.add_metric(self._labels, float(value))
            yield c
        # vLLM's info gauge (always 1): the pool's size in its labels; num_gpu_blocks counts the null block
        info = GaugeMetricFamily("vllm:cache_config_info", "The engine's cache config.",
                                 labels=("block_size", "num_gpu_blocks", "enable_prefix_caching", "engine"))
        info.add_metric([str(s.block_size), str(s.num_blocks), "True", "0"], 1.0)
        yield info


class ServerMetrics:
    """The server's registry: the engine collector plus histograms observed per finished API request."""

    def __init__(self, stats: Callable[[], Any | None], model: str) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(_EngineCollector(stats, model))  # type: ignore[arg-type]
        labels = [model, "0"]

        def hist(name: str, doc: str, buckets: tuple[float, ...]) -> Any:
            return Histogram(name, doc, LABELS, registry=self.registry, buckets=buckets).labels(*labels)

        self.ttft = hist("vllm:time_to_first_token_seconds", "Time to first token (API requests).", TTFT_BUCKETS)
        self.e2e = hist("vllm:e2e_request_latency_seconds", "End-to-end request latency (API requests).",
                        LATENCY_BUCKETS)
        self.queue = hist("vllm:request_queue_time_seconds", "Time in the waiting queue (API requests).",
                          LATENCY_BUCKETS)
        self.tpot = hist("vllm:request_time_per_output_token_seconds", "Mean time per output token after the "
                         "first (API requests).", ITL_BUCKETS)
        success = Counter("vllm:request_success", "Finished API requests, by finish reason.",
                          (*LABELS, "finished_reason"), registry=self.registry)
        self.success = {r: success.labels(*labels, r) for r in FINISH_REASONS}
        self.rejected = Counter("kvviz:api_rejected_requests", "API requests refused with 429 (queue full).",
                                LABELS, registry=self.registry).labels(*labels)

    def observe(self, out: Any) -> None:
        """One finished API request's latencies (those the engine measured) and finish reason."""
        m = out.metrics
        for hist, value in ((self.ttft, m.ttft_s), (self.e2e, m.e2e_s), (self.queue, m.queue_wait_s),
                            (self.tpot, m.tpot_s)):
            if value is not None and value >= 0:
                hist.observe(value)
        counter = self.success.get(out.finish_reason or "")
        if counter is not None:
            counter.inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
