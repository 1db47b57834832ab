"""``python -m kvviz``: the command-line interface (see kvviz.cli)."""

from kvviz.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
