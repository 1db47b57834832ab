"""vLLM 0.33.0's generation parameters through the real ``openai`` client and raw HTTP, over the real engine
on a tiny random Llama (fast lane): n choices, logprobs (completions and chat, streamed or not) equal to a
direct forward's log_softmax, echo, lists of prompts, int64 seeds, stop_reason, and vLLM's refusals."""

from __future__ import annotations

import json

import openai
import pytest
import torch
from engine.tiny_llm import VOCAB, reference_logits, tiny_lm
from server_http import post, request, sse_events

from kvviz.engine import EngineConfig, EngineLoop, LLMEngine
from kvviz.server.app import create_app
from kvviz.server.config import ServerConfig
from kvviz.server.uvicorn_server import ServerThread

COMPLETIONS = "/v1/completions"
CHAT = "/v1/chat/completions"
BOS, EOS = 1, 0


class LetterTokenizer:
    """One character per token: id i >= 1 is the character ``chr(64 + i)`` (A..}), 0 the end of sequence."""

    eos_token_id = EOS

    def __len__(self) -> int:
        return VOCAB

    def encode(self, text: str) -> list[int]:
        return [(ord(c) - 64) % (VOCAB - 2) + 2 for c in text]

    def __call__(self, text: str, add_special_tokens: bool = True, return_attention_mask: bool = False) -> dict:
        return {"input_ids": ([BOS] if add_special_tokens else []) + self.encode(text)}

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return "".join("</s>" if i == EOS else chr(64 + i) for i in ids if not (skip_special_tokens and i == EOS))

    def apply_chat_template(self, messages: list[dict], tokenize: bool, add_generation_prompt: bool) -> list[int]:
        return [BOS] + self.encode("".join(f"{m['role'][0]}{m['content']}" for m in messages) + "a")


def ids_of(tokens: list[str]) -> list[int]:
    return [EOS if t == "</s>" else ord(t) - 64 for t in tokens]


@pytest.fixture(scope="module")
def lm():
    model = tiny_lm()
    model.tokenizer = LetterTokenizer()
    return model


@pytest.fixture(scope="module")
def url(lm):
    engine = LLMEngine(lm, EngineConfig(block_size=4, kv_cache_bytes=256 * 4 * 2 * 2 * 2 * 8 * 4,
                                        max_num_batched_tokens=64))
    loop = EngineLoop(engine)
    thread = ServerThread(create_app(lambda: loop, ServerConfig(port=0, presenter_key="pk")), "127.0.0.1", 0).start()
    yield thread.url
    thread.stop()
    loop.close()


@pytest.fixture
def client(url):
    return openai.OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0)


def check_logprobs(lm, prompt_ids: list[int], token_ids: list[int], token_logprobs: list[float],
                   tops: list[list[tuple[int, float]]]) -> None:
    """Each logprob is log_softmax of the plain decoder's logits at that position (raw, no temperature)."""
    logits = reference_logits(lm, prompt_ids + token_ids)  # [len, vocab]
    for i, (token, lp) in enumerate(zip(token_ids, token_logprobs, strict=True)):
        ref = torch.log_softmax(logits[len(prompt_ids) - 1 + i].float(), dim=-1)
        assert lp == pytest.approx(float(ref[token]), abs=1e-4)
        for tid, value in tops[i]:
            assert value == pytest.approx(float(ref[tid]), abs=1e-4)


def test_n_choices_share_one_prompt(client):
    r = client.completions.create(model="embedded", prompt="ABCDEFGHIJ", n=3, max_tokens=5, temperature=1.0, seed=9,
                                  extra_body={"ignore_eos": True})
    assert sorted(c.index for c in r.choices) == [0, 1, 2]
    assert all(c.finish_reason == "length" for c in r.choices)
    assert r.usage.prompt_tokens == 11 and r.usage.completion_tokens == 15  # the prompt counted once
    assert r.usage.prompt_tokens_details.cached_tokens == 8  # children after the first hit its 2 full blocks
    again = client.completions.create(model="embedded", prompt="ABCDEFGHIJ", n=3, max_tokens=5, temperature=1.0,
                                      seed=9, extra_body={"ignore_eos": True})
    assert [c.text for c in again.choices] == [c.text for c in r.choices]  # child i draws with seed + i


def test_completion_logprobs_are_the_models(client, lm):
    r = client.completions.create(model="embedded", prompt="HELLO", max_tokens=6, temperature=0.7, seed=3, logprobs=3,
                                  extra_body={"ignore_eos": True})
    lp = r.choices[0].logprobs
    tokens = ids_of(lp.tokens)
    assert len(tokens) == 6 and lp.text_offset == [sum(len(t) for t in lp.tokens[:i]) for i in range(6)]
    for token_text, top in zip(lp.tokens, lp.top_logprobs, strict=True):
        assert token_text in top and len(top) <= 4  # the sampled token and the top 3
    tops = [[(ids_of([t])[0], v) for t, v in top.items()] for top in lp.top_logprobs]
    check_logprobs(lm, LetterTokenizer()("HELLO")["input_ids"], tokens, lp.token_logprobs, tops)


def test_streamed_completion_logprobs_equal_the_whole_answer(url):
    body = {"prompt": "STREAM", "max_tokens": 7, "temperature": 0.9, "seed": 17, "logprobs": 2, "ignore_eos": True}
    status, whole = post(url, COMPLETIONS, body)
    assert status == 200
    status, _, data = request(url, "POST", COMPLETIONS, {**body, "stream": True})
    chunks = [json.loads(e) for e in sse_events(data) if e != "[DONE]"]
    tokens, offsets, lps = [], [], []
    for c in chunks:
        if c["choices"][0]["logprobs"]:
            tokens += c["choices"][0]["logprobs"]["tokens"]
            offsets += c["choices"][0]["logprobs"]["text_offset"]
            lps += c["choices"][0]["logprobs"]["token_logprobs"]
    want = whole["choices"][0]["logprobs"]
    assert tokens == want["tokens"] and offsets == want["text_offset"]
    # the same tokens; the numbers to fp32 rounding: the second request's blocks sit elsewhere in the pool, and
    # attention reads a run of consecutive blocks in place but selects scattered ones (1e-7 apart seen)
    assert lps == pytest.approx(want["token_logprobs"], rel=0, abs=1e-5)
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["choices"][0]["text"]


def test_chat_logprobs_and_top_logprobs(client, lm):
    r = client.chat.completions.create(model="embedded", messages=[{"role": "user", "content": "HI"}], max_tokens=4,
                                       temperature=1.0, seed=5, logprobs=True, top_logprobs=3,
                                       extra_body={"ignore_eos": True})
    content = r.choices[0].logprobs.content
    assert len(content) == 4
    for item in content:
        assert item.bytes == list(item.token.encode()) and len(item.top_logprobs) == 3
        assert item.top_logprobs[0].token == item.token  # vLLM's order: the sampled token first
    prompt = LetterTokenizer().apply_chat_template([{"role": "user", "content": "HI"}], True, True)
    check_logprobs(lm, prompt, ids_of([c.token for c in content]), [c.logprob for c in content],
                   [[(ids_of([t.token])[0], t.logprob) for t in c.top_logprobs] for c in content])
    stream = client.chat.completions.create(model="embedded", messages=[{"role": "user", "content": "HI"}],
                                            max_tokens=4, temperature=1.0, seed=5, logprobs=True, top_logprobs=3,
                                            stream=True, extra_body={"ignore_eos": True})
    streamed = [i.token for ch in stream for c in ch.choices if c.logprobs for i in c.logprobs.content]
    assert streamed == [c.token for c in content]


def test_echo_and_a_list_of_prompts(client, url):
    r = client.completions.create(model="embedded", prompt=["ABC", "XYZW"], n=2, max_tokens=3, temperature=1.0,
                                  echo=True, extra_body={"ignore_eos": True})
    assert [c.index for c in r.choices] == [0, 1, 2, 3]
    assert [c.text[:3] for c in r.choices[:2]] == ["ABC", "ABC"] and r.choices[2].text.startswith("XYZW")
    assert r.usage.prompt_tokens == 4 + 5 and r.usage.completion_tokens == 12
    status, _, data = request(url, "POST", COMPLETIONS, {"prompt": [[5, 6, 7], [8, 9]], "max_tokens": 2,
                                                         "echo": True, "stream": True, "ignore_eos": True})
    chunks = [json.loads(e) for e in sse_events(data) if e != "[DONE]"]
    texts: dict[int, str] = {}
    for c in chunks:
        ch = c["choices"][0]
        texts[ch["index"]] = texts.get(ch["index"], "") + ch["text"]
    assert status == 200 and texts[0].startswith("EFG") and texts[1].startswith("HI")  # token prompts decoded


@pytest.mark.parametrize("seed", [-(2**63), -5, 2**63 - 1])
def test_any_int64_seed_reproduces(client, seed):
    texts = [client.completions.create(model="embedded", prompt="SEED", max_tokens=6, temperature=1.0, seed=seed,
                                       extra_body={"ignore_eos": True}).choices[0].text for _ in range(2)]
    assert texts[0] == texts[1]


def test_stop_reason_is_the_stop_string_or_token(client):
    greedy = client.completions.create(model="embedded", prompt="STOP", max_tokens=6, temperature=0,
                                       extra_body={"ignore_eos": True}).choices[0]
    assert greedy.finish_reason == "length" and greedy.stop_reason is None
    stop = greedy.text[2:4]
    r = client.completions.create(model="embedded", prompt="STOP", max_tokens=6, temperature=0, stop=[stop],
                                  extra_body={"ignore_eos": True}).choices[0]
    assert r.finish_reason == "stop" and r.stop_reason == stop and r.text == greedy.text[:greedy.text.index(stop)]
    token = ord(greedy.text[1]) - 64
    c = client.chat.completions.create(model="embedded", messages=[{"role": "user", "content": "Q"}], max_tokens=6,
                                       temperature=0, extra_body={"ignore_eos": True, "stop_token_ids": [token]})
    assert c.choices[0].finish_reason == "stop" and c.choices[0].stop_reason == token


def test_vllm_refusals(client):
    with pytest.raises(openai.BadRequestError) as err:
        client.completions.create(model="embedded", prompt="x", n=2, temperature=0)
    assert "n must be 1 when using greedy sampling, got 2." in str(err.value)
    with pytest.raises(openai.BadRequestError) as err:
        client.completions.create(model="embedded", prompt="x", logprobs=21)
    assert "greater than max allowed: 20" in str(err.value)
    with pytest.raises(openai.BadRequestError) as err:  # VLLM_MAX_STOP_STRINGS, 4 by default
        client.completions.create(model="embedded", prompt="x", stop=["a", "b", "c", "d", "e"])
    assert "List should have at most 4 items after validation, not 5" in str(err.value)
