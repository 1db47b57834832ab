"""bench.before_after: round-by-round ratios of two checkouts' bench runs, the noise rule (a change no larger
than one checkout's own spread between rounds), the direction of a key (a time vs a rate), and the page
section drawn from the stored comparison only."""

from __future__ import annotations

import json

from bench import before_after as ba


def _doc(started: str, load: float, values: dict) -> dict:
    return {"modules": {"bench_x": {"started": started, "load_start": [load, 1.0, 1.0], "load_max": load + 1,
                                    "keys": list(values)}},
            "results": values}


def test_a_key_is_a_time_or_a_rate_or_neither():
    assert ba.speed_direction("prefill_1024_ms") == -1 and ba.speed_direction("cold_start_s") == -1
    assert ba.speed_direction("server_http_rps") == 1 and ba.speed_direction("matmul_gflops") == 1
    assert ba.speed_direction("prefill_1024_ms_median") == -1
    assert ba.speed_direction("hash_ratio") is None and ba.speed_direction("concurrent_errors") is None


def test_a_change_inside_the_rounds_own_spread_is_noise():
    c = ba.change([100.0, 130.0], [120.0, 110.0], -1)  # before's own rounds differ by 30%
    assert c.ratios == [1.2, 0.846] and c.verdict == "within noise" and c.spread == 0.3


def test_a_time_worse_by_more_than_15_percent_in_every_round_is_material():
    c = ba.change([100.0, 102.0], [130.0, 125.0], -1)
    assert c.verdict == "slower (every round > 15%)" and c.ratio > 1.15
    assert ba.change([100.0, 102.0], [110.0, 112.0], -1).verdict == "slower"  # beyond noise, not material


def test_a_rate_that_grows_is_faster_and_one_that_falls_is_slower():
    assert ba.change([20.0, 20.5], [25.0, 26.0], 1).verdict == "faster"
    assert ba.change([20.0, 20.5], [15.0, 15.5], 1).verdict == "slower (every round > 15%)"


def test_the_section_shows_each_speed_key_with_its_rounds_and_loads(tmp_path):
    paths = {}
    for name, started, load, values in [
        ("b1", "2026-12-04 18:00:00 UTC", 2.5, {"t_ms": 100.0, "r_rps": 20.0, "errors": 0}),
        ("a1", "2026-12-04 18:02:00 UTC", 3.5, {"t_ms": 140.0, "r_rps": 21.0, "errors": 0}),
        ("b2", "2026-12-04 18:04:00 UTC", 2.25, {"t_ms": 104.0, "r_rps": 22.0, "errors": 0}),
        ("a2", "2026-12-04 18:06:00 UTC", 4.75, {"t_ms": 150.0, "r_rps": 21.5, "errors": 0}),
    ]:
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(_doc(started, load, values)))
    doc = ba.build("Before and after", "Two rounds each.", [("before", [paths["b1"], paths["b2"]]),
                                                           ("after", [paths["a1"], paths["a2"]])], ["bench_x"])
    assert set(doc["columns"][0]["values"]) == {"t_ms", "r_rps"}  # 'errors' is not a speed
    stored = tmp_path / "compare.json"
    stored.write_text(json.dumps(doc))
    page = ba.section(stored)
    assert "## Before and after" in page and "Two rounds each." in page
    assert "| `t_ms` | 102 | 145 | 1.42 | 1.4, 1.44 | slower (every round > 15%) (spread 7%) |" in page
    assert "| `r_rps` | 21 | 21.25 | 1.01 | 1.05, 0.977 | within noise (spread 10%) |" in page
    assert "| bench_x | 2.5-3.5; 2.25-3.25 | 3.5-4.5; 4.75-5.75 |" in page
    assert "`errors`" not in page
    assert ba.section(tmp_path / "missing.json") == ""
