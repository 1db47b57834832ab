"""Model start-up and prefill throughput, measured in this run.

Keys: ``cold_start_s`` (fresh process, empty cache folder: de-quantise the GGUF and write the cache),
``warm_start_s`` (fresh process, cache present), both timing ``load_model()`` inside the child
process (after ``import kvviz.model``, which imports torch), plus the child processes' whole wall
times; ``prefill_1024_ms`` (median of 3 after one warm-up); ``prefill_gflops`` (2 x per-token
matmul parameters x tokens / time) and ``matmul_gflops`` (the same layer's seven projections as plain
``torch.nn.functional.linear`` calls at 1,024 tokens, same device and dtype).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PREFILL_TOKENS = 1024

_CHILD = r"""
import json, time
t0 = time.perf_counter()
from kvviz.model import load_model
t1 = time.perf_counter()
lm = load_model()
t2 = time.perf_counter()
print("KVVIZ_BENCH " + json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "from_cache": lm.info.from_cache}))
"""


def _child_load(cache_dir: Path) -> dict:
    """Run one fresh process that loads the default model with ``cache_dir``; its timings."""
    env = dict(os.environ, KVVIZ_CACHE_DIR=str(cache_dir), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("KVVIZ_MODEL", None)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _CHILD], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=900)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"child load failed: {proc.stderr.strip().splitlines()[-1:]}")
    line = next(x for x in proc.stdout.splitlines() if x.startswith("KVVIZ_BENCH "))
    out = json.loads(line.removeprefix("KVVIZ_BENCH "))
    out["process_s"] = wall
    return out


def _median_ms(fn, repeats: int = 3) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(times)


def _matmul_gflops(lm, tokens: int) -> tuple[float, float]:
    """GFLOP/s of one decoder layer's projections (q, k, v, o, gate, up, down) as bare matmuls."""
    import torch
    import torch.nn.functional as F

    info = lm.info
    device, dtype = lm.device, lm.torch_dtype
    layer = lm.model.model.layers[0]
    weights = [m.weight for m in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj,
                                  layer.self_attn.o_proj, layer.mlp.gate_proj, layer.mlp.up_proj,
                                  layer.mlp.down_proj)]
    x_in = torch.randn(tokens, info.d_model, device=device, dtype=dtype)
    x_attn = torch.randn(tokens, weights[3].shape[1], device=device, dtype=dtype)
    x_mlp = torch.randn(tokens, weights[6].shape[1], device=device, dtype=dtype)
    inputs = [x_in, x_in, x_in, x_attn, x_in, x_in, x_mlp]
    flops = sum(2 * tokens * w.shape[0] * w.shape[1] for w in weights)

    def run() -> None:
        with torch.inference_mode():
            for x, w in zip(inputs, weights, strict=True):
                F.linear(x, w)
            if device.type == "cuda":
                torch.cuda.synchronize()

    repeats = 10
    ms = _median_ms(lambda: [run() for _ in range(repeats)])
    return flops * repeats / (ms / 1000.0) / 1e9, flops


def run(results: dict) -> None:
    import torch

    tmp = Path(tempfile.mkdtemp(prefix="kvviz-bench-"))
    saved_cache_dir = os.environ.get("KVVIZ_CACHE_DIR")
    try:
        cold = _child_load(tmp)
        warm = _child_load(tmp)
        if cold["from_cache"] or not warm["from_cache"]:
            raise RuntimeError("cold start did not build the cache, or warm start did not use it")
        results["cold_start_s"] = round(cold["load_s"], 3)
        results["warm_start_s"] = round(warm["load_s"], 3)
        results["cold_start_process_s"] = round(cold["process_s"], 3)
        results["warm_start_process_s"] = round(warm["process_s"], 3)
        results["warm_vs_cold_x"] = round(cold["load_s"] / warm["load_s"], 2)

        os.environ["KVVIZ_CACHE_DIR"] = str(tmp)
        from kvviz.model import load_model, prefill

        lm = load_model()
        info = lm.info
        ids = lm.tokenizer("The cache keeps keys and values of every token. " * 200)["input_ids"][:PREFILL_TOKENS]
        assert len(ids) == PREFILL_TOKENS
        last: dict = {}

        def once() -> None:
            last["r"] = prefill(lm, token_ids=ids, max_tokens=PREFILL_TOKENS)

        ms = _median_ms(once)
        # Per-token matmul parameters: everything except the embedding table (a lookup, not a matmul;
        # with tied weights it is also the LM head, which prefill applies to the last token only).
        embedding = lm.model.get_input_embeddings().weight.numel()
        matmul_params = info.num_params - embedding
        results["device"] = info.device
        results["dtype"] = info.dtype
        results["torch_threads"] = torch.get_num_threads()
        results["prefill_1024_ms"] = round(ms, 1)
        results["prefill_1024_ms_forward_only"] = round(last["r"].prefill_ms, 1)
        results["prefill_flop_params"] = matmul_params
        results["prefill_gflops"] = round(2 * matmul_params * PREFILL_TOKENS / (ms / 1000.0) / 1e9, 2)
        gflops, _ = _matmul_gflops(lm, PREFILL_TOKENS)
        results["matmul_gflops"] = round(gflops, 2)
        results["prefill_vs_matmul"] = round(results["prefill_gflops"] / results["matmul_gflops"], 3)
        results["kv_bytes_per_token_measured"] = last["r"].kv_bytes_per_token
    finally:
        if saved_cache_dir is None:
            os.environ.pop("KVVIZ_CACHE_DIR", None)
        else:
            os.environ["KVVIZ_CACHE_DIR"] = saved_cache_dir
        shutil.rmtree(tmp, ignore_errors=True)


TARGETS = [
    ("warm_start_s", "warm start at least 10x faster than cold start",
     lambda r: r["cold_start_s"] >= 10 * r["warm_start_s"]),
    ("prefill_gflops", "prefill at least 50% of the matmul throughput",
     lambda r: r["prefill_gflops"] >= 0.5 * r["matmul_gflops"]),
]
