"""ModelRunner: one forward pass per step over the scheduled tokens of every request, with paged attention.

The model's own decoder (``NativeLlamaForCausalLM.forward_tokens``, ``kvviz.model.llama``) runs the step's
tokens as rows ``[T, hidden]`` with the engine's ``PagedAttention`` (``kvviz.engine.attention``: it writes
the new K/V into their blocks and reads each request's past through its block table) and the projection
weights packed for the step (``kvviz.engine.weights``); the LM head then runs on the rows that sample.
"""

from __future__ import annotations

import torch

from kvviz.engine.attention import PagedAttention, SeqInput
from kvviz.engine.kernels import applies as kernel_applies
from kvviz.engine.kernels import paged_attention_op
from kvviz.engine.kv_memory import PagedKVMemory
from kvviz.engine.weights import StepWeights, packed_for


class ModelRunner:
    """Runs the native Llama decoder of ``lm`` over a step's tokens against ``memory``."""

    def __init__(self, lm, memory: PagedKVMemory) -> None:
        self.lm = lm
        self.model = lm.model
        self.memory = memory
        self.device = memory.k[0].device
        cfg = lm.model.config
        self.heads, self.kv_heads, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        self._packed: StepWeights | None = None  # the weights of the last step (``_weights``)
        # ready before the first step, not in a request's time: the compiled kernel (built if its source or
        # checkout changed: tens of seconds) and the packed weights (shared by the model's engines)
        if kernel_applies(self.device, memory.k[0].dtype, self.head_dim, memory.block_size):
            paged_attention_op()
        with lm.lock:
            self._weights()

    def _weights(self) -> StepWeights:
        """The step's projection weights (the model's, shared by its engines), repacked when they changed."""
        self._packed = packed_for(self.model)
        return self._packed

    def _sampled_rows(self, seqs: list[SeqInput], num_rows: int) -> torch.Tensor | None:
        """Rows ``[R']`` of the last token of each sequence that wants logits; None when that is every row."""
        ends, row = [], 0
        for s in seqs:
            row += len(s.token_ids)
            if s.wants_logits:
                ends.append(row - 1)
        return None if ends == list(range(num_rows)) else torch.tensor(ends, dtype=torch.long, device=self.device)

    @torch.inference_mode()
    def execute(self, seqs: list[SeqInput], all_logits: bool = False) -> torch.Tensor:
        """Compute the step; logits ``[R', vocab]`` of the last token of each sequence that wants them
        (``all_logits``: ``[T, vocab]`` of every scheduled token, for tests)."""
        dev = self.device
        ids = torch.tensor([t for s in seqs for t in s.token_ids], dtype=torch.long, device=dev)  # [T]
        positions = torch.tensor([p for s in seqs for p in range(s.start, s.end)], dtype=torch.long, device=dev)
        with self.lm.lock:
            weights = self._weights()
            attn = PagedAttention(self.memory, seqs, self.heads, self.kv_heads, self.head_dim)
            keep = None if all_logits else self._sampled_rows(seqs, ids.shape[0])
            x = self.model.forward_tokens(ids, positions, attn, weights.layers, keep, trim_last=True)  # [R', hidden]
            return weights.lm_head(x)  # [R', vocab]


__all__ = ["ModelRunner", "SeqInput"]
