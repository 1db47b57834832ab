"""A test double of kvviz.engine's EngineLoop (the ENGINE_API.md contract), for the server's unit tests
only: a character tokenizer, one token per step, whole-block prefix hits keyed by (salt, prefix), and a
``gate`` a test closes to hold every request where it is. Its outputs and params are the engine's own
types (RequestOutput, RequestMetrics, SamplingParams). The issue's own tests run the real engine
(tests/server/test_serve_real.py)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from kvviz.engine import RequestMetrics, RequestOutput, SamplingParams
from kvviz.engine.request import EngineStats
from kvviz.engine.stats import FinishedRequestStats, IterationStats
from kvviz.mirror.kv_events import BlockStored, KVEventBatch

BLOCK = 4


FakeParams = SamplingParams  # the engine's own: its checks apply to what the server builds


class FakeTokenizer:
    eos_token_id = 0

    def __len__(self) -> int:
        return 50_000

    def encode(self, text: str) -> list[int]:
        try:  # as the real (Rust) tokenizers: text that is not valid Unicode is a TypeError
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise TypeError("TextEncodeInput must be Union[TextInputSequence, Tuple[InputSequence, ...]]") from None
        return [1] + [ord(c) % 997 + 2 for c in text]

    def __call__(self, text: str, add_special_tokens: bool = True, return_attention_mask: bool = False) -> dict:
        ids = self.encode(text)
        return {"input_ids": ids if add_special_tokens else ids[1:]}  # id 1 is the double's BOS

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return "".join(chr(t - 2) for t in ids if t >= 2)

    def convert_ids_to_tokens(self, ids: list[int]) -> list[str]:
        return ["<s>" if t == 1 else chr(t - 2) if t >= 2 else "<eos>" for t in ids]

    def apply_chat_template(self, messages: list[dict], tokenize: bool = True, add_generation_prompt: bool = False,
                            continue_final_message: bool = False) -> list[int] | str:
        if any(m["role"] == "developer" for m in messages):
            raise ValueError("this template has no developer role")
        parts = []
        for m in messages:  # tool calls as a template that shows them would: name and (dict) arguments
            calls = "".join(f"[call {c['function']['name']}({c['function']['arguments']})]"
                            for c in m.get("tool_calls") or [])
            parts.append(f"<{m['role']}>{m['content']}{calls}")
        text = "".join(parts) + ("<assistant>" if add_generation_prompt else "" if continue_final_message else "<end>")
        return self(text, add_special_tokens=True)["input_ids"] if tokenize else text


class FakeEngine:
    def __init__(self, max_model_len: int = 256) -> None:
        self.tokenizer = FakeTokenizer()
        self.max_model_len = max_model_len
        self.block_size = BLOCK
        self.num_blocks = 64
        self.cached: set[tuple[Any, ...]] = set()
        self.subscribers: list[Any] = []
        self.stats_subscribers: list[Any] = []
        self.resets = 0

    def subscribe_iteration_stats(self, callback: Any) -> Any:
        self.stats_subscribers.append(callback)
        return lambda: self.stats_subscribers.remove(callback)

    def subscribe_kv_events(self, callback: Any) -> Any:
        self.subscribers.append(callback)
        return lambda: self.subscribers.remove(callback)

    def reset_prefix_cache(self) -> bool:
        self.cached.clear()
        self.resets += 1
        return True


@dataclass
class _Running:
    prompt: list[int]
    params: FakeParams
    cached: int
    sink: list[Any]
    cond: threading.Condition
    out: list[int] = field(default_factory=list)
    done: bool = False
    deliver: Any = None  # the submitter's sink (EngineLoop.submit's ``sink``): outputs go there, not to ``sink``


class FakeStream:
    def __init__(self, loop: FakeLoop, rid: str, run: _Running) -> None:
        self.loop, self.request_id, self.run = loop, rid, run

    def __iter__(self):
        while True:
            with self.run.cond:
                self.run.cond.wait_for(lambda: self.run.sink)
                item = self.run.sink.pop(0)
            yield item
            if item.finished:
                return

    def abort(self) -> None:
        self.loop.abort(self.request_id)


class FakeLoop:
    """Steps every running request by one token per ``step_s`` while ``gate`` is set."""

    def __init__(self, step_s: float = 0.002, max_model_len: int = 256) -> None:
        self.engine = FakeEngine(max_model_len)
        self.step_s = step_s
        self.gate = threading.Event()
        self.gate.set()
        self.lock = threading.Lock()
        self.running: dict[str, _Running] = {}
        self.aborted: list[str] = []
        self.aborted_event = threading.Event()
        self.submitted: list[tuple[str, list[int], Any, dict]] = []
        self.queries = self.hits = self.prompt_total = self.cached_total = self.gen_total = 0
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def submit(self, rid: str, prompt: list[int], params: Any, *, cache_salt: str | None = None, priority: int = 0,
               client: str = "", sink: Any = None) -> FakeStream:
        from kvviz.errors import CodedError

        if max(prompt) >= len(self.engine.tokenizer):
            raise CodedError(f"token id {max(prompt)} is outside the vocabulary", "token_out_of_vocab")
        with self.lock:
            keys = [(cache_salt, tuple(prompt[: (i + 1) * BLOCK])) for i in range((len(prompt) - 1) // BLOCK)]
            hit = 0
            for k in keys:
                if k not in self.engine.cached:
                    break
                hit += 1
            stored = [k for k in keys if k not in self.engine.cached]
            self.engine.cached.update(keys)
            self.queries += len(prompt)
            self.hits += hit * BLOCK
            self.prompt_total += len(prompt)
            self.cached_total += hit * BLOCK
            run = _Running(prompt, params, hit * BLOCK, [], threading.Condition(), deliver=sink)
            self.running[rid] = run
            self.submitted.append((rid, prompt, params, {"cache_salt": cache_salt, "priority": priority,
                                                         "client": client}))
        if stored:
            batch = KVEventBatch(time.time(), [BlockStored([hash(k).to_bytes(8, "big", signed=True)], None,
                                                           list(k[1][-BLOCK:]), BLOCK, None, None, None)
                                               for k in stored])
            for cb in list(self.engine.subscribers):
                cb(batch)
        return FakeStream(self, rid, run)

    def _emit(self, rid: str, run: _Running, reason: str | None, new: list[int]) -> None:
        text = "".join(chr(97 + t % 26) for t in run.out)
        delta = "".join(chr(97 + t % 26) for t in new)
        now = time.monotonic()
        metrics = RequestMetrics(now - 0.01, now - 0.009, now - 0.008, now, now if reason else None, len(run.out))
        out = RequestOutput(rid, new, list(run.out), text, delta, reason is not None, reason, len(run.prompt),
                            run.cached, 0, metrics)
        if run.deliver is not None:
            run.deliver(out)
            return
        with run.cond:
            run.sink.append(out)
            run.cond.notify_all()

    def abort(self, rid: str) -> None:
        with self.lock:
            run = self.running.pop(rid, None)
            self.aborted.append(rid)
            self.aborted_event.set()
        if run is not None and not run.done:
            run.done = True
            self._emit(rid, run, "abort", [])

    def stats(self) -> EngineStats:
        with self.lock:
            return EngineStats(num_running=len(self.running), num_waiting=0, num_preemptions=0,
                                   kv_cache_usage=min(1.0, len(self.running) / 64), prefix_cache_queries=self.queries,
                                   prefix_cache_hits=self.hits, num_blocks=64, block_size=BLOCK, kv_cache_bytes=1 << 20,
                                   prompt_tokens_total=self.prompt_total, generation_tokens_total=self.gen_total,
                                   prompt_tokens_cached_total=self.cached_total,
                                   requests_finished_total=0)

    def call(self, fn: Any) -> Any:
        with self.lock:
            return fn(self.engine)

    def close(self) -> None:
        self._stop = True
        self.gate.set()
        self._thread.join(2)

    def _run(self) -> None:
        while not self._stop:
            self.gate.wait()
            time.sleep(self.step_s)  # the double's own pace, not a test's wait
            with self.lock:
                items = list(self.running.items())
            it, emits = IterationStats(), []
            for rid, run in items:
                if run.done:
                    continue
                _count(it, run, self.step_s)
                token = (len(run.out) * 7 + len(run.prompt)) % 997 + 2
                run.out.append(token)
                with self.lock:
                    self.gen_total += 1
                done = len(run.out) >= run.params.max_tokens
                if done:
                    with self.lock:
                        self.running.pop(rid, None)
                    run.done = True
                    n = len(run.out)
                    it.finished.append(FinishedRequestStats("length", 0.01 + n * self.step_s, 0.001, self.step_s,
                                                            (n - 1) * self.step_s, n * self.step_s, self.step_s,
                                                            len(run.prompt), run.cached, n, 0, run.params.max_tokens))
                emits.append((rid, run, "length" if done else None, [token]))
            for cb in list(self.engine.stats_subscribers) if it.num_generation_tokens else ():
                cb(it)  # as the engine: a step's metrics are recorded before its outputs are delivered
            for emit in emits:
                self._emit(*emit)

def _count(it: IterationStats, run: _Running, step_s: float) -> None:
    """The double's step metrics for the token it is about to give ``run`` (prompt counted at its first)."""
    it.num_generation_tokens += 1
    if run.out:
        it.itls_s.append(step_s)
        return
    it.num_prompt_tokens += len(run.prompt)
    it.num_prompt_cached += run.cached
    it.num_prompt_computed += len(run.prompt) - run.cached
    it.ttfts_s.append(0.01)
