"""The engine's per-request sampling outputs on a tiny random Llama (fast lane): n children of one prompt
share its full blocks (ref_cnt n, as vLLM v1's parallel sampling through the prefix cache), each sampled
token's logprob is log_softmax of the model's own logits (a direct forward), and stop_reason names the
stop string or stop token id that ended a request."""

from __future__ import annotations

import pytest
import torch
from tiny_llm import TINY_BS, VOCAB, drain, engine_with, greedy_reference, reference_logits, tiny_lm

from kvviz.engine import SamplingParams
from kvviz.errors import CodedError

BS = TINY_BS


@pytest.fixture(scope="module")
def lm():
    return tiny_lm()


def test_n_children_share_the_prompt_blocks_with_ref_cnt_n(lm):
    engine = engine_with(lm)
    prompt = [(7 * i) % (VOCAB - 1) + 1 for i in range(13)]  # 3 full blocks and 1 token
    n = 3
    for i in range(n):
        engine.add_request(f"{i}_cmpl", prompt, SamplingParams(max_tokens=6, temperature=1.0, seed=5 + i,
                                                               ignore_eos=True))
    engine.step()
    tables = [engine.manager.block_ids(f"{i}_cmpl") for i in range(n)]
    full = len(prompt) // BS
    assert all(t[:full] == tables[0][:full] for t in tables)  # one physical copy of the prompt's full blocks
    assert len({t[full] for t in tables}) == n  # each child writes its own last block
    for block_id in tables[0][:full]:
        assert engine.pool.blocks[block_id].ref_cnt == n
    done = drain(engine)
    assert {o.num_cached_tokens for o in done.values()} == {0, full * BS}  # the first computed, the rest hit
    for block_id in tables[0][:full]:
        assert engine.pool.blocks[block_id].ref_cnt == 0  # freed, still cached


def test_logprobs_are_log_softmax_of_the_model_logits(lm):
    engine = engine_with(lm)
    prompt = [3, 9, 27, 50, 1, 14, 33]
    engine.add_request("lp", prompt, SamplingParams(max_tokens=5, temperature=0.8, seed=11, logprobs=4,
                                                    ignore_eos=True))
    out = drain(engine)["lp"]
    assert out.logprobs is not None and len(out.logprobs) == len(out.token_ids) == 5
    logits = reference_logits(lm, prompt + out.token_ids)  # [len, vocab]
    for i, (token, lp) in enumerate(zip(out.token_ids, out.logprobs, strict=True)):
        ref = torch.log_softmax(logits[len(prompt) - 1 + i].float(), dim=-1)  # raw: no temperature
        assert lp.token_id == token
        assert lp.logprob == pytest.approx(float(ref[token]), abs=1e-4)
        assert lp.rank == int((ref > ref[token]).sum()) + 1
        assert [t for t, _ in lp.top] == ref.topk(4).indices.tolist()
        assert [v for _, v in lp.top] == pytest.approx(ref.topk(4).values.tolist(), abs=1e-4)


def test_no_logprobs_unless_asked(lm):
    engine = engine_with(lm)
    engine.add_request("plain", [5, 6, 7], SamplingParams(max_tokens=2, ignore_eos=True))
    assert drain(engine)["plain"].logprobs is None


def test_stop_reason_names_the_stop_token_and_string(lm):
    prompt = [4, 8, 15, 16, 23, 42]
    ref = greedy_reference(lm, prompt, 6)
    engine = engine_with(lm)
    engine.add_request("tok", prompt, SamplingParams(max_tokens=6, stop_token_ids=(ref[2],), ignore_eos=True))
    engine.add_request("str", prompt, SamplingParams(max_tokens=6, stop=(f"<{ref[1]}>",), ignore_eos=True))
    engine.add_request("len", prompt, SamplingParams(max_tokens=2, ignore_eos=True))
    done = drain(engine)
    first = ref.index(ref[2])  # the earliest place the stop token comes
    assert done["tok"].stop_reason == ref[2] and done["tok"].finish_reason == "stop"
    assert done["tok"].text == "".join(f"<{t}>" for t in ref[:first])  # the stop token's text left out
    assert done["str"].stop_reason == f"<{ref[1]}>" and done["str"].finish_reason == "stop"
    assert done["len"].stop_reason is None and done["len"].finish_reason == "length"


@pytest.mark.parametrize("seed", [-(2**63), -1, 2**63 - 1, 2**63 + 16])
def test_any_int64_seed_is_reproducible(lm, seed):
    runs = []
    for _ in range(2):
        engine = engine_with(lm)
        engine.add_request("s", [9, 8, 7], SamplingParams(max_tokens=4, temperature=1.0, seed=seed, ignore_eos=True))
        runs.append(drain(engine)["s"].token_ids)
    assert runs[0] == runs[1]


def test_logprobs_over_the_limit_refused():
    with pytest.raises(CodedError) as err:
        SamplingParams(logprobs=21)
    assert err.value.code == "bad_logprobs"


def test_chat_token_choices_are_the_engine_logprobs(lm):
    from kvviz.experiments.sessions.chat import token_choices

    engine = engine_with(lm)
    engine.add_request("c", [2, 4, 6, 8], SamplingParams(max_tokens=3, logprobs=3, ignore_eos=True))
    out = drain(engine)["c"]
    choices = token_choices(lm.tokenizer, out.logprobs)
    assert [c.text for c in choices] == [lm.tokenizer.decode([t], skip_special_tokens=False) for t in out.token_ids]
    for c, e in zip(choices, out.logprobs, strict=True):
        assert c.prob == pytest.approx(float(torch.tensor(e.logprob).exp())) and len(c.top) == 3
        assert c.top[0][1] == pytest.approx(c.prob)  # greedy: the chosen token is the likeliest
        assert sum(p for _, p in c.top) <= 1.0 + 1e-6
