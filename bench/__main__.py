"""Run the ``bench/bench_*.py`` modules (bench_model first; ``python -m bench engine edit`` runs those whose
names contain a word), print a table, write ``bench-results.json``, then docs/BENCHMARKS.md from it.

Each module defines ``run(results: dict) -> None`` that adds measured keys, and may define
``TARGETS: list[tuple[str, str, Callable[[dict], bool]]]`` as (key, target text, check).
``bench-results.json`` holds ``{"machine": ..., "modules": {name: {started, seconds, load averages, ok,
keys}}, "results": {key: value}}``; a partial run replaces only its modules' entries and keys.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import sys
import threading
import time
import traceback
from pathlib import Path

import bench
from bench.machine import load_average, machine, utc_now
from bench.report import RESULTS, render_file

ROOT = Path(__file__).resolve().parent.parent


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}"
    return str(value)


class _Recorder(dict):
    """The results dict handed to the modules; remembers which keys were set since ``mark``."""

    def mark(self) -> None:
        self.set_keys: list[str] = []

    def __setitem__(self, key, value) -> None:
        if key not in self.set_keys:
            self.set_keys.append(key)
        super().__setitem__(key, value)


class _LoadSampler:
    """The highest 1-minute load average seen while a module runs (sampled every few seconds)."""

    def __init__(self) -> None:
        self.highest = (load_average() or [0.0])[0]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(5.0):
            self.highest = max(self.highest, (load_average() or [0.0])[0])

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return max(self.highest, (load_average() or [0.0])[0])


def _previous(names: list[str], everything: bool) -> dict:
    if everything or not RESULTS.is_file():
        return {"modules": {}, "results": {}}
    old = json.loads(RESULTS.read_text())
    for name in names:
        for key in old.get("modules", {}).pop(name, {}).get("keys", []):
            old.get("results", {}).pop(key, None)
    return old


def main(argv: list[str]) -> int:
    words = [a.removeprefix("bench_") for a in argv]
    modules = sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if m.name.startswith("bench_"))
    if words:
        modules = [m for m in modules if any(w in m for w in words)]
        if not modules:
            print(f"no bench module matches {' '.join(argv)}", file=sys.stderr)
            return 2
    # The model's own numbers first: later modules (edit, concurrency) use prefill_1024_ms as their basis.
    modules.sort(key=lambda name: name != "bench_model")
    stored = _previous(modules, everything=not words)
    results = _Recorder(stored.get("results", {}))  # earlier runs' keys stay readable (prefill_1024_ms)
    results.mark()
    targets: list[tuple[str, str, object]] = []
    failed: list[str] = []
    for name in modules:
        module = importlib.import_module(f"bench.{name}")
        start, started, load_start = time.perf_counter(), utc_now(), load_average()
        results.mark()
        sampler = _LoadSampler()
        print(f"[bench] {name} ...", flush=True)
        ok = True
        try:
            module.run(results)
        except Exception:  # noqa: BLE001 - report and keep measuring the rest
            failed.append(name)
            ok = False
            traceback.print_exc()
        seconds = time.perf_counter() - start
        load_max = sampler.stop()
        print(f"[bench] {name} done in {seconds:.1f} s", flush=True)
        stored["modules"][name] = {"started": started, "seconds": round(seconds, 1), "load_start": load_start,
                                   "load_end": load_average(), "load_max": load_max, "ok": ok, "keys": list(results.set_keys)}
        targets.extend(getattr(module, "TARGETS", []))
    measured = {k: results[k] for m in modules for k in stored["modules"][m]["keys"]}
    width = max((len(k) for k in measured), default=10)
    print()
    print(f"{'metric':<{width}}  value")
    print(f"{'-' * width}  {'-' * 16}")
    for key, value in measured.items():
        print(f"{key:<{width}}  {_fmt(value)}")
    if targets:
        print()
        print("targets:")
        for key, text, check in targets:
            ok = key in results and check(results)  # type: ignore[operator]
            print(f"  [{'ok' if ok else 'MISSED'}] {key}: {text}")
    stored["machine"] = machine()
    stored["results"] = dict(results)
    RESULTS.write_text(json.dumps(stored, indent=2) + "\n")
    print(f"\nwrote {RESULTS}")
    print(f"wrote {render_file()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
