"""The server's HTTP surface over the engine-loop test double: shapes, streaming, usage, keys, models."""

from __future__ import annotations

import json

from server_http import post, request, sse_events

COMPLETIONS = "/v1/completions"
CHAT = "/v1/chat/completions"


def test_completion_usage_and_cached_tokens(served):
    s = served()
    body = {"model": "HuggingFaceTB/SmolLM2-135M-Instruct", "prompt": "the same long prompt", "max_tokens": 3}
    status, first = post(s.url, COMPLETIONS, body)
    assert status == 200, first
    assert first["object"] == "text_completion" and first["id"].startswith("cmpl-")
    assert first["choices"][0]["finish_reason"] == "length" and len(first["choices"][0]["text"]) == 3
    usage = first["usage"]
    prompt_len = len("the same long prompt") + 1
    assert usage["prompt_tokens"] == prompt_len and usage["completion_tokens"] == 3
    assert usage["total_tokens"] == prompt_len + 3
    assert usage["prompt_tokens_details"] == {"cached_tokens": 0}
    _, second = post(s.url, COMPLETIONS, body)
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] == (prompt_len - 1) // 4 * 4


def test_extra_fields_reach_the_engine(served):
    s = served()
    status, _ = post(s.url, COMPLETIONS, {"model": "embedded", "prompt": [5, 6, 7], "max_tokens": 2,
                                          "cache_salt": "alice", "priority": 3, "seed": 7, "temperature": 0.5,
                                          "stop": ["zz"], "user": "laptop-3", "n": 1})
    assert status == 200
    rid, prompt, params, kw = s.loop.submitted[-1]
    assert prompt == [5, 6, 7] and kw == {"cache_salt": "alice", "priority": 3, "client": "laptop-3"}
    assert (params.max_tokens, params.temperature, params.seed, params.stop) == (2, 0.5, 7, ("zz",))
    assert rid.startswith("cmpl-")


def test_chat_uses_the_chat_template_and_streams(served):
    s = served()
    body = {"model": "embedded", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3,
            "stream": True, "stream_options": {"include_usage": True}}
    status, headers, data = request(s.url, "POST", CHAT, body)
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = sse_events(data)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert len(text) == 3
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "length"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 3
    _, prompt, _, _ = s.loop.submitted[-1]
    assert prompt == s.loop.engine.tokenizer.encode("<user>hi<assistant>")


def test_completion_stream_ends_with_done(served):
    s = served()
    status, _, data = request(s.url, "POST", COMPLETIONS, {"prompt": "abc", "max_tokens": 4, "stream": True})
    events = sse_events(data)
    assert status == 200 and events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert "".join(c["choices"][0]["text"] for c in chunks) and chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert "usage" not in chunks[-1]


def test_models_health_and_unknown_model(served):
    s = served()
    status, _, data = request(s.url, "GET", "/v1/models")
    listing = json.loads(data)
    assert status == 200 and listing["data"][0]["id"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert request(s.url, "GET", "/health")[0] == 200
    status, err = post(s.url, COMPLETIONS, {"model": "gpt-4o", "prompt": "x"})
    assert status == 404 and err["error"]["type"] == "NotFoundError" and err["error"]["param"] == "model"


def test_api_key_guards_v1_but_not_health(served):
    s = served(api_key="sekret")
    status, err = post(s.url, COMPLETIONS, {"prompt": "x", "max_tokens": 1})
    assert status == 401 and err["error"]["code"] == 401
    assert post(s.url, COMPLETIONS, {"prompt": "x", "max_tokens": 1}, headers={"Authorization": "Bearer nope"})[0] == 401
    ok, _ = post(s.url, COMPLETIONS, {"prompt": "x", "max_tokens": 1}, headers={"Authorization": "Bearer sekret"})
    assert ok == 200
    assert request(s.url, "GET", "/health")[0] == 200 and request(s.url, "GET", "/metrics")[0] == 200


def test_reset_prefix_cache_needs_the_presenter_key(served):
    s = served()
    post(s.url, COMPLETIONS, {"prompt": "abcdefghij", "max_tokens": 1})
    assert post(s.url, "/reset_prefix_cache")[0] == 401
    assert post(s.url, "/reset_prefix_cache", headers={"X-Presenter-Key": "wrong"})[0] == 403
    assert s.loop.engine.resets == 0
    status, body = post(s.url, "/reset_prefix_cache", headers={"X-Presenter-Key": "pk"})
    assert status == 200 and body == {"reset": True} and s.loop.engine.resets == 1


def test_openai_client_against_the_server(served):
    import openai

    s = served()
    client = openai.OpenAI(base_url=f"{s.url}/v1", api_key="unused", max_retries=0)
    done = client.completions.create(model="embedded", prompt="hello", max_tokens=2)
    assert done.usage.prompt_tokens == 6 and done.usage.completion_tokens == 2
    chat = client.chat.completions.create(model="embedded", messages=[{"role": "user", "content": "hey"}],
                                          max_tokens=2)
    assert chat.choices[0].message.role == "assistant" and chat.usage.prompt_tokens_details.cached_tokens == 0
    parts = list(client.chat.completions.create(model="embedded", messages=[{"role": "user", "content": "hey"}],
                                                max_tokens=3, stream=True))
    assert "".join(p.choices[0].delta.content or "" for p in parts if p.choices) and parts[-1].choices[0].finish_reason
