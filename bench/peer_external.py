"""``python -m bench.peer_external vllm=URL kvviz=URL``: the peer lane's speed figures against two engines started
by hand (a vLLM and a ``kvviz serve`` on a GPU machine, say), with the same client, prompts and rounds as
``make peer``; the figures and the ratios go to a JSON file and the terminal. No agreement tests, no CPU
accounting (the engines are not this process's children), no memory bound.

Invariant: both URLs answer ``/health`` before any timing; a malformed argument or an engine that does not
answer ends with one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from urllib.parse import urlsplit

from bench.machine import load_average, machine, utc_now
from bench.peer_servers import healthy

NAMES = ("vllm", "kvviz")
DEFAULT_OUT = Path("peer-external-results.json")


class UsageError(ValueError):
    """A one-line reason the arguments cannot be used."""


def parse_urls(pairs: list[str]) -> dict[str, str]:
    """``["vllm=http://host:port", "kvviz=http://host:port"]`` -> {name: base URL}; both names, http(s) only."""
    urls: dict[str, str] = {}
    for pair in pairs:
        name, sep, url = pair.partition("=")
        if not sep or name not in NAMES:
            raise UsageError(f"expected vllm=URL and kvviz=URL, got {pair!r}")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
            raise UsageError(f"{name}: {url!r} is not an http(s)://host:port base URL")
        if name in urls:
            raise UsageError(f"{name} given twice")
        urls[name] = url.rstrip("/")
    missing = [n for n in NAMES if n not in urls]
    if missing:
        raise UsageError(f"missing {' and '.join(missing)}=URL")
    return urls


def run(urls: dict[str, str], rounds: int, label: str) -> dict:
    """Warm both up, then every figure for both, interleaved as ``make peer`` does."""
    from bench.peer_agree import Peer, tokenizer
    from bench.peer_speed import measure, ratios, warm_up

    for name, url in urls.items():
        if not healthy(url):
            raise UsageError(f"{name} at {url} does not answer GET /health")
    tok = tokenizer()
    peers = [Peer(name, urls[name], None) for name in NAMES]  # type: ignore[arg-type]  # no KV-event sink here
    warm_up(peers, tok)
    started, load0 = utc_now(), load_average()
    figures = measure(peers, tok, rounds, label)
    return {"started": started, "finished": utc_now(), "machine": machine(), "urls": urls, "rounds": rounds,
            "load_start": load0, "load_end": load_average(), "figures": figures,
            "ratios_kvviz_over_vllm": ratios(figures)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.peer_external", description=__doc__.split("\n\n")[0])
    parser.add_argument("urls", nargs="+", help="vllm=URL kvviz=URL")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--label", default="external")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    try:
        if not 1 <= args.rounds <= 50:
            raise UsageError(f"--rounds must be 1-50, not {args.rounds}")
        doc = run(parse_urls(args.urls), args.rounds, args.label)
    except (UsageError, RuntimeError, OSError) as exc:  # an engine's error answer or a dropped connection
        print(f"peer_external: {exc}", file=sys.stderr)
        return 2
    args.out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    for key, ratio in doc["ratios_kvviz_over_vllm"].items():
        print(f"{key}: vLLM {doc['figures']['vllm'][key]}, kvviz {doc['figures']['kvviz'][key]}, kvviz/vLLM {ratio}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
