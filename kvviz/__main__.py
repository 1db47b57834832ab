"""``python -m kvviz``: the command-line interface (see kvviz.cli)."""

from kvviz.cli import main
from kvviz.settings import prefer_passive_openmp

if __name__ == "__main__":
    prefer_passive_openmp()  # before torch is first imported
    raise SystemExit(main())
