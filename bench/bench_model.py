"""Model start-up and prefill throughput, measured in this run.

Keys: ``cold_start_s`` (fresh process, empty cache folder: de-quantise the GGUF and write the cache),
``warm_start_s`` (fresh process, cache present; median of 3), both timing ``load_model()`` inside the
child process (after ``import kvviz.model``, which imports torch; every import ``load_model`` triggers,
transformers' included, is inside the timing), plus the child processes' whole wall times and, for
comparison, ``warm_start_transformers_s`` (the same warm start with ``KVVIZ_BACKEND=transformers``);
``prefill_1024_ms`` and ``matmul_gflops`` from 5
interleaved rounds (best of each, medians beside them): ``prefill_gflops`` = 2 x per-token matmul
parameters x 1,024 tokens / time, and ``matmul_gflops`` = one decoder layer's seven projections as bare
``torch.nn.functional.linear`` calls at 1,024 tokens, same device and dtype.
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
WARM_RUNS = 3  # warm_start_s is their median
ROUNDS = 5  # interleaved prefill / matmul rounds; the best of each is compared

_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from kvviz.model import load_model
t1 = time.perf_counter()
lm = load_model()
t2 = time.perf_counter()
print("KVVIZ_BENCH " + json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "from_cache": lm.info.from_cache,
                                   "backend": lm.info.backend}))
"""


def _child_load(cache_dir: Path, backend: str = "auto") -> dict:
    """Run one fresh process that loads the default model with ``cache_dir``; its timings."""
    env = dict(os.environ, KVVIZ_CACHE_DIR=str(cache_dir), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               KVVIZ_BACKEND=backend, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
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


def _layer_matmuls(lm, tokens: int):
    """A callable running one decoder layer's projections (q, k, v, o, gate, up, down) as bare matmuls
    on ``tokens`` rows, and the FLOPs of one call."""
    import torch
    import torch.nn.functional as F

    device, dtype = lm.device, lm.torch_dtype
    layer = lm.model.model.layers[0]
    weights = [m.weight for m in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj,
                                  layer.self_attn.o_proj, layer.mlp.gate_proj, layer.mlp.up_proj,
                                  layer.mlp.down_proj)]
    x_in = torch.randn(tokens, lm.info.d_model, device=device, dtype=dtype)
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

    return run, flops


def _timed_ms(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000.0


def run(results: dict) -> None:
    # imported before anything imports torch: kvviz.model sets passive OpenMP waits first
    from kvviz.model import load_model, prefill

    torch = sys.modules["torch"]

    tmp = Path(tempfile.mkdtemp(prefix="kvviz-bench-"))
    saved_cache_dir = os.environ.get("KVVIZ_CACHE_DIR")
    try:
        cold = _child_load(tmp)
        warms = [_child_load(tmp) for _ in range(WARM_RUNS)]
        if cold["from_cache"] or not all(w["from_cache"] for w in warms):
            raise RuntimeError("cold start did not build the cache, or warm start did not use it")
        warm_s = statistics.median(w["load_s"] for w in warms)
        results["cold_start_s"] = round(cold["load_s"], 3)
        results["warm_start_s"] = round(warm_s, 3)
        results["cold_start_process_s"] = round(cold["process_s"], 3)
        results["warm_start_process_s"] = round(statistics.median(w["process_s"] for w in warms), 3)
        results["warm_vs_cold_x"] = round(cold["load_s"] / warm_s, 2)
        results["warm_start_backend"] = warms[0]["backend"]
        # for comparison: the same warm start through transformers' modeling stack
        results["warm_start_transformers_s"] = round(_child_load(tmp, "transformers")["load_s"], 3)

        os.environ["KVVIZ_CACHE_DIR"] = str(tmp)
        lm = load_model()
        info = lm.info
        ids = lm.tokenizer("The cache keeps keys and values of every token. " * 200)["input_ids"][:PREFILL_TOKENS]
        assert len(ids) == PREFILL_TOKENS
        last: dict = {}

        def one_prefill() -> None:
            # the decoder's own pass (bench_engine.py times the engine's), against bare matmuls of the same weights
            last["r"] = prefill(lm, token_ids=ids, max_tokens=PREFILL_TOKENS)

        layer_run, layer_flops = _layer_matmuls(lm, PREFILL_TOKENS)
        reps = 3

        def matmuls() -> None:
            for _ in range(reps):
                layer_run()

        one_prefill()  # warm-up
        matmuls()
        # Interleaved rounds, so a busy neighbour slows both measurements alike; best and median kept.
        prefill_ms, matmul_ms = [], []
        for _ in range(ROUNDS):
            prefill_ms.append(_timed_ms(one_prefill))
            matmul_ms.append(_timed_ms(matmuls))
        # Per-token matmul parameters: everything except the embedding table (a lookup, not a matmul;
        # with tied weights it is also the LM head, which prefill applies to the last token only).
        embedding = lm.model.get_input_embeddings().weight.numel()
        matmul_params = info.num_params - embedding
        prefill_flops = 2 * matmul_params * PREFILL_TOKENS
        results["device"] = info.device
        results["dtype"] = info.dtype
        results["torch_threads"] = torch.get_num_threads()
        results["prefill_1024_ms"] = round(min(prefill_ms), 1)
        results["prefill_1024_ms_median"] = round(statistics.median(prefill_ms), 1)
        results["prefill_flop_params"] = matmul_params
        results["prefill_gflops"] = round(prefill_flops / (min(prefill_ms) / 1000.0) / 1e9, 2)
        results["matmul_gflops"] = round(layer_flops * reps / (min(matmul_ms) / 1000.0) / 1e9, 2)
        results["matmul_gflops_median"] = round(layer_flops * reps / (statistics.median(matmul_ms) / 1000.0) / 1e9, 2)
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
