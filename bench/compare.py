"""``python -m bench.compare --title T --note N --modules M ... --column LABEL a.json b.json ... --column LABEL
...``: store the before/after comparison of those rounds (``bench.before_after``) in ``bench-compare.json`` and
re-render docs/BENCHMARKS.md (``bench.report``). Exit 2 with one line on bad arguments."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench.before_after import COMPARE, build
from bench.report import render_file


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compare")
    parser.add_argument("--title", required=True)
    parser.add_argument("--note", required=True)
    parser.add_argument("--modules", nargs="+", required=True)
    parser.add_argument("--column", nargs="+", action="append", required=True, metavar="LABEL FILE")
    args = parser.parse_args(argv)
    columns = [(c[0], [Path(p) for p in c[1:]]) for c in args.column]
    if len(columns) < 2 or any(len(paths) != len(columns[0][1]) or not paths for _, paths in columns):
        print("give at least two columns, each with the same number of rounds", file=sys.stderr)
        return 2
    COMPARE.write_text(json.dumps(build(args.title, args.note, columns, args.modules), indent=2) + "\n")
    print(f"wrote {COMPARE}\nwrote {render_file()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
