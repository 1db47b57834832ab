"""``python -m kvviz SUBCOMMAND ...``: every computation the pages show, with ``--json`` output.

Each module in this package that defines ``register(subparsers)`` adds one subcommand; its handler
returns a dict (printed as JSON with ``--json``, as ``key: value`` lines otherwise). Errors become
one line on stderr and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import sys
from collections.abc import Callable, Sequence
from typing import Any

from kvviz.core.blank import is_blank


class CliError(Exception):
    """A user-facing error: printed as one line on stderr, exit code 2."""


class _Parser(argparse.ArgumentParser):
    """ArgumentParser whose usage errors are one line and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise CliError(f"{self.prog}: {message}")


Handler = Callable[[argparse.Namespace], dict[str, Any]]


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    """Add the ``--json`` flag every subcommand has."""
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def check_model_option(value: str | None, flag: str = "--model") -> None:
    """Refuse an empty or blank ``--model`` (the default is simply to leave the flag out)."""
    if value is not None and is_blank(value):
        raise CliError(f"{flag} is empty: give 'embedded', a Hugging Face id (owner/name) or a local folder")


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand module registered."""
    parser = _Parser(prog="python -m kvviz", description="kvviz: prompt caching, measured.")
    subparsers = parser.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(subparsers)
    return parser


def _print_human(result: dict[str, Any]) -> None:
    for key, value in result.items():
        if isinstance(value, (list, dict)):
            value = json.dumps(value, ensure_ascii=False)
        print(f"{key}: {value}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; return the process exit code."""
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        handler: Handler | None = getattr(args, "handler", None)
        if handler is None:
            parser.print_help()
            return 2
        result = handler(args)
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the CLI promises one line, never a traceback
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"error: {type(exc).__name__}: {message}", file=sys.stderr)
        return 1
    if getattr(args, "json", False):
        print(json.dumps(result, ensure_ascii=False))
    else:
        _print_human(result)
    return 0
