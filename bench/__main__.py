"""Run every ``bench/bench_*.py`` module (bench_model first), print a table, write ``bench-results.json``.

Each module defines ``run(results: dict) -> None`` that adds measured keys, and may define
``TARGETS: list[tuple[str, str, Callable[[dict], bool]]]`` as (key, target text, check).
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import sys
import time
import traceback
from pathlib import Path

import bench

ROOT = Path(__file__).resolve().parent.parent


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}"
    return str(value)


def main() -> int:
    results: dict[str, object] = {}
    targets: list[tuple[str, str, object]] = []
    failed: list[str] = []
    modules = sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if m.name.startswith("bench_"))
    # The model's own numbers first: later modules (edit, concurrency) use prefill_1024_ms as their basis.
    modules.sort(key=lambda name: name != "bench_model")
    for name in modules:
        module = importlib.import_module(f"bench.{name}")
        start = time.perf_counter()
        print(f"[bench] {name} ...", flush=True)
        try:
            module.run(results)
        except Exception:  # noqa: BLE001 - report and keep measuring the rest
            failed.append(name)
            traceback.print_exc()
        print(f"[bench] {name} done in {time.perf_counter() - start:.1f} s", flush=True)
        targets.extend(getattr(module, "TARGETS", []))
    width = max((len(k) for k in results), default=10)
    print()
    print(f"{'metric':<{width}}  value")
    print(f"{'-' * width}  {'-' * 16}")
    for key, value in results.items():
        print(f"{key:<{width}}  {_fmt(value)}")
    if targets:
        print()
        print("targets:")
        for key, text, check in targets:
            ok = key in results and check(results)  # type: ignore[operator]
            print(f"  [{'ok' if ok else 'MISSED'}] {key}: {text}")
    (ROOT / "bench-results.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {ROOT / 'bench-results.json'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
