"""vLLM 0.33.0's surface beyond the two generation endpoints: /openapi.json, /version, /ping, /tokenize,
/detokenize, the chat messages agents send (tool calls, tool results), the guided-decoding refusal, and a
full queue's 503 through the real ``openai`` client (over the engine-loop test double)."""

from __future__ import annotations

import json
import threading

import openai
import pytest
from server_http import post, request

MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
MSG = [{"role": "user", "content": "weather in Paris?"}]
AGENT = [*MSG,
         {"role": "assistant", "content": None,
          "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get", "arguments": '{"city": "P"}'}}]},
         {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]


@pytest.fixture
def client_of():
    def make(url: str) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=30)

    return make


def test_openapi_names_every_endpoint_and_its_body(served):
    s = served()
    code, _, data = request(s.url, "GET", "/openapi.json")
    spec = json.loads(data)
    assert code == 200
    assert {"/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize", "/ping", "/version"} <= set(
        spec["paths"])
    body = spec["paths"]["/v1/completions"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/CompletionRequest"}
    assert "max_tokens" in spec["components"]["schemas"]["CompletionRequest"]["properties"]


def test_version_and_ping(served):
    from kvviz import __version__

    s = served()
    code, _, data = request(s.url, "GET", "/version")
    assert code == 200 and json.loads(data) == {"version": __version__}
    for method in ("GET", "POST"):
        assert request(s.url, method, "/ping")[0] == 200


def test_tokenize_a_prompt_and_back(served):
    s = served()
    code, out = post(s.url, "/tokenize", {"prompt": "hi", "return_token_strs": True})
    tok = s.loop.engine.tokenizer
    assert code == 200 and out == {"count": 3, "max_model_len": 256, "tokens": tok.encode("hi"),
                                   "token_strs": tok.convert_ids_to_tokens(tok.encode("hi"))}
    code, out = post(s.url, "/tokenize", {"prompt": "hi", "add_special_tokens": False})
    assert out["tokens"] == tok.encode("hi")[1:] and out["token_strs"] is None
    assert post(s.url, "/detokenize", {"tokens": out["tokens"]}) == (200, {"prompt": "hi"})


def test_tokenize_messages_gives_the_ids_the_chat_endpoint_prefills(served, client_of):
    s = served()
    code, out = post(s.url, "/tokenize", {"messages": AGENT})
    assert code == 200
    answer = client_of(s.url).chat.completions.create(model=MODEL, messages=AGENT, max_tokens=1)
    assert answer.usage.prompt_tokens == out["count"] == len(s.loop.submitted[-1][1])
    assert s.loop.submitted[-1][1] == out["tokens"]
    _, plain = post(s.url, "/tokenize", {"messages": MSG, "add_generation_prompt": False})
    _, special = post(s.url, "/tokenize", {"messages": MSG, "add_generation_prompt": False,
                                           "add_special_tokens": True})
    assert special["count"] >= plain["count"]


@pytest.mark.parametrize(("path", "body", "param"), [
    ("/tokenize", {"messages": MSG, "continue_final_message": True}, "continue_final_message"),
    ("/tokenize", {"prompt": 5}, "prompt"),
    ("/tokenize", {"prompt": "x\ud800"}, "prompt"),
    ("/tokenize", {"prompt": "x", "chat_template": "{{x}}"}, "chat_template"),
    ("/tokenize", {"prompt": "x", "model": "other"}, "model"),
    ("/detokenize", {"tokens": [1, 50_000]}, "tokens"),
    ("/detokenize", {"tokens": [-1]}, "tokens"),
    ("/detokenize", {"tokens": "12"}, "tokens"),
])
def test_tokenize_bad_input_is_a_400_naming_the_field(served, path, body, param):
    s = served()
    code, out = post(s.url, path, body)
    assert code in (400, 404) and out["error"]["param"] == param, out


def test_agent_messages_reach_the_template_with_their_tool_calls(served, client_of):
    s = served()
    answer = client_of(s.url).chat.completions.create(model=MODEL, messages=AGENT, max_tokens=2)
    assert answer.choices[0].finish_reason == "length"
    text = s.loop.engine.tokenizer.decode(s.loop.submitted[-1][1])
    # content null is "", the call's arguments reach the template as an object, the tool result as content
    assert "<assistant>[call get({'city': 'P'})]<tool>sunny<assistant>" in text


@pytest.mark.parametrize("message", [
    {"role": "user", "content": None},
    {"role": "assistant", "content": None},
    {"role": "tool", "content": "x"},
    {"role": "user", "content": "x", "tool_calls": [{"id": "a", "type": "function",
                                                     "function": {"name": "f", "arguments": "{}"}}]},
])
def test_malformed_agent_messages_are_refused(served, client_of, message):
    s = served()
    with pytest.raises(openai.BadRequestError) as bad:
        client_of(s.url).chat.completions.create(model=MODEL, messages=[*MSG, message], max_tokens=1)
    assert bad.value.status_code == 400 and bad.value.body["param"].startswith("messages.1")


@pytest.mark.parametrize(("field", "value"), [
    ("tools", [{"type": "function", "function": {"name": "f", "parameters": {}}}]),
    ("tool_choice", "auto"),
    ("response_format", {"type": "json_object"}),
])
def test_tools_and_response_format_are_refused_as_no_guided_decoding(served, client_of, field, value):
    s = served()
    with pytest.raises(openai.BadRequestError) as bad:
        client_of(s.url).chat.completions.create(model=MODEL, messages=MSG, max_tokens=1, **{field: value})
    err = bad.value.body
    assert err["param"] == field and "no guided decoding" in err["message"]
    assert err["type"] == "BadRequestError" and err["code"] == 400


def test_a_full_queue_is_503_through_the_openai_client(served, client_of):
    s = served(max_waiting=1)
    s.loop.gate.clear()
    first = threading.Thread(target=lambda: post(s.url, "/v1/completions", {"prompt": "wait", "max_tokens": 1}))
    first.start()
    while not s.loop.submitted:
        first.join(0.01)
    with pytest.raises(openai.InternalServerError) as busy:  # the SDK's class for every 5xx
        client_of(s.url).completions.create(model=MODEL, prompt="second", max_tokens=1)
    assert busy.value.status_code == 503 and busy.value.body["type"] == "Service Unavailable"
    s.loop.gate.set()
    first.join(10)
