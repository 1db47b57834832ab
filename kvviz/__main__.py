"""``python -m kvviz``: the command-line interface (see kvviz.cli)."""

import sys

from kvviz.cli import main
from kvviz.settings import prefer_passive_openmp

if __name__ == "__main__":
    prefer_passive_openmp(sys.argv[1:])  # before torch is first imported; not for `serve`
    raise SystemExit(main())
