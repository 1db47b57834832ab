"""``kvviz watch --listen`` against a real vLLM: vLLM given a specific address connects its KV-event PUB to it
(no forwarder) and binds its replay ROUTER; a prompt sent before ``watch`` listens is missed live (a PUB drops
what no subscriber has asked for yet) and must come back by replay; requests after it must arrive live.

Invariant: ``check_watch`` starts its own vLLM and stops it (and ``watch``) however it exits; it returns plain
data and judges nothing (``passed`` says what the lane requires).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.peer_agree import agreement_prompts, text_ids
from bench.peer_client import complete
from bench.peer_servers import BLOCK_SIZE, ROOT, Engines, Threads, free_port, start_vllm

WATCH_TIMEOUT_S = 90  # watch's own --timeout: it gives up (exit 0, fewer batches) after this
WATCH_BATCHES = 3  # distinct batches watch waits for: the replayed first prompt's, then live ones
NEXT_REQUEST_S = 3.0  # while watch runs, a new live request this often (the first may come before it listens)


def _watch_argv(listen: str, replay: str, prompt: list[int]) -> list[str]:
    return [sys.executable, "-m", "kvviz", "watch", "--listen", listen, "--replay-endpoint", replay,
            "--batches", str(WATCH_BATCHES), "--timeout", str(WATCH_TIMEOUT_S), "--block-size", str(BLOCK_SIZE),
            "--prompt-tokens", ",".join(map(str, prompt)), "--json"]


def check_watch(workdir: Path, tok) -> dict[str, Any]:
    """Start vLLM publishing to a watch address, send the first agreement prompt, then run ``kvviz watch
    --listen`` there with vLLM's replay endpoint while new prompts keep arriving; what watch printed."""
    listen, replay = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
    first = agreement_prompts(tok)[0]
    engines = Engines()
    watch: subprocess.Popen | None = None
    try:
        vllm = engines.add(start_vllm(workdir, listen, Threads(None), replay_endpoint=replay))
        vllm.wait_ready()
        complete(vllm.url, first, 1)  # no one listens yet: its batch is only in vLLM's replay buffer
        watch = subprocess.Popen(_watch_argv(listen, replay, first), cwd=ROOT, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        sent = 0
        while watch.poll() is None and sent < WATCH_TIMEOUT_S / NEXT_REQUEST_S:
            complete(vllm.url, text_ids(tok, 2 * BLOCK_SIZE, f"Live request {sent}"), 1)
            sent += 1
            try:
                watch.wait(NEXT_REQUEST_S)
            except subprocess.TimeoutExpired:
                continue
        out, err = watch.communicate(timeout=WATCH_TIMEOUT_S + 30)
    finally:
        if watch is not None and watch.poll() is None:
            watch.kill()
            watch.wait()
        engines.close()
    result: dict[str, Any] = {"listen": listen, "replay_endpoint": replay, "exit": watch.returncode,
                              "live_requests": sent, "first_prompt_blocks": len(first) // BLOCK_SIZE}
    if watch.returncode != 0:
        result["error"] = err.strip().splitlines()[-1] if err.strip() else "no output"
        result["passed"] = False
        return result
    got = json.loads(out)
    result.update({k: got.get(k) for k in ("batches", "replayed", "missed", "cached_blocks",
                                           "prompt_blocks", "prompt_cached_blocks")})
    batches, replayed = got.get("batches", 0), got.get("replayed", 0)
    result["live"] = batches - replayed
    result["passed"] = (batches >= WATCH_BATCHES and replayed >= 1 and batches - replayed >= 1
                        and got.get("missed") == 0 and got.get("prompt_cached_blocks") == len(first) // BLOCK_SIZE)
    return result
