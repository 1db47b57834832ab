"""What must agree, exactly, between vLLM and kvviz serving the same weights: greedy answers to three prompts
(330 and 334 tokens sharing 232, then the first again; 24 new tokens each: the text, the token count, and
the first answer's token ids that the KV events carry), ``cached_tokens`` per request,
the KV events (the first prompt's block hashes against ``kvviz hash``; both engines' events field for field)
and the prefix-cache counters of /metrics.

Invariant: ``run_agreement`` sends the same requests, in the same order, through the same client, to fresh
engines (nothing else sent before), and returns plain data; it judges nothing (the peer tests do).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from bench.peer_client import Stream, complete, prefix_counters
from bench.peer_servers import BLOCK_SIZE, ROOT

SHARED, FIRST, SECOND, NEW_TOKENS = 232, 330, 334, 24
EVENT_WAIT_S = 30.0


class Sink(Protocol):
    def events(self) -> list: ...
    def wait_for(self, n: int, timeout: float) -> int: ...
    def wait_quiet(self, quiet_s: float, timeout: float) -> int: ...


@dataclass(frozen=True)
class Peer:
    """One running engine as the agreement sees it: its name, URL and KV-event sink."""

    name: str
    url: str
    events: Sink
    pid: int | None = None  # its process group (the server and its workers), for CPU accounting


def tokenizer():
    """The embedded model's tokenizer (the folder kvviz and vLLM both load)."""
    from transformers import AutoTokenizer

    from bench.peer_servers import model_folders

    return AutoTokenizer.from_pretrained(str(model_folders()[0]))


def text_ids(tok, n: int, salt: str) -> list[int]:
    """``n`` token ids of real English text, different for each ``salt`` from the first block on."""
    text = (f"{salt}: the prefix cache keeps the keys and values of every full block of tokens, so a prompt "
            "that starts like an earlier one skips their prefill. ") * (n // 20 + 4)
    ids = tok(text, add_special_tokens=False)["input_ids"]
    if len(ids) < n:
        raise ValueError(f"the text holds {len(ids)} tokens, {n} asked")
    return ids[:n]


def agreement_prompts(tok) -> list[list[int]]:
    first = text_ids(tok, FIRST, "Report one")
    second = first[:SHARED] + text_ids(tok, SECOND - SHARED, "A different tail")
    return [first, second, first]


def kvviz_hash_ints(ids: list[int]) -> list[int]:
    """The full blocks' hashes of ``ids`` from ``kvviz hash`` (sha256, vLLM's seed), in vLLM's int form."""
    from kvviz.fleet.wire import to_int_hash

    proc = subprocess.run([sys.executable, "-m", "kvviz", "hash", "--tokens", ",".join(map(str, ids)),
                           "--block-size", str(BLOCK_SIZE), "--json"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=True)
    blocks = json.loads(proc.stdout)["blocks"]
    return [to_int_hash(bytes.fromhex(b["hash"])) for b in blocks if b["full"]]


def _event_dict(event: Any) -> dict[str, Any]:
    out = {"kind": type(event).__name__}
    if dataclasses.is_dataclass(event):
        out.update({f.name: getattr(event, f.name) for f in dataclasses.fields(event)})
    else:  # a msgspec struct
        out.update({name: getattr(event, name) for name in getattr(event, "__struct_fields__", ())})
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in out.items()}


def _stream_record(s: Stream) -> dict[str, Any]:
    return {"text": s.text, "pieces": [p for p, _ in s.pieces], "counts": [c for _, c in s.pieces],
            "completion_tokens": s.completion_tokens, "prompt_tokens": s.prompt_tokens,
            "cached_tokens": s.cached_tokens}


def run_agreement(peers: list[Peer], prompts: list[list[int]]) -> dict[str, Any]:
    """Send the prompts to each engine in turn and gather what each answered and published."""
    out: dict[str, Any] = {"prompt_tokens": [len(p) for p in prompts], "shared_tokens": SHARED,
                           "new_tokens": NEW_TOKENS, "kvviz_hash_first": kvviz_hash_ints(prompts[0]), "engines": {}}
    for peer in peers:
        streams = [_stream_record(complete(peer.url, p, NEW_TOKENS)) for p in prompts]
        peer.events.wait_quiet(2.0, EVENT_WAIT_S)
        events = [_event_dict(e) for e in peer.events.events()]
        out["engines"][peer.name] = {"streams": streams, "events": events,
                                     "counters": prefix_counters(peer.url)}
    out["first_answer_ids"] = {name: first_answer_ids(e["events"], len(prompts[0]))
                               for name, e in out["engines"].items()}
    return out


def first_stored_hashes(events: list[dict[str, Any]], n: int) -> list[Any]:
    """The first ``n`` block hashes the engine said it stored."""
    hashes: list[Any] = []
    for e in events:
        if e["kind"] == "BlockStored":
            hashes.extend(e["block_hashes"])
    return hashes[:n]


def first_answer_ids(events: list[dict[str, Any]], prompt_len: int) -> list[int]:
    """The first answer's token ids that the KV events carry: the stored blocks' tokens, in order, past the
    first prompt (its whole blocks, generated tokens included, are stored before any other prompt's)."""
    ids: list[int] = []
    for e in events:
        if e["kind"] == "BlockStored":
            ids.extend(e["token_ids"])
    whole = (prompt_len + NEW_TOKENS - 1) // BLOCK_SIZE * BLOCK_SIZE  # the last token's K/V is never written
    return ids[prompt_len:whole]


def event_differences(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[str]:
    """Where two engines' event lists differ, one line each (empty when equal field for field)."""
    diffs = [f"{len(a)} events against {len(b)}"] if len(a) != len(b) else []
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        for key in sorted(set(x) | set(y)):
            if x.get(key) != y.get(key):
                diffs.append(f"event {i} ({x.get('kind')}) {key}: {x.get(key)!r:.80} != {y.get(key)!r:.80}")
    return diffs


def summary(data: dict[str, Any]) -> dict[str, Any]:
    """The agreement as the results file records it: each check, its values on both engines, equal or not."""
    v, k = data["engines"]["vllm"], data["engines"]["kvviz"]
    first = len(data["kvviz_hash_first"])
    diffs = event_differences(v["events"], k["events"])
    checks = {
        "greedy_tokens": {"equal": all(a["text"] == b["text"] and a["completion_tokens"] == b["completion_tokens"]
                                       for a, b in zip(v["streams"], k["streams"], strict=True))
                          and data["first_answer_ids"]["vllm"] == data["first_answer_ids"]["kvviz"],
                          "completion_tokens": [[s["completion_tokens"] for s in e["streams"]] for e in (v, k)],
                          "first_answer_ids_in_events": data["first_answer_ids"]},
        "cached_tokens": {"vllm": [s["cached_tokens"] for s in v["streams"]],
                          "kvviz": [s["cached_tokens"] for s in k["streams"]]},
        "first_prompt_hashes": {"kvviz_hash": data["kvviz_hash_first"],
                                "vllm_events": first_stored_hashes(v["events"], first),
                                "kvviz_events": first_stored_hashes(k["events"], first)},
        "events": {"vllm": len(v["events"]), "kvviz": len(k["events"]), "differences": diffs[:20]},
        "prefix_counters": {"vllm": v["counters"], "kvviz": k["counters"]},
    }
    checks["cached_tokens"]["equal"] = checks["cached_tokens"]["vllm"] == checks["cached_tokens"]["kvviz"]
    h = checks["first_prompt_hashes"]
    h["equal"] = h["kvviz_hash"] == h["vllm_events"] == h["kvviz_events"] and len(h["kvviz_hash"]) > 0
    checks["events"]["equal"] = not diffs and len(v["events"]) > 0
    checks["prefix_counters"]["equal"] = v["counters"] == k["counters"]
    return {"prompt_tokens": data["prompt_tokens"], "shared_tokens": data["shared_tokens"],
            "new_tokens": data["new_tokens"], "texts_equal": [a["text"] == b["text"] for a, b in
                                                               zip(v["streams"], k["streams"], strict=True)],
            "checks": checks, "all_equal": all(c["equal"] for c in checks.values())}


def save(data: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(data, indent=1, default=str) + "\n", encoding="utf-8")
