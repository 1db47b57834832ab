"""kvviz's engine on the embedded model (CPU fp32 here): decode speed against transformers' ``generate`` on
the same weights and prompt, 16 streams against one, cached against uncached TTFT, resident K/V bytes, and
process memory over a soak with random aborts.

Keys: ``decode_1_tok_s`` (one stream, 128 new tokens after a 256-token prompt: decode tokens / time of the
steps that only decode), ``hf_generate_tok_s`` (127 / (time of ``generate`` with 128 new tokens - time with
1), greedy, no EOS stop), the two alternated in ``ROUNDS`` rounds, medians, and their ratio
``decode_1_over_hf``; ``decode_16_tok_s`` (16 such streams at once) and ``decode_16_over_1``;
``ttft_uncached_1024_ms`` / ``ttft_cached_1008_of_1024_ms`` (a 1,024-token prompt whose first 1,008
tokens another prompt cached; medians) and ``ttft_cached_ratio``; ``kv_resident_bytes`` (the K/V tensors'
storage) beside ``kv_expected_bytes`` (num_blocks x block_size x bytes per token); ``soak_rss_growth_pct``
(RSS at the end of ``SOAK_REQUESTS`` requests, ``SOAK_IN_FLIGHT`` in flight, ~10 % aborted, over RSS after
the first ``SOAK_WARM``). ``weights_bytes`` / ``weights_read_ms``: the model's parameters (the tied
embedding once) and the time to read them all once (one sum over their flat copy, ``bench.membound``, the
process's threads, median of ``READS``): the memory bound of a one-stream decode step; ``decode_1_ms_per_token`` and
``decode_1_over_bound`` (time per token over that bound; reported, no target here).

The host tier (``--kv-offloading-size``), on an engine of ``OFFLOAD_DEVICE_BLOCKS`` device blocks and
``OFFLOAD_GIB`` of host memory: ``offload_load_ms_per_block`` (copy one 16-token block's K/V from the host tier
into a device block, all layers; median of ``OFFLOAD_LOADS``), ``offload_recompute_ms_per_block`` (a step that
computes one block's 16 tokens after a device-cached block; median of ``ROUNDS``) and their ratio
``offload_load_vs_recompute``; TTFT of a 1,024-token prompt whose first 1,008 tokens were evicted from the
device pool but are in the host tier (``ttft_host_1008_of_1024_ms``), against the same prompt fully
recomputed (``ttft_recomputed_1024_ms``) and with those 1,008 tokens on the device
(``ttft_device_1008_of_1024_ms``); ``ttft_host_over_recomputed``, ``ttft_host_over_device``. On a CPU-only
machine both tiers are host memory: the load is a memory copy, the recompute a forward pass.
"""

from __future__ import annotations

import os
import random
import statistics
import time

ROUNDS = 3
PROMPT_TOKENS = 256
NEW_TOKENS = 128
STREAMS = 16
TTFT_TOKENS, TTFT_CACHED = 1024, 1008
SOAK_REQUESTS, SOAK_IN_FLIGHT, SOAK_WARM = 2000, 64, 200
READS = 5
OFFLOAD_DEVICE_BLOCKS, OFFLOAD_GIB, OFFLOAD_LOADS = 80, 0.25, 20


def _say(what: str) -> None:
    print(f"[bench_engine] {time.strftime('%H:%M:%S')} {what} (load {os.getloadavg()[0]:.1f})", flush=True)


def _prompt(lm, n: int, salt: int) -> list[int]:
    """``n`` real-text token ids, different for each ``salt`` from the first token on."""
    text = f"Note {salt}. The cache keeps the keys and values of every token it has seen. " * (n // 8 + 8)
    ids = lm.tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(ids) >= n
    return ids[:n]


def _rss_bytes() -> int:
    """Resident set size of this process (Linux: /proc/self/statm)."""
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _decode_rate(engine, prompts: list[list[int]], params) -> float:
    """Decode tokens per second over the steps that only decode (every stream one token)."""
    engine.reset_prefix_cache()
    first = len(engine.steps)
    for i, ids in enumerate(prompts):
        engine.add_request(f"decode-{time.monotonic_ns()}-{i}", ids, params)
    while engine.has_unfinished_requests():
        engine.step()
    steps = [s for s in engine.steps[first:] if s.prefill_tokens == 0 and s.decode_tokens == len(prompts)]
    return sum(s.decode_tokens for s in steps) / sum(s.duration_s for s in steps)


def _hf_rate(hf, ids: list[int]) -> float:
    import torch
    from transformers import GenerationConfig

    def timed(new: int) -> float:
        config = GenerationConfig(max_new_tokens=new, min_new_tokens=new, do_sample=False, pad_token_id=0)
        config.eos_token_id = []
        x = torch.tensor([ids])
        start = time.perf_counter()
        with torch.inference_mode():
            hf.model.generate(x, generation_config=config, attention_mask=torch.ones_like(x))
        return time.perf_counter() - start

    return (NEW_TOKENS - 1) / (timed(NEW_TOKENS) - timed(1))


def _weights_read_ms(model) -> tuple[int, float]:
    """Bytes of the unique parameters and the median time (ms) to read them all once (``bench.membound``)."""
    from bench.membound import weight_read

    params = list({p.data_ptr(): p.detach() for p in model.parameters()}.values())
    read = weight_read(runs=READS, tensors=params)
    return read.nbytes, read.ms


def _ttft_ms(engine, ids: list[int], params) -> float:
    rid = f"ttft-{time.monotonic_ns()}"
    engine.add_request(rid, ids, params)
    ttft = None
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.request_id == rid and ttft is None and out.new_token_ids:
                ttft = out.metrics.ttft_s
    assert ttft is not None
    return ttft * 1000.0


def _soak(engine, lm, params_cls) -> tuple[float, int, int]:
    rng = random.Random(0)
    vocab = lm.info.vocab_size
    sent = finished = aborted = 0
    live: set[str] = set()
    rss_warm = 0
    while finished < SOAK_REQUESTS:
        while sent < SOAK_REQUESTS and len(live) < SOAK_IN_FLIGHT:
            rid = f"soak-{sent}"
            ids = [rng.randrange(1, vocab) for _ in range(rng.randrange(8, 48))]
            engine.add_request(rid, ids, params_cls(max_tokens=rng.randrange(1, 6), ignore_eos=True))
            live.add(rid)
            sent += 1
        for rid in [r for r in live if rng.random() < 0.02]:  # ~10 % of requests over their few steps
            engine.abort_request(rid)
            aborted += 1
        for out in engine.step():
            if out.finished:
                live.discard(out.request_id)
                finished += 1
                if finished == SOAK_WARM:
                    rss_warm = _rss_bytes()
    engine.pool.check_invariants()
    free = engine.pool.get_num_free_blocks()
    return 100.0 * (_rss_bytes() - rss_warm) / rss_warm, free, aborted


def run(results: dict) -> None:
    from kvviz.engine import EngineConfig, LLMEngine, SamplingParams
    from kvviz.model import load_model

    lm = load_model()
    hf = load_model(backend="transformers")
    engine = LLMEngine(lm, EngineConfig())
    params = SamplingParams(max_tokens=NEW_TOKENS, ignore_eos=True)
    one = _prompt(lm, PROMPT_TOKENS, 0)
    _decode_rate(engine, [one], SamplingParams(max_tokens=8, ignore_eos=True))  # warm-up
    _hf_rate(hf, one[:32])
    engine_rates, hf_rates, rates_16 = [], [], []
    for r in range(ROUNDS):  # alternated, so a busy neighbour slows both alike
        engine_rates.append(_decode_rate(engine, [one], params))
        hf_rates.append(_hf_rate(hf, one))
        rates_16.append(_decode_rate(engine, [_prompt(lm, PROMPT_TOKENS, s) for s in range(STREAMS)], params))
        _say(f"round {r + 1}: engine {engine_rates[-1]:.2f}, transformers {hf_rates[-1]:.2f}, "
             f"16 streams {rates_16[-1]:.2f} tok/s")
    d1, h1, d16 = (statistics.median(x) for x in (engine_rates, hf_rates, rates_16))
    results["decode_1_tok_s"] = round(d1, 2)
    results["decode_1_tok_s_runs"] = [round(x, 2) for x in engine_rates]
    results["hf_generate_tok_s"] = round(h1, 2)
    results["hf_generate_tok_s_runs"] = [round(x, 2) for x in hf_rates]
    results["decode_1_over_hf"] = round(d1 / h1, 3)
    results["decode_16_tok_s"] = round(d16, 2)
    results["decode_16_tok_s_runs"] = [round(x, 2) for x in rates_16]
    results["decode_16_over_1"] = round(d16 / d1, 2)
    nbytes, read_ms = _weights_read_ms(lm.model)
    _say(f"weights {nbytes / 1e6:.0f} MB read in {read_ms:.1f} ms")
    results["weights_bytes"] = nbytes
    results["weights_read_ms"] = round(read_ms, 2)
    results["decode_1_ms_per_token"] = round(1000.0 / d1, 2)
    results["decode_1_over_bound"] = round(1000.0 / d1 / read_ms, 2)

    first = SamplingParams(max_tokens=1)
    long = _prompt(lm, TTFT_TOKENS, 100)
    uncached, cached = [], []
    for r in range(ROUNDS):
        engine.reset_prefix_cache()
        uncached.append(_ttft_ms(engine, long, first))
        other = long[:TTFT_CACHED] + _prompt(lm, TTFT_TOKENS - TTFT_CACHED, 200 + r)
        cached.append(_ttft_ms(engine, other, first))  # its first 1,008 tokens are the previous prompt's
    _say(f"TTFT uncached {uncached} ms, cached {cached} ms")
    results["ttft_uncached_1024_ms"] = round(statistics.median(uncached), 1)
    results["ttft_cached_1008_of_1024_ms"] = round(statistics.median(cached), 1)
    results["ttft_cached_ratio"] = round(statistics.median(cached) / statistics.median(uncached), 4)

    mem = engine.memory
    results["kv_resident_bytes"] = sum(t.untyped_storage().nbytes() for t in (*mem.k, *mem.v))
    results["kv_expected_bytes"] = engine.num_blocks * engine.block_size * mem.layout.bytes_per_token
    results["kv_num_blocks"] = engine.num_blocks

    _say("soak")
    growth, free, aborted = _soak(engine, lm, SamplingParams)
    results["soak_requests"] = SOAK_REQUESTS
    results["soak_aborted"] = aborted
    results["soak_rss_growth_pct"] = round(growth, 2)
    results["soak_free_blocks_at_end"] = free
    results["soak_usable_blocks"] = engine.num_blocks - 1

    _say("host tier")
    _offload(results, lm)


def _offload(results: dict, lm) -> None:
    """The host tier's keys (see the module docstring)."""
    from kvviz.engine import EngineConfig, LLMEngine, SamplingParams

    info, bs = lm.info, 16
    block_bytes = 2 * info.num_layers * info.num_kv_heads * info.head_dim * info.element_size * bs
    engine = LLMEngine(lm, EngineConfig(block_size=bs, kv_cache_bytes=(OFFLOAD_DEVICE_BLOCKS + 1) * block_bytes,
                                        kv_offloading_size=OFFLOAD_GIB))
    first = SamplingParams(max_tokens=1)
    recompute, on_host, on_device, recomputed = [], [], [], []
    for r in range(ROUNDS):
        head = _prompt(lm, bs, 300 + r)
        _ttft_ms(engine, head + [head[0]], first)  # caches the head block on the device
        t0 = len(engine.steps)
        _ttft_ms(engine, head + _prompt(lm, bs + 1, 400 + r), first)  # computes one more block (+1 token)
        recompute.append(sum(s.duration_s for s in engine.steps[t0:]) * 1000.0)
        long = _prompt(lm, TTFT_TOKENS, 500 + r)
        _ttft_ms(engine, long, first)  # computed, stored to the host tier
        for k in range(2):  # two other long prompts push every one of its blocks out of the device pool
            _ttft_ms(engine, _prompt(lm, TTFT_TOKENS, 600 + 10 * r + k), first)
        other = long[:TTFT_CACHED] + _prompt(lm, TTFT_TOKENS - TTFT_CACHED, 700 + r)
        n0 = engine.stats().prefix_cache_hits_host
        on_host.append(_ttft_ms(engine, other, first))
        assert engine.stats().prefix_cache_hits_host - n0 == TTFT_CACHED, "the prefix was not a host hit"
        on_device.append(_ttft_ms(engine, long[:TTFT_CACHED] + _prompt(lm, TTFT_TOKENS - TTFT_CACHED, 800 + r),
                                  first))
        recomputed.append(_ttft_ms(engine, _prompt(lm, TTFT_TOKENS, 900 + r), first))
    loads, host, mem = [], engine.host, engine.memory
    saved = mem.copy_blocks_out([1])
    for i in range(OFFLOAD_LOADS):  # one stored host block into device block 1, as the engine loads a hit
        t0 = time.perf_counter()
        mem.copy_blocks_in([1], *host.read([i % host.pool.num_blocks]))
        loads.append((time.perf_counter() - t0) * 1000.0)
    mem.copy_blocks_in([1], *saved)
    _say(f"host tier: load {sorted(loads)[len(loads) // 2]:.3f} ms/block, recompute {recompute} ms; TTFT host "
         f"{on_host}, device {on_device}, recomputed {recomputed} ms")
    med = statistics.median
    results["offload_load_ms_per_block"] = round(med(loads), 4)
    results["offload_recompute_ms_per_block"] = round(med(recompute), 2)
    results["offload_load_vs_recompute"] = round(med(loads) / med(recompute), 4)
    results["ttft_host_1008_of_1024_ms"] = round(med(on_host), 1)
    results["ttft_device_1008_of_1024_ms"] = round(med(on_device), 1)
    results["ttft_recomputed_1024_ms"] = round(med(recomputed), 1)
    results["ttft_host_over_recomputed"] = round(med(on_host) / med(recomputed), 4)
    results["ttft_host_over_device"] = round(med(on_host) / med(on_device), 2)


TARGETS = [
    ("decode_1_over_hf", "decode_1_tok_s >= hf_generate_tok_s (same run)", lambda r: r["decode_1_over_hf"] >= 1.0),
    ("decode_16_over_1", "decode_16_tok_s / decode_1_tok_s >= 4", lambda r: r["decode_16_over_1"] >= 4.0),
    ("ttft_cached_ratio", "TTFT with 1,008 of 1,024 tokens cached <= 0.08 x uncached",
     lambda r: r["ttft_cached_ratio"] <= 0.08),
    ("kv_resident_bytes", "resident K/V bytes = num_blocks x block bytes",
     lambda r: r["kv_resident_bytes"] == r["kv_expected_bytes"]),
    ("soak_rss_growth_pct", "RSS grows < 5 % over the soak, every block free at the end",
     lambda r: r["soak_rss_growth_pct"] < 5.0 and r["soak_free_blocks_at_end"] == r["soak_usable_blocks"]),
    ("offload_load_vs_recompute", "loading a 16-token block from the host tier <= 0.05 x recomputing it (CPU fp32)",
     lambda r: r["offload_load_vs_recompute"] <= 0.05),
]
