"""docs/BENCHMARKS.md is generated from bench-results.json: every number on the page is a value of the JSON
(the machine, each module's run and load average, its keys and whether each target was met), and the
committed page is exactly what the committed JSON renders."""

from __future__ import annotations

import json
import re

from bench import report

NUM = r"\d+(?:[.,]\d+)*"  # 268,369,920 or 11.5


def _doc() -> dict:
    return {
        "machine": {"cpu": "Test CPU 9000", "cores": 3, "memory_gib": 7.5, "os": "Linux", "python": "3.11.9",
                    "torch": "2.13.0", "torch_threads": 3, "gpu": None},
        "modules": {"bench_engine": {"started": "2026-12-02 01:00:00 UTC", "seconds": 321.5,
                                     "load_start": [7.25, 6.0, 5.0], "load_end": [11.5, 9.0, 7.0], "ok": True,
                                     "keys": ["decode_1_over_hf", "decode_16_over_1", "kv_resident_bytes",
                                              "kv_expected_bytes"]}},
        "results": {"decode_1_over_hf": 1.037, "decode_16_over_1": 3.91, "kv_resident_bytes": 268369920,
                    "kv_expected_bytes": 268369920, "stale_key_of_no_module": 5},
    }


def test_the_page_shows_the_machine_the_run_and_each_key_with_its_target():
    page = report.render(_doc())
    assert "| CPU | Test CPU 9000 |" in page and "| cores | 3 |" in page and "| torch | 2.13.0 |" in page
    assert "| GPU | — |" in page
    assert "Run started 2026-12-02 01:00:00 UTC, 321.5 s, 1-minute load average 7.25 -> 11.5 on 3 cores." in page
    assert re.search(r"\| `decode_1_over_hf` \| 1\.037 \| decode_1_tok_s >= hf_generate_tok_s .*: met \|", page)
    assert re.search(r"\| `decode_16_over_1` \| 3\.91 \| .*>= 4: NOT met \|", page)
    assert "| `kv_resident_bytes` | 268,369,920 |" in page
    assert "stale_key_of_no_module" not in page  # only the keys a recorded run measured


def test_every_number_on_the_page_comes_from_the_json():
    doc = _doc()
    page = report.render(doc)
    prose = report.render({"machine": {}, "modules": {}, "results": {}})
    numbers = set(re.findall(NUM, page)) - set(re.findall(NUM, prose))
    allowed = set(re.findall(NUM, json.dumps(doc) + report.render.__doc__))
    allowed |= {f"{v:,}" for v in doc["results"].values()} | {"2026-12-02", "01:00:00"}
    module_text = report._summary(__import__("bench.bench_engine", fromlist=["x"]))
    module_text += " ".join(t for _, t, _ in __import__("bench.bench_engine", fromlist=["x"]).TARGETS)
    allowed |= set(re.findall(NUM, module_text))
    assert numbers <= allowed, numbers - allowed


def test_the_committed_page_is_the_committed_json_rendered():
    data = json.loads(report.RESULTS.read_text())
    from bench.before_after import section as before_after  # then bench-compare.json's before/after section
    from bench.peer_report import section  # the peer section (make peer's peer-results.json) follows

    assert report.PAGE.read_text(encoding="utf-8") == report.render(data) + section() + before_after()
    assert data["machine"]["cpu"] and data["machine"]["torch"] and data["modules"]
    for run in data["modules"].values():
        assert run["started"].endswith("UTC") and run["load_start"] and all(k in data["results"] for k in run["keys"])
