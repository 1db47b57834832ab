"""Prompt and chat-message lines: tokenized by the passed-in tokenizer (chat template for messages),
then hashed as token_ids; the tokenizer is loaded only when such a line appears."""

from __future__ import annotations

import json

import pytest

from kvviz.analysis.workload.load import load_trace
from kvviz.analysis.workload.parse import parse_trace
from kvviz.analysis.workload.trace import WorkloadError


class FakeTokenizer:
    """One token per character; the chat template wraps each message as ``<role>content|``."""

    def __call__(self, text, add_special_tokens=True, return_attention_mask=False):
        return {"input_ids": [ord(ch) for ch in text]}

    def apply_chat_template(self, messages, tokenize=True, add_generation_prompt=False):
        text = "".join(f"<{m['role']}>{m['content']}|" for m in messages) + ("<assistant>" if add_generation_prompt else "")
        return [ord(ch) for ch in text]


def _loader(calls: list):
    def load():
        calls.append(1)
        return FakeTokenizer()
    return load


def test_prompt_and_messages_become_token_ids():
    calls: list = []
    system = "You are a helpful assistant. " * 3
    lines = [{"prompt": system + "question one"},
             {"messages": [{"role": "system", "content": system}, {"role": "user", "content": "hi"}]},
             {"messages": [{"role": "system", "content": [{"type": "text", "text": system}]},
                           {"role": "user", "content": "hello"}]},
             {"token_ids": [ord(ch) for ch in system + "question two"]}]
    trace = load_trace("\n".join(json.dumps(x) for x in lines), 8, _loader(calls))
    assert len(calls) == 1 and trace.kinds == {"prompt", "messages", "token_ids"}
    same = parse_trace("\n".join(json.dumps({"token_ids": [ord(c) for c in t]}) for t in (
        system + "question one",
        f"<system>{system}|<user>hi|<assistant>", f"<system>{system}|<user>hello|<assistant>",
        system + "question two")), 8)
    assert [r.blocks for r in trace.requests] == [r.blocks for r in same.requests]


def test_no_tokenizer_for_token_traces_and_bad_lines():
    calls: list = []
    load_trace('{"token_ids": [1, 2, 3]}', 16, _loader(calls))
    assert calls == []
    for text, msg in [('{"prompt": ""}', "line 1: 'prompt' must be a non-empty string"),
                      ('{"prompt": 5}', "line 1: 'prompt' must be a non-empty string"),
                      ('{"messages": []}', "line 1: 'messages' must be a non-empty list"),
                      ('{"messages": [{"content": "x"}]}', "line 1: messages[0] must be an object"),
                      ('{"messages": [{"role": "user", "content": 3}]}', "messages[0].content must be")]:
        with pytest.raises(WorkloadError, match=msg.replace("[", r"\[").replace("]", r"\]")):
            load_trace(text, 16, _loader(calls))


@pytest.mark.model
def test_real_tokenizer_chat_template():
    lines = [{"messages": [{"role": "user", "content": "What is a KV cache?"}]},
             {"messages": [{"role": "user", "content": "What is a KV cache?"},
                           {"role": "assistant", "content": "Stored keys and values."},
                           {"role": "user", "content": "Why does it help?"}]}]
    trace = load_trace("\n".join(json.dumps(x) for x in lines), 4)
    assert trace.requests[0].input_tokens > 5 and trace.requests[1].blocks[0] == trace.requests[0].blocks[0]
