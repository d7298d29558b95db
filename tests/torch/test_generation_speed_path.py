"""transformers' generate() with a static cache on the lazy device: the
decoding step replays a captured call (issue 40 item 3, per-token time).

Traced per op, every token ran the model's Python to make a graph the
barrier found compiled already. Now the static cache's decoding step (the
model's forward, handed to transformers as its compiled call) is captured:
recorded at the first tokens, replayed at the others and in later
generate() calls, with tokens equal to eager's and the programs bounded as
before. These tests count traces, replays and programs, never time.
"""

import pytest
import torch

import lazycore
import lazycore.torch as ltorch
from lazycore.frontends.torch import generation
from lazycore.ir import events
from lazycore.runtime import planning
from lazycore.ir.config import settings

transformers = pytest.importorskip("transformers")

from _bits import BY_HAND  # noqa: E402
from _generation_models import (  # noqa: E402,F401
    LENGTHS, ONE_AND_MANY, VOCAB, gpt2 as _gpt2, programs as _programs, prompts as _prompts)


@pytest.fixture
def clean_runtime():
    """conftest's, but the compile cache kept from test to test: every test
    here generates with the same tiny GPT-2 and prompts, and a cleared cache
    compiled the same prompt and decoding programs again in each. The tests
    count programs within a call, never from a cold cache
    (tests/torch/test_generation_programs.py counts a cold call's)."""
    import gc

    gc.collect()
    lazycore.mark_step(wait=True)
    lazycore.metrics.reset()
    yield


def _generate(model, ids, mask, n, cache):
    kw = dict(max_new_tokens=n, do_sample=False)
    if cache == "static":
        kw["cache_implementation"] = "static"
    with torch.no_grad():
        return model.generate(ids, attention_mask=mask, **kw).cpu()


def _counts(model):
    return generation.decoding_steps(model)  # (a step's own calls and greedy decoding's whole tokens)


@pytest.mark.parametrize("lengths", ONE_AND_MANY)
def test_static_decoding_replays(clean_runtime, lengths):
    n = 12
    eager, lazy = _gpt2(), _gpt2().to(ltorch.device())
    ids, mask = _prompts(lengths)
    dev = ltorch.device()
    want = _generate(eager, ids, mask, n, "static")
    tokens = lazycore.metrics.counters()["generated_tokens"]
    got = _generate(lazy, ids.to(dev), mask.to(dev), n, "static")
    assert torch.equal(got, want), (got, want)
    assert lazycore.metrics.counters()["generated_tokens"] - tokens == n  # one model call per token, as traced
    traces, replays = _counts(lazy)
    # n - 1 decoding steps (the prompt's forward makes the first token): the
    # first ones are traced (a recording is trusted once two agree), the rest replay
    assert traces + replays == n - 1
    assert traces <= 3 and replays >= n - 4
    # a second call, a new cache: every decoding step replays, nothing compiles
    before = _programs()
    got = _generate(lazy, ids.to(dev), mask.to(dev), n, "static")
    assert torch.equal(got, want)
    assert _counts(lazy) == (traces, replays + n - 1)
    assert _programs() == before


def _llama():
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                   num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=128,
                                   pad_token_id=0)
    model = transformers.LlamaForCausalLM(cfg).eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model


def test_llama_decoding_replays(clean_runtime):
    # another family's static cache (grouped-query attention, rotary positions)
    n = 8
    eager, lazy = _llama(), _llama().to(ltorch.device())
    ids, mask = _prompts(LENGTHS)
    dev = ltorch.device()
    want = _generate(eager, ids, mask, n, "static")
    for _ in range(2):
        assert torch.equal(_generate(lazy, ids.to(dev), mask.to(dev), n, "static"), want)
    traces, replays = _counts(lazy)
    assert traces <= 3 and traces + replays == 2 * (n - 1)


def test_static_decoding_other_lengths(clean_runtime):
    # another max_new_tokens: another cache length, so another recording; tokens still eager's
    eager, lazy = _gpt2(), _gpt2().to(ltorch.device())
    ids, mask = _prompts(LENGTHS)
    dev = ltorch.device()
    for n in (6, 10, 6):
        want = _generate(eager, ids, mask, n, "static")
        got = _generate(lazy, ids.to(dev), mask.to(dev), n, "static")
        assert torch.equal(got, want), (n, got, want)
    traces, replays = _counts(lazy)
    assert replays >= 5 + 9 + 5 - 2 * 3  # the repeated n=6 call replays all its 5 steps


def test_static_decoding_off_traces(clean_runtime, monkeypatch):
    # with the capture off, every step is traced as before: no decoding step is made
    monkeypatch.setattr(settings, "generation_replay", False)
    eager, lazy = _gpt2(), _gpt2().to(ltorch.device())
    ids, mask = _prompts((8,))
    dev = ltorch.device()
    want = _generate(eager, ids, mask, 6, "static")
    assert torch.equal(_generate(lazy, ids.to(dev), mask.to(dev), 6, "static"), want)
    assert lazy not in generation._DECODERS


def test_default_cache_decodes_with_a_static_one(clean_runtime):
    # asked for the default cache, which nobody sees: a static one, whose steps
    # replay; the default cache's tokens (eager's) all the same
    n = 10
    eager, lazy = _gpt2(), _gpt2().to(ltorch.device())
    ids, mask = _prompts(LENGTHS)
    dev = ltorch.device()
    want = _generate(eager, ids, mask, n, "dynamic")
    for _ in range(2):
        assert torch.equal(_generate(lazy, ids.to(dev), mask.to(dev), n, "dynamic"), want)
    traces, replays = _counts(lazy)
    assert traces <= 3 and traces + replays == 2 * (n - 1)


def test_default_cache_kept_where_seen_or_off(clean_runtime, monkeypatch):
    # returned to the caller (return_dict_in_generate): the default cache, its
    # steps traced (in buckets); likewise with the swap turned off
    eager, lazy = _gpt2(), _gpt2().to(ltorch.device())
    ids, mask = _prompts((8,))
    dev = ltorch.device()
    want = _generate(eager, ids, mask, 6, "dynamic")
    with torch.no_grad():
        out = lazy.generate(ids.to(dev), attention_mask=mask.to(dev), max_new_tokens=6, do_sample=False,
                            return_dict_in_generate=True)
    assert torch.equal(out.sequences.cpu(), want)
    assert type(out.past_key_values).__name__ == "DynamicCache"
    assert lazy not in generation._DECODERS
    monkeypatch.setattr(settings, "generation_static_cache", False)
    assert torch.equal(_generate(lazy, ids.to(dev), mask.to(dev), 6, "dynamic"), want)
    assert lazy not in generation._DECODERS


@BY_HAND  # its programs with the inputs made op by op are compiled for this test alone: 38 s of a CI worker
@pytest.mark.parametrize("lengths", ONE_AND_MANY)
def test_mask_made_in_the_replayed_step(clean_runtime, monkeypatch, lengths):
    # the decoding step's inputs but the new ids and positions are made in its
    # replayed call (transformers' 4-D attention mask from the filled length
    # and a padded 2-D mask the step grows), not op by op before it: each
    # token's barrier has fewer nodes. Same tokens either way.
    n = 8
    eager, lazy = _gpt2(), _gpt2().to(ltorch.device())
    ids, mask = _prompts(lengths)
    dev = ltorch.device()
    want = _generate(eager, ids, mask, n, "static")
    nodes = {}
    for defer in (False, True):
        monkeypatch.setattr(generation, "_DEFER_INPUTS", defer)
        assert torch.equal(_generate(lazy, ids.to(dev), mask.to(dev), n, "static"), want)
        before = len(events.EVENTS.graphs)
        assert torch.equal(_generate(lazy, ids.to(dev), mask.to(dev), n, "static"), want)
        nodes[defer] = [g[0] for g in list(events.EVENTS.graphs)[before:]][-3:]  # the last tokens' barriers
    assert max(nodes[True]) < min(nodes[False]), nodes
    traces, replays = _counts(lazy)
    assert traces <= 6 and replays >= 4 * (n - 1) - 6


def test_deferred_inputs_traced_where_not_captured(clean_runtime, monkeypatch):
    # a step whose deferred inputs cannot be captured makes the rest of them
    # (the padded mask's new position, the 4-D mask) op by op: same tokens
    monkeypatch.setattr(generation._DecodingStep, "_plan", lambda self, kwargs: None)
    eager, lazy = _gpt2(), _gpt2().to(ltorch.device())
    ids, mask = _prompts(LENGTHS)
    dev = ltorch.device()
    want = _generate(eager, ids, mask, 6, "static")
    assert torch.equal(_generate(lazy, ids.to(dev), mask.to(dev), 6, "static"), want)
    assert _counts(lazy) == (0, 0)


def test_repeated_call_recalls_padded_barriers(clean_runtime, monkeypatch):
    # a decoding barrier pads the growing ids and mask to their bucket; a call
    # like an earlier one recalls each barrier's plan, padded program
    # included (lazycore.runtime.stepplans), and walks no graph
    eager, lazy = _gpt2(), _gpt2().to(ltorch.device())
    ids, mask = _prompts(LENGTHS)
    dev = ltorch.device()
    want = _generate(eager, ids, mask, 8, "static")
    walks = []
    walk = planning.walk
    monkeypatch.setattr(planning, "walk", lambda step: (walks.append(step), walk(step))[1])
    for _ in range(3):
        walks.clear()
        assert torch.equal(_generate(lazy, ids.to(dev), mask.to(dev), 8, "static"), want)
    assert walks == []


def test_eager_model_unchanged():
    # a CPU model's static-cache generate() runs transformers' own path
    model = _gpt2()
    ids, mask = _prompts((8,))
    first = _generate(model, ids, mask, 5, "static")
    assert torch.equal(_generate(model, ids, mask, 5, "static"), first)
    assert model not in generation._DECODERS


@pytest.mark.parametrize("lengths", ONE_AND_MANY)
def test_a_token_recalls_the_plan_of_the_token_before(clean_runtime, monkeypatch, lengths):
    # a decoding barrier's ids and mask are one longer than the token
    # before's, so every digest over them differs and no step plan of an
    # earlier call holds it (a prompt of a length not seen). Its nodes
    # differ from the token before's in their padded sizes alone: it runs
    # that token's program with its valid sizes moved, walking nothing
    # (lazycore.runtime.stepplans.alike). Every barrier walked before.
    from lazycore.runtime import buckets, stepplans

    eager, lazy = _gpt2(), _gpt2().to(ltorch.device())
    ids, mask = _prompts(lengths)
    dev = ltorch.device()
    n = 12
    want = _generate(eager, ids, mask, n, "static")
    assert torch.equal(_generate(lazy, ids.to(dev), mask.to(dev), n, "static"), want)
    walks, barriers = [], [0]
    walk, recall = planning.walk, planning.recall
    monkeypatch.setattr(planning, "walk", lambda step: (walks.append(step), walk(step))[1])
    monkeypatch.setattr(planning, "recall", lambda step: (barriers.__setitem__(0, barriers[0] + 1), recall(step))[1])
    stepplans.clear()  # as at lengths never seen: no plan of the call before
    buckets.PLANS.clear()
    assert torch.equal(_generate(lazy, ids.to(dev), mask.to(dev), n, "static"), want)
    # walked: the setup's reads, the prompt, the first decoding tokens (traced
    # and recorded); 14-15 of 14-15 barriers walked before
    assert barriers[0] >= n and len(walks) <= 6
