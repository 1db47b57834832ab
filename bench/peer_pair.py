"""Both engines of the peer lane running together, and the pytest plugin that hands them to the ``peer``
tests (kept out of ``bench.peer``, which runs as ``__main__``, so the tests' conftest sees the same class).

Invariant: ``running_pair`` stops both engines and closes both event sinks on the way out, however it exits.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.peer_agree import Peer, agreement_prompts, run_agreement
from bench.peer_events import EventSink
from bench.peer_servers import Engines, Threads, free_port, start_kvviz, start_vllm


@contextlib.contextmanager
def running_pair(workdir: Path, threads: Threads) -> Iterator[list[Peer]]:
    """Both engines started, healthy and listened to; stopped (and their sinks closed) on the way out."""
    engines, sinks = Engines(), []
    try:
        vllm_sink = EventSink.listening()  # vLLM's PUB connects to a specific address: we bind it
        sinks.append(vllm_sink)
        kvviz_events = f"tcp://127.0.0.1:{free_port()}"
        vllm = engines.add(start_vllm(workdir, vllm_sink.endpoint, threads))
        kvviz = engines.add(start_kvviz(workdir, kvviz_events, threads))
        kvviz.wait_ready()
        kvviz_sink = EventSink.connecting(kvviz_events)
        sinks.append(kvviz_sink)
        vllm.wait_ready()
        yield [Peer("vllm", vllm.url, vllm_sink, vllm.proc.pid), Peer("kvviz", kvviz.url, kvviz_sink, kvviz.proc.pid)]
    finally:
        engines.close()
        for sink in sinks:
            sink.close()


class PeerPlugin:
    """Hands running engines to the ``peer`` tests; the agreement is gathered once and kept here."""

    def __init__(self, peers: list[Peer], tok) -> None:
        self.peers, self.tok = peers, tok
        self.data: dict[str, Any] | None = None

    def agreement(self) -> dict[str, Any]:
        if self.data is None:
            self.data = run_agreement(self.peers, agreement_prompts(self.tok))
            self.data["first_answer_ids_decoded"] = {name: self.tok.decode(ids) for name, ids in
                                                     self.data["first_answer_ids"].items()}
        return self.data
