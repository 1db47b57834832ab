"""A before/after comparison of ``make bench`` runs of two or more checkouts (``bench-compare.json``), and its
section of docs/BENCHMARKS.md. Rounds are run interleaved (before, after, before, after...); each speed key is
compared round by round (after / before of the same round), and the median of those ratios is the change.

Noise: a key's spread is the larger relative range (max / min - 1) among one checkout's own rounds; a change
no larger than that spread is within noise. A key is materially worse when every round is worse by > 15%.
``python -m bench.compare`` (its command line) writes ``bench-compare.json`` from the rounds'
``bench-results.json`` copies (first column = the base), then re-renders the page. Nothing in the section is
typed by hand.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMPARE = ROOT / "bench-compare.json"
MATERIAL = 0.15  # a change beyond this in every round is material
LOWER_BETTER = ("_s", "_ms")  # times
HIGHER_BETTER = ("_rps", "gflops")  # rates


def speed_direction(key: str) -> int | None:
    """+1 when a larger value is better (a rate), -1 when smaller is better (a time), None for other keys."""
    key = key.removesuffix("_median")
    if key.endswith(HIGHER_BETTER):
        return 1
    if key.endswith(LOWER_BETTER):
        return -1
    return None


@dataclass(frozen=True)
class Change:
    """One key of one compared column against the base: per-round ratios (after / before), their median,
    the rounds' own spread and the verdict."""

    ratios: list[float]
    ratio: float
    spread: float
    verdict: str


def _spread(values: list[float]) -> float:
    low = min(values)
    return max(values) / low - 1.0 if low > 0 else float("inf")


def change(base: list[float], other: list[float], direction: int) -> Change:
    """``other`` against ``base``, paired by round (both in the order the rounds ran; no base value is 0)."""
    ratios = [o / b for b, o in zip(base, other, strict=True)]
    ratio = statistics.median(ratios)
    spread = max(_spread(base), _spread(other))
    worse = [r < 1 / (1 + MATERIAL) if direction > 0 else r > 1 + MATERIAL for r in ratios]
    if abs(ratio - 1.0) <= spread or abs(1.0 / ratio - 1.0) <= spread:
        verdict = "within noise"
    elif ratios and all(worse):
        verdict = "slower (every round > 15%)"
    else:
        better = (ratio > 1.0) == (direction > 0)
        verdict = "faster" if better else "slower"
    return Change(ratios=[round(r, 3) for r in ratios], ratio=round(ratio, 3), spread=round(spread, 3),
                  verdict=verdict)


def _column(label: str, paths: list[Path], modules: list[str]) -> dict:
    docs = [json.loads(p.read_text()) for p in paths]
    keys = [k for m in modules for k in docs[0]["modules"][m]["keys"]]
    values = {k: [d["results"][k] for d in docs] for k in keys
              if speed_direction(k) is not None and all(isinstance(d["results"].get(k), (int, float)) for d in docs)}
    loads = {m: [[d["modules"][m]["load_start"][0], d["modules"][m].get("load_max")] for d in docs] for m in modules}
    return {"label": label, "started": [d["modules"][modules[0]]["started"] for d in docs], "values": values,
            "modules": {m: docs[0]["modules"][m]["keys"] for m in modules}, "loads": loads}


def build(title: str, note: str, columns: list[tuple[str, list[Path]]], modules: list[str]) -> dict:
    """The comparison document: each column's per-round values and loads, each key's change against the first."""
    cols = [_column(label, paths, modules) for label, paths in columns]
    base = cols[0]
    for col in cols[1:]:
        col["changes"] = {k: change(base["values"][k], v, speed_direction(k) or -1).__dict__
                          for k, v in col["values"].items() if k in base["values"] and all(base["values"][k])}
    return {"title": title, "note": note, "modules": modules, "columns": cols}


def _num(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:,.4g}"


def _load(runs: list[list]) -> str:
    return "; ".join(f"{_num(start)}-{_num(high)}" if high not in (None, start) else _num(start)
                     for start, high in runs)


def section(source: Path = COMPARE) -> str:
    """The page's before/after section, or nothing when no comparison is stored."""
    if not source.is_file():
        return ""
    doc = json.loads(source.read_text())
    cols = doc["columns"]
    base, others = cols[0], cols[1:]
    head = ["key", f"{base['label']} (median)"]
    for col in others:
        head += [f"{col['label']} (median)", "ratio (median of rounds)", "ratios by round", "verdict"]
    lines = ["", f"## {doc['title']}", "", doc["note"], "",
             "Columns: " + "; ".join(f"{c['label']}: {len(c['started'])} rounds started "
                                     + ", ".join(c["started"]) for c in cols) + ".", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for module in doc["modules"]:
        for key in base["modules"][module]:
            if key not in base["values"]:
                continue
            row = [f"`{key}`", _num(statistics.median(base["values"][key]))]
            for col in others:
                c = col.get("changes", {}).get(key)
                if c is None:
                    row += ["—"] * 4
                    continue
                row += [_num(statistics.median(col["values"][key])), f"{c['ratio']:.3g}",
                        ", ".join(f"{r:.3g}" for r in c["ratios"]), f"{c['verdict']} (spread {c['spread']:.0%})"]
            lines.append("| " + " | ".join(row) + " |")
    lines += ["", "1-minute load average at each module's start - the highest during it, round by round:", "",
              "| module | " + " | ".join(c["label"] for c in cols) + " |", "|---|" + "---|" * len(cols)]
    for module in doc["modules"]:
        lines.append(f"| {module} | " + " | ".join(_load(c["loads"][module]) for c in cols) + " |")
    return "\n".join(lines) + "\n"
