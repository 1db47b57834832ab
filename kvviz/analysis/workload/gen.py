"""A seeded synthetic request stream in Mooncake's JSONL format (``hash_ids`` of chained blocks).

Three kinds of traffic, interleaved by arrival time:

- chat sessions: a system prompt shared by many sessions, then turns; turn k's prompt is the
  previous prompt plus the previous answer plus a new user message (the prefix grows);
- agent loops: a long tool/instruction prompt, then many quick steps that append tool results;
- one-off requests: a unique prompt, sometimes behind a shared system prompt.

Block ids are chained as real block hashes are: a block's id depends on its parent's id and its own
content, so equal ids mean an equal prefix. The last block may be partial (it has its own id).
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass
from typing import Any

Segment = tuple[int, int]  # (content id, length in tokens)


@dataclass(frozen=True)
class WorkloadGenConfig:
    """Knobs of the generated stream; ``num_requests`` is exact."""

    num_requests: int = 2000
    block_size: int = 512
    seed: int = 0
    system_prompts: int = 6
    system_tokens: tuple[int, int] = (600, 3000)
    chat_share: float = 0.55
    agent_share: float = 0.25
    turn_tokens: tuple[int, int] = (40, 600)
    answer_tokens: tuple[int, int] = (80, 700)
    max_turns: int = 12
    agent_prompt_tokens: tuple[int, int] = (2000, 6000)
    agent_step_tokens: tuple[int, int] = (100, 1500)
    max_agent_steps: int = 30
    oneoff_tokens: tuple[int, int] = (200, 8000)
    rate_per_s: float = 4.0
    think_s: tuple[float, float] = (5.0, 120.0)
    agent_step_s: tuple[float, float] = (1.0, 8.0)
    max_prompt_tokens: int = 128_000


class _Chain:
    """Assigns chained block ids: id(block) = intern((parent id, block content))."""

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self.ids: dict[tuple[Any, ...], int] = {}

    def hash_ids(self, segments: list[Segment]) -> tuple[list[int], int]:
        bs, parent, ids, block, filled = self.block_size, -1, [], [], 0
        total = 0
        for content, length in segments:
            offset = 0
            while offset < length:
                take = min(bs - filled, length - offset)
                block.append((content, offset, take))
                offset += take
                filled += take
                total += take
                if filled == bs:
                    parent = self._intern(parent, block)
                    ids.append(parent)
                    block, filled = [], 0
        if block:
            ids.append(self._intern(parent, block))
        return ids, total

    def _intern(self, parent: int, block: list[tuple[int, int, int]]) -> int:
        key = (parent, tuple(block))
        idx = self.ids.get(key)
        if idx is None:
            idx = self.ids[key] = len(self.ids)
        return idx


def generate(cfg: WorkloadGenConfig = WorkloadGenConfig()) -> list[dict[str, Any]]:
    """The stream as Mooncake lines (timestamp in ms, input_length, output_length, hash_ids)."""
    rng = random.Random(cfg.seed)
    chain = _Chain(cfg.block_size)
    content = iter(range(1, 1 << 62))
    systems = [(next(content), rng.randint(*cfg.system_tokens)) for _ in range(cfg.system_prompts)]
    weights = [1.0 / (i + 1) for i in range(len(systems))]  # a few popular system prompts
    # Each source is (next time, tiebreak, kind, state); a heap gives the arrival order.
    heap: list[tuple[float, int, str, dict[str, Any]]] = []
    seq = 0
    t_new = 0.0
    lines: list[dict[str, Any]] = []
    while len(lines) < cfg.num_requests:
        if not heap or heap[0][0] > t_new:
            kind_roll = rng.random()
            if kind_roll < cfg.chat_share:
                state = {"kind": "chat", "prefix": [rng.choices(systems, weights)[0]],
                         "turns": rng.randint(1, cfg.max_turns)}
            elif kind_roll < cfg.chat_share + cfg.agent_share:
                state = {"kind": "agent", "prefix": [rng.choices(systems, weights)[0],
                                                     (next(content), rng.randint(*cfg.agent_prompt_tokens))],
                         "turns": rng.randint(3, cfg.max_agent_steps)}
            else:
                shared = [rng.choices(systems, weights)[0]] if rng.random() < 0.4 else []
                state = {"kind": "oneoff", "prefix": shared, "turns": 1}
            heapq.heappush(heap, (t_new, seq, state["kind"], state))
            seq += 1
            t_new += rng.expovariate(cfg.rate_per_s)
            continue
        now, _, kind, state = heapq.heappop(heap)
        grow = {"chat": cfg.turn_tokens, "agent": cfg.agent_step_tokens, "oneoff": cfg.oneoff_tokens}[kind]
        prompt = state["prefix"] + [(next(content), rng.randint(*grow))]
        ids, length = chain.hash_ids(prompt)
        output = rng.randint(*cfg.answer_tokens) if kind != "agent" else rng.randint(20, 300)
        lines.append({"timestamp": round(now * 1000), "input_length": length, "output_length": output,
                      "hash_ids": ids})
        state["turns"] -= 1
        if state["turns"] > 0 and length + output < cfg.max_prompt_tokens:
            state["prefix"] = prompt + [(next(content), output)]
            wait = cfg.think_s if kind == "chat" else cfg.agent_step_s
            heapq.heappush(heap, (now + rng.uniform(*wait), seq, kind, state))
            seq += 1
    return lines
