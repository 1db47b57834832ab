"""The peer section of docs/BENCHMARKS.md, generated from ``peer-results.json`` (``make peer`` writes it;
``bench.report`` appends this section whenever it renders the page). Nothing here is typed by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.peer_servers import ROOT

RESULTS = ROOT / "peer-results.json"

ROWS = [  # key, label, unit scale, unit
    ("decode_1_tok_s", "one stream: decode tok/s (256-token prompt, 128 new)", 1.0, ""),
    ("total_16_tok_s", "16 concurrent streams: total tok/s", 1.0, ""),
    ("decode_16_per_stream_tok_s", "16 streams: decode tok/s per stream (median)", 1.0, ""),
    ("ttft_16_median_s", "16 streams: median TTFT", 1.0, " s"),
    ("ttft_1024_uncached_s", "TTFT, 1,024-token prompt, uncached", 1.0, " s"),
    ("ttft_1024_cached_992_s", "TTFT, same length with 992 tokens cached", 1.0, " s"),
    ("ms_per_token_1", "one stream: ms per output token", 1.0, " ms"),
]


def _num(value: float, unit: str) -> str:
    return f"{value:,.3g}{unit}" if value < 100 else f"{value:,.0f}{unit}"


def _target(key: str, ratio: float | None) -> str:
    if ratio is None:
        return ""
    from bench.peer_speed import RATIO_KEYS

    higher = RATIO_KEYS.get(key)
    if higher is None:
        return ""
    met = ratio >= 1.0 if higher else ratio <= 1.0
    return f"{'>=' if higher else '<='} 1.0: {'met' if met else 'NOT met'}"


def _run_table(label: str, run: dict[str, Any], settings: str) -> list[str]:
    figs, ratios, bound = run["figures"], run["ratios_kvviz_over_vllm"], run["memory_bound"]
    load = f"{run['load_start'][0]} -> {run['load_end'][0]}" if run.get("load_start") else "?"
    lines = ["", f"### {label}", "", f"{settings}. 1-minute load average {load}.", "",
             "| | vLLM-CPU | kvviz | kvviz / vLLM | target |", "|---|---|---|---|---|"]
    for key, text, scale, unit in ROWS:
        v, k = figs["vllm"].get(key), figs["kvviz"].get(key)
        if v is None or k is None:
            continue
        ratio = ratios.get(key)
        lines.append(f"| {text} | {_num(v * scale, unit)} | {_num(k * scale, unit)} | "
                     f"{'' if ratio is None else f'{ratio:.2f}x'} | {_target(key, ratio)} |")
    cores = [(kind, figs["vllm"].get(f"cores_self_{kind}"), figs["kvviz"].get(f"cores_self_{kind}"),
              figs["vllm"].get(f"cores_other_{kind}"), figs["kvviz"].get(f"cores_other_{kind}"))
             for kind in ("one_stream", "16_streams", "TTFT")]
    if all(c[1] is not None for c in cores):
        lines += ["", "CPU cores each engine's processes used while it was measured (in brackets: the other "
                  "engine, idle, meanwhile): " + "; ".join(
                      f"{kind.replace('_', ' ')}: vLLM {sv:.2f} (kvviz {vo:.2f}), kvviz {sk:.2f} (vLLM {ko:.2f})"
                      for kind, sv, sk, vo, ko in cores) + "."]
    over = bound["ms_per_token_over_read"]
    dtype = {"float32": "fp32", "bfloat16": "bf16"}.get(run.get("dtype", "float32"), run.get("dtype"))
    lines += ["", f"Memory bound: reading the {bound['weights_bytes'] / 1e6:,.0f} MB of {dtype} weights once took "
              f"{bound['weights_read_ms']} ms ({_read_when(bound)}, {bound['threads']} threads, "
              f"{bound['weights_read_gb_s']} GB/s); one stream's time per output token is "
              f"{over.get('vllm')}x that on vLLM and {over.get('kvviz')}x on kvviz (target: kvviz within 2x)."]
    return lines


def _read_when(bound: dict[str, Any]) -> str:
    """How the bound was read: the median of the reads taken beside the one-stream runs, with their spread."""
    reads = bound.get("weights_read_ms_runs") or []
    if len(reads) < 2:
        return "median"
    return (f"median of {len(reads)} reads, one just before each one-stream run, "
            f"{min(reads)}-{max(reads)} ms")


def _agreement(agreement: dict[str, Any]) -> list[str]:
    c = agreement["checks"]

    def ok(name: str) -> str:
        return "equal" if c[name]["equal"] else "**DIFFERENT**"

    hashes = c["first_prompt_hashes"]
    return ["", "### Agreement (exact)", "",
            f"Prompts of {', '.join(map(str, agreement['prompt_tokens']))} tokens (the first two share "
            f"{agreement['shared_tokens']}; the third repeats the first), {agreement['new_tokens']} greedy tokens "
            "each, through the same streaming client:", "",
            "| check | vLLM-CPU | kvviz | |", "|---|---|---|---|",
            f"| greedy answers (text, token count; the first answer's ids in the KV events) | "
            f"{c['greedy_tokens']['completion_tokens'][0]} | {c['greedy_tokens']['completion_tokens'][1]} | "
            f"{ok('greedy_tokens')} |",
            f"| `usage.prompt_tokens_details.cached_tokens` | {c['cached_tokens']['vllm']} | "
            f"{c['cached_tokens']['kvviz']} | {ok('cached_tokens')} |",
            f"| the first prompt's {len(hashes['kvviz_hash'])} block hashes in KV events vs `kvviz hash` | "
            f"{len(hashes['vllm_events'])} | {len(hashes['kvviz_events'])} | {ok('first_prompt_hashes')} |",
            f"| KV events, field for field | {c['events']['vllm']} events | {c['events']['kvviz']} events | "
            f"{ok('events')} |",
            f"| /metrics prefix-cache queries / hits | {c['prefix_counters']['vllm']['queries']:.0f} / "
            f"{c['prefix_counters']['vllm']['hits']:.0f} | {c['prefix_counters']['kvviz']['queries']:.0f} / "
            f"{c['prefix_counters']['kvviz']['hits']:.0f} | {ok('prefix_counters')} |"]


def _watch_listen(w: dict[str, Any]) -> list[str]:
    """What ``kvviz watch --listen`` heard from a real vLLM that connected to it."""
    if w.get("exit") != 0:
        return ["", "### `kvviz watch --listen` against vLLM", "",
                f"**FAILED**: watch exited with {w.get('exit')} ({w.get('error', '')})."]
    verdict = "heard" if w["passed"] else "**NOT heard as required**"
    return ["", "### `kvviz watch --listen` against vLLM", "",
            f"A vLLM of its own, its KV-event endpoint `{w['listen']}` (a specific address: its PUB connects) and "
            f"its replay ROUTER on `{w['replay_endpoint']}`; the first prompt ({w['first_prompt_blocks']} full "
            "blocks) sent before `kvviz watch --listen` started, then a new prompt every few seconds while it "
            f"ran ({w['live_requests']} sent). Watch {verdict}: {w['batches']} batches, {w['replayed']} of them "
            f"replayed, {w['batches'] - w['replayed']} live, {w['missed']} missed, {w['cached_blocks']} blocks cached; the first prompt's blocks held: "
            f"{w['prompt_cached_blocks']} of {w['prompt_blocks']}."]


def section(path: Path = RESULTS) -> str:
    """The markdown section for ``path``, or an empty string when no peer run was recorded."""
    if not path.is_file():
        return ""
    data = json.loads(path.read_text(encoding="utf-8"))
    m = data["machine"]
    s = data["settings"]
    lines = ["", "## Peer: kvviz beside vLLM-CPU (`make peer`)", "",
             f"Generated from [`peer-results.json`](../peer-results.json), run {data['started']} -> "
             f"{data['finished']} on {m['cpu']} ({m['cores']} cores, {m['memory_gib']} GiB), load average "
             f"{data['load_start'][0]} at the start, {data['load_end'][0]} at the end (the machine was shared). "
             f"Both engines serve kvviz's SmolLM2-135M folder on 127.0.0.1: {data['vllm']} and `kvviz serve`, "
             f"block size {s['block_size']}, {s['num_blocks']} KV blocks, {s['dtype']}, max length "
             f"{s['max_model_len']}, prefix caching and KV events on. Every figure is the median of "
             f"{s['rounds']} runs, the two engines interleaved. Starting both engines took "
             + ", ".join(f"{v:g} s ({k})" for k, v in data.get("start_s", {}).items())
             + " (vLLM compiles its model at each start). How to run it: "
             "[DEVELOPMENT.md](DEVELOPMENT.md#the-peer-lane)."]
    if data.get("agreement"):
        lines += _agreement(data["agreement"])
    if data.get("watch_listen"):
        lines += _watch_listen(data["watch_listen"])
    labels = {"defaults": ("Each engine at its defaults", s["defaults"])}
    for name, run in data["runs"].items():
        title, text = labels.get(name, (f"Both on the same cores and threads ({run['threads']})", s["same"]))
        if run.get("dtype", "float32") != "float32":
            title, text = f"Both in {run['dtype']} on the same cores and threads ({run['threads']})", s.get("bf16", "")
        lines += _run_table(title, run, text)
    return "\n".join(lines + GPU_RECIPE) + "\n"


#: how to take the same figures against vLLM 0.33.0 on a GPU machine (not run by ``make peer``: no GPU here)
GPU_RECIPE = [
    "", "### The same figures on a GPU machine (a recipe)", "",
    "`make peer` runs both engines on this CPU. On a machine with an NVIDIA GPU and a network, the same client, "
    "prompts and rounds compare `vllm==0.33.0` on CUDA with `kvviz serve` on the same GPU "
    "(`bench/peer_external.py`; no agreement tests, no CPU accounting, no memory bound there):", "",
    "```bash",
    "python -c 'from bench.peer_servers import model_folders; print(*model_folders())'  # TOKENIZER MODEL folders",
    "python3.11 -m venv ~/vllm-cuda && ~/vllm-cuda/bin/pip install vllm==0.33.0",
    "~/vllm-cuda/bin/python -m vllm.entrypoints.openai.api_server --model MODEL --tokenizer TOKENIZER \\",
    "    --served-model-name HuggingFaceTB/SmolLM2-135M-Instruct --host 127.0.0.1 --port 8100 --dtype float32 \\",
    "    --block-size 32 --num-gpu-blocks-override 728 --max-model-len 2048 --enable-prefix-caching \\",
    "    --enable-prompt-tokens-details --generation-config vllm &",
    "KVVIZ_DEVICE=cuda python -m kvviz serve --host 127.0.0.1 --port 8200 --block-size 32 --kv-cache-mib 1024 \\",
    "    --max-model-len 2048 &",
    "python -m bench.peer_external vllm=http://127.0.0.1:8100 kvviz=http://127.0.0.1:8200 --label h200",
    "```", "",
    "It writes `peer-external-results.json` (each engine's figures, the ratios, the machine) and prints the ratios. "
    "A session that had a GPU could not run it: the lent machine reached no network and carried at most 64 MiB a "
    "command, and vLLM's CUDA wheel is far over that ([ENGINE.md](ENGINE.md#on-a-gpu-make-gpu-check)).",
]
