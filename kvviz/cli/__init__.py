"""``python -m kvviz SUBCOMMAND ...``: every computation the pages show, with ``--json`` output.

Each module in this package that defines ``register(subparsers)`` adds one subcommand; its handler
returns a dict (printed as JSON with ``--json``, as ``key: value`` lines otherwise). Errors become
one line on stderr and a non-zero exit code, never a traceback. When the reader of stdout goes away
(``python -m kvviz bytes ... | head -c 100``) the command stops quietly with status 141 (128 + SIGPIPE,
what a shell reports for a command killed by a closed pipe).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import sys
from collections.abc import Callable, Sequence
from typing import Any

from kvviz.mirror import limits
from kvviz.util.blank import is_blank


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


def block_size_arg(text: str) -> limits.BlockSize:
    """argparse type for ``--block-size``: the one check of the block size on the command line."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    try:
        return limits.block_size(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_block_size_flag(parser: argparse.ArgumentParser, default: int = limits.DEFAULT_BLOCK_SIZE) -> None:
    """Add ``--block-size`` (tokens per KV block), parsed into a ``BlockSize`` by :func:`block_size_arg`."""
    parser.add_argument("--block-size", type=block_size_arg, default=limits.block_size(default), metavar="N",
                        help=f"tokens per KV block, {limits.MIN_BLOCK_SIZE}..{limits.MAX_BLOCK_SIZE} (default {default})")


def add_reserve_full_isl_flag(parser: argparse.ArgumentParser) -> None:
    """Add vLLM 0.33.0's ``--scheduler-reserve-full-isl`` / ``--no-scheduler-reserve-full-isl`` (default on)."""
    parser.add_argument("--scheduler-reserve-full-isl", action=argparse.BooleanOptionalAction, default=True,
                        help="admit a waiting request only when KV blocks for its whole sequence (less its prefix "
                        "hit) are free, as vLLM 0.33.0 does by default; the --no- form checks its first chunk only")


def kv_offloading_size_arg(text: str) -> float:
    """argparse type for ``--kv-offloading-size``: GiB of host memory, a number in (0, 1024]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of GiB, got {text!r}") from None
    if not 0 < value <= 1024:
        raise argparse.ArgumentTypeError(f"expected a number of GiB in (0, 1024], got {text!r}")
    return value


def add_kv_offloading_flag(parser: argparse.ArgumentParser) -> None:
    """Add vLLM 0.33.0's ``--kv-offloading-size`` (GiB; off by default): the host tier under the block pool."""
    parser.add_argument("--kv-offloading-size", type=kv_offloading_size_arg, default=None, metavar="GIB",
                        help="GiB of host memory for a second K/V tier: blocks are copied there after they are "
                        "computed and copied back on a hit instead of recomputed (vLLM 0.33.0's native CPU "
                        "offloading; default off)")


def add_kv_offloading_eviction_flag(parser: argparse.ArgumentParser) -> None:
    """Add ``--kv-offloading-eviction-policy`` (lru, the default, or arc): the host tier's eviction policy, vLLM
    0.33.0's OffloadingConnector ``eviction_policy`` (set there in ``kv_connector_extra_config``)."""
    parser.add_argument("--kv-offloading-eviction-policy", choices=("lru", "arc"), default="lru",
                        help="how the host tier (--kv-offloading-size) picks blocks to evict: lru (least recently "
                        "used, the default) or arc (adaptive replacement: blocks reused by a request outlive blocks "
                        "only stored), as vLLM 0.33.0's offloading eviction_policy")


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


EXIT_PIPE_CLOSED = 141  # 128 + SIGPIPE


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; return the process exit code (141, silently, when stdout's reader is gone)."""
    try:
        return _main(argv)
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_PIPE_CLOSED


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot raise again at exit."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a real file (a test's capture): nothing is flushed at exit
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def _main(argv: Sequence[str] | None) -> int:
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        handler: Handler | None = getattr(args, "handler", None)
        if handler is None:
            parser.print_help()
            return 2
        result = handler(args)
    except BrokenPipeError:
        raise  # help text written to a closed pipe: handled by main()
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
    sys.stdout.flush()  # a closed pipe shows up here, inside main(), not at interpreter exit
    return 0
