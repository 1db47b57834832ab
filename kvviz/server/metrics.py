"""``GET /metrics``: Prometheus text with vLLM 0.33.0's metric names, types, labels and buckets
(``vllm/v1/metrics/loggers.py``, ``buckets.py``); docs/SERVER.md lists every vLLM name and which ones kvviz has.

Engine-wide gauges and counters are read from ``EngineStats`` at scrape time; the histograms and
``vllm:request_success`` are observed from the engine's ``IterationStats`` after each step that gave
tokens (every request of the engine, as vLLM's, not only the API's). Labels are vLLM's ``model_name`` and
``engine`` ("0"). Each server has its own registry (no process-global state).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

if TYPE_CHECKING:  # the engine's loop and records, as types only
    from kvviz.engine import EngineLoop, LLMEngine
    from kvviz.engine.request import EngineStats
    from kvviz.engine.stats import FinishedRequestStats, IterationStats

# vLLM 0.33.0's bucket families (vllm/v1/metrics/buckets.py)
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
                   240.0, 480.0, 960.0, 1920.0, 7680.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
               40.0, 80.0)
ITERATION_TOKENS_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
PARAMS_N_BUCKETS = (1, 2, 5, 10, 20)
PREEMPTIONS_BUCKETS = (1, 2, 3, 4, 5, 10, 20)
CONTENT_TYPE = CONTENT_TYPE_LATEST
LABELS = ("model_name", "engine")
# vLLM's FinishReason values, all exposed; kvviz's engine finishes with stop or length (see docs/SERVER.md)
FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")
CACHE_HIT_SOURCES = ("device", "host", "p2p", "disk", "external_unspecified")  # cache_hit_source.py order
PROMPT_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")  # stats.PromptTokenStats
WAITING_REASONS = ("capacity", "deferred")


def request_tokens_buckets(max_model_len: int) -> tuple[int, ...]:
    """vLLM's ``request_tokens`` family: 1, 2, 5, 10, 20, 50, ... up to the model's length."""
    out, scale = [], 1
    while True:
        for m in (1, 2, 5):
            if m * scale > max_model_len:
                return tuple(out)
            out.append(m * scale)
        scale *= 10


class _EngineCollector:
    """vLLM's gauges and counters, read from the engine's stats at each scrape (none before it starts)."""

    def __init__(self, stats: Callable[[], EngineStats | None], model: str) -> None:
        self._stats = stats
        self._labels = [model, "0"]
        self.cache_labels: dict[str, str] = {}  # vLLM's CacheConfig fields kvviz has a value for

    def describe(self) -> list[Metric]:
        return []  # collected lazily: the engine may not exist yet

    def collect(self) -> Iterator[Metric]:
        s = self._stats()
        if s is None:
            return
        yield from self._gauges(s)
        yield from self._counters(s)
        # vLLM's info gauge (always 1): the cache config in its labels; num_gpu_blocks counts the null block
        labels = {"block_size": str(s.block_size), "num_gpu_blocks": str(s.num_blocks),
                  "enable_prefix_caching": "True", **self.cache_labels, "engine": "0"}
        info = GaugeMetricFamily("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
                                 labels=tuple(labels))
        info.add_metric(list(labels.values()), 1.0)
        yield info

    def _gauges(self, s: EngineStats) -> Iterator[Metric]:
        gauges = (("vllm:num_requests_running", "Requests in model execution batches.", s.num_running),
                  ("vllm:num_requests_waiting", "Requests waiting to be processed.", s.num_waiting),
                  ("vllm:kv_cache_usage_perc", "KV-cache usage (1 = every block in use).", s.kv_cache_usage))
        for name, doc, value in gauges:
            g = GaugeMetricFamily(name, doc, labels=LABELS)
            g.add_metric(self._labels, float(value))
            yield g
        # kvviz defers no waiting request (no LoRA budget, no KV transfer): every one waits for capacity
        yield self._labelled(GaugeMetricFamily, "vllm:num_requests_waiting_by_reason",
                             "Waiting requests by reason (capacity or deferred).", "reason",
                             {"capacity": s.num_waiting, "deferred": 0})
        yield self._labelled(GaugeMetricFamily, "vllm:engine_sleep_state", "Engine sleep state (kvviz never sleeps).",
                             "sleep_state", {"awake": 1, "weights_offloaded": 0, "discard_all": 0})

    def _counters(self, s: EngineStats) -> Iterator[Metric]:
        cached = s.prompt_tokens_cached_total
        cached_host = s.prompt_tokens_cached_host_total  # the host tier (--kv-offloading-size): kvviz's one connector
        counters = (("vllm:prefix_cache_queries", "Prefix-cache queries, in queried tokens.", s.prefix_cache_queries),
                    ("vllm:prefix_cache_hits", "Prefix-cache hits, in cached tokens.", s.prefix_cache_hits),
                    ("vllm:external_prefix_cache_queries", "KV-connector cache queries (kvviz: the host tier).",
                     s.external_prefix_cache_queries),
                    ("vllm:external_prefix_cache_hits", "KV-connector cache hits (kvviz: the host tier).",
                     s.external_prefix_cache_hits),
                    ("vllm:mm_cache_queries", "Multi-modal cache queries (kvviz is text only).", 0),
                    ("vllm:mm_cache_hits", "Multi-modal cache hits (kvviz is text only).", 0),
                    ("vllm:num_preemptions", "Preemptions in the engine.", s.num_preemptions),
                    ("vllm:prompt_tokens", "Prefill tokens processed.", s.prompt_tokens_total),
                    ("vllm:prompt_tokens_cached", "Cached prompt tokens (local + external).", cached),
                    ("vllm:generation_tokens", "Generation tokens processed.", s.generation_tokens_total))
        for name, doc, value in counters:
            c = CounterMetricFamily(name, doc, labels=LABELS)
            c.add_metric(self._labels, float(value))
            yield c
        by_source = {"local_compute": s.prompt_tokens_total - cached, "local_cache_hit": cached - cached_host,
                     "external_kv_transfer": cached_host}
        yield self._labelled(CounterMetricFamily, "vllm:prompt_tokens_by_source", "Prompt tokens by source.",
                             "source", by_source)
        hits = dict.fromkeys(CACHE_HIT_SOURCES, 0) | {"device": s.prefix_cache_hits,
                                                      "host": s.prefix_cache_hits_host}
        yield self._labelled(CounterMetricFamily, "vllm:prompt_tokens_cached_by_source",
                             "Prefix-cache hit tokens by the cache tier that supplied them (kvviz: device, host).",
                             "source", hits)

    def _labelled(self, kind: Any, name: str, doc: str, label: str, values: dict[str, int]) -> Metric:
        family = kind(name, doc, labels=(*LABELS, label))
        for key, value in values.items():
            family.add_metric([*self._labels, key], float(value))
        return family


class ServerMetrics:
    """The server's registry: the engine collector plus histograms observed from the engine's steps."""

    def __init__(self, stats: Callable[[], EngineStats | None], model: str) -> None:
        self.registry = CollectorRegistry()
        self._collector = _EngineCollector(stats, model)
        self.registry.register(self._collector)  # type: ignore[arg-type]
        self._labels = [model, "0"]
        hist = self._hist
        self.ttft = hist("vllm:time_to_first_token_seconds", "Time to first token in seconds.", TTFT_BUCKETS)
        self.itl = hist("vllm:inter_token_latency_seconds", "Inter-token latency in seconds.", ITL_BUCKETS)
        self.tpot = hist("vllm:request_time_per_output_token_seconds", "Mean time per output token after the "
                         "first, per request.", ITL_BUCKETS)
        self.e2e = hist("vllm:e2e_request_latency_seconds", "End-to-end request latency in seconds.",
                        LATENCY_BUCKETS)
        self.queue = hist("vllm:request_queue_time_seconds", "Time in the WAITING phase.", LATENCY_BUCKETS)
        self.inference = hist("vllm:request_inference_time_seconds", "Time in the RUNNING phase.", LATENCY_BUCKETS)
        self.prefill = hist("vllm:request_prefill_time_seconds", "Time in the PREFILL phase.", LATENCY_BUCKETS)
        self.decode = hist("vllm:request_decode_time_seconds", "Time in the DECODE phase.", LATENCY_BUCKETS)
        self.iteration = hist("vllm:iteration_tokens_total", "Tokens per engine step.", ITERATION_TOKENS_BUCKETS)
        self.preemptions = hist("vllm:request_num_preemptions", "Preemptions of a request.", PREEMPTIONS_BUCKETS)
        self.params_n = hist("vllm:request_params_n", "The n request parameter.", PARAMS_N_BUCKETS)
        self.token_hists: dict[str, Any] = {}  # vLLM's request_tokens family: made when max_model_len is known
        success = Counter("vllm:request_success", "Finished requests, by finish reason.",
                          (*LABELS, "finished_reason"), registry=self.registry)
        self.success = {r: success.labels(*self._labels, r) for r in FINISH_REASONS}
        # vLLM 0.33.0's frontend admission counter (labels model_name, reason; no engine label); kvviz has
        # no prefill-token limit, so its max_num_queued_tokens child stays 0
        admission = Counter("vllm:admission_rejections", "Requests refused with 503 by a queue limit, by reason.",
                            ("model_name", "reason"), registry=self.registry)
        admission.labels(model, "max_num_queued_tokens")
        self.rejected = admission.labels(model, "max_num_queued_reqs")

    def _hist(self, name: str, doc: str, buckets: Sequence[float]) -> Any:
        return Histogram(name, doc, LABELS, registry=self.registry, buckets=buckets).labels(*self._labels)

    def attach(self, loop: EngineLoop) -> Callable[[], None]:
        """Observe the engine of ``loop`` (once it exists): its steps, its length, its cache config; returns
        the unsubscribe."""
        engine = loop.engine
        self._collector.cache_labels = cache_config_labels(engine)
        if not self.token_hists:
            buckets = request_tokens_buckets(int(engine.max_model_len))
            for key, name, doc in TOKEN_HISTOGRAMS:
                self.token_hists[key] = self._hist(name, doc, buckets)
        return engine.subscribe_iteration_stats(self.record)

    def record(self, it: IterationStats) -> None:
        """One engine step's observations, as vLLM's ``PrometheusStatLogger.record``."""
        self.iteration.observe(it.num_prompt_computed + it.num_generation_tokens)
        for ttft in it.ttfts_s:
            self.ttft.observe(ttft)
        for itl in it.itls_s:
            self.itl.observe(itl)
        for f in it.finished:
            self._finished(f)

    def _finished(self, f: FinishedRequestStats) -> None:
        counter = self.success.get(f.finish_reason)
        if counter is not None:
            counter.inc()
        for hist, value in ((self.e2e, f.e2e_s), (self.queue, f.queued_s), (self.prefill, f.prefill_s),
                            (self.inference, f.inference_s), (self.decode, f.decode_s),
                            (self.preemptions, f.num_preemptions), (self.tpot, f.mean_time_per_output_token_s)):
            hist.observe(value)
        tokens = {"prefill_kv_computed": f.num_prompt_tokens - f.num_cached_tokens,
                  "prompt": f.num_prompt_tokens, "generation": f.num_generation_tokens,
                  "max_tokens": f.max_tokens_param}
        for key, value in tokens.items():
            if key in self.token_hists and (key != "max_tokens" or value):
                self.token_hists[key].observe(value)

    def observe_api_request(self, jobs: Sequence[tuple[str, int]]) -> None:
        """An API request whose every sequence finished: ``(engine request id, generated tokens)`` each.
        vLLM observes each parent request once: its ``n`` and its longest child; children are named
        ``{index}_{parent}`` (vLLM's naming, kept by the routes), a prompt with n = 1 is its own parent."""
        groups: dict[str, list[int]] = {}
        for request_id, tokens in jobs:
            child, _, parent = request_id.partition("_")
            groups.setdefault(parent if child.isdigit() and parent else request_id, []).append(tokens)
        for tokens in groups.values():
            self.params_n.observe(len(tokens))
            if "max_generation" in self.token_hists:
                self.token_hists["max_generation"].observe(max(tokens))

    def render(self) -> bytes:
        return generate_latest(self.registry)


TOKEN_HISTOGRAMS = (
    ("prompt", "vllm:request_prompt_tokens", "Prefill tokens per request."),
    ("generation", "vllm:request_generation_tokens", "Generation tokens per request."),
    ("max_generation", "vllm:request_max_num_generation_tokens", "Maximum requested generation tokens."),
    ("max_tokens", "vllm:request_params_max_tokens", "The max_tokens request parameter."),
    ("prefill_kv_computed", "vllm:request_prefill_kv_computed_tokens", "New KV tokens computed in prefill "
     "(cached tokens excluded)."),
)


def cache_config_labels(engine: LLMEngine) -> dict[str, str]:
    """vLLM's ``CacheConfig`` fields (``config/cache.py``) that kvviz's engine has a value for, as strings."""
    config = getattr(engine, "config", None)
    if config is None:
        return {}
    return {"cache_dtype": "auto",  # the K/V are kept in the model's dtype, vLLM's "auto"
            "prefix_caching_hash_algo": str(config.hash_name), "kv_cache_memory_bytes": str(config.kv_cache_bytes),
            "num_cpu_blocks": "None", "sliding_window": "None", "is_attention_free": "False",
            # vLLM's str() of the GiB (None: off) and its one backend kvviz follows
            "kv_offloading_size": str(getattr(config, "kv_offloading_size", None)), "kv_offloading_backend": "native"}
