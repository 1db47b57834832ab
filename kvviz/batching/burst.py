"""A burst of concurrent requests of the three kinds a serving engine batches: a prefill from scratch,
prefills of prompts whose prefix is cached, and decode steps. They start together (a barrier), go
through the model's batching scheduler like every other forward pass, and are tagged ``demo``."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kvviz.model.batching import PassRecord, batch_origin
from kvviz.model.block_store import KVStore
from kvviz.model.kvstore import prefill_cached
from kvviz.model.loader import LoadedModel
from kvviz.model.prefill import forward_request, prefill, scheduler_for
from kvviz.model.tokens import tokenize

DEMO_TAG = "demo"


@dataclass(frozen=True)
class BurstResult:
    """The passes the burst's requests rode in (only passes holding at least one of them)."""

    requests: int
    passes: list[PassRecord]

    @property
    def shared(self) -> int:
        """The burst's requests that shared their pass with at least one other request."""
        return sum(sum(1 for i in p.items if i.tag == DEMO_TAG) for p in self.passes if p.batch_size > 1)


def run_burst(lm: LoadedModel, owner: str, system: str, questions: Sequence[str], fresh: str,
              decode_steps: int = 6) -> BurstResult:
    """Cache ``system`` + the first question, then at once: ``fresh`` from scratch, each question after
    the cached system prompt, and ``decode_steps`` greedy decode steps after the cached prompt."""
    store = KVStore(budget_bytes=2**30)
    ids = [list(tokenize(system + q, model_name=lm.source.key).ids) for q in questions]
    fresh_ids = list(tokenize(fresh, model_name=lm.source.key).ids)
    sched = scheduler_for(lm)
    before = max((p.pass_id for p in sched.history()), default=0)
    errors: list[BaseException] = []
    with batch_origin(DEMO_TAG, owner):
        seed = prefill_cached(lm, ids[0], store=store)  # the cached prefix the others reuse
    gate = threading.Barrier(len(ids) + 2)

    def worker(fn) -> None:
        try:
            with batch_origin(DEMO_TAG, owner):
                gate.wait()
                fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised below in the caller
            errors.append(exc)

    def decode() -> None:
        cache = lm.new_cache([(k.unsqueeze(0), v.unsqueeze(0)) for k, v in zip(seed.keys, seed.values, strict=True)])
        token = int(torch.argmax(seed.last_logits))
        for _ in range(decode_steps):
            cache, logits, _ = forward_request(lm, [token], cache)
            token = int(torch.argmax(logits))

    jobs = [lambda: prefill(lm, token_ids=fresh_ids, max_tokens=len(fresh_ids)), decode]
    jobs += [lambda q=q: prefill_cached(lm, q, store=store, save=False) for q in ids]
    threads = [threading.Thread(target=worker, args=(job,)) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    passes = [p for p in sched.history() if p.pass_id > before and any(i.tag == DEMO_TAG for i in p.items)]
    return BurstResult(1 + 1 + len(ids) + decode_steps, passes)
