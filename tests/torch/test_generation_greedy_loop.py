"""Greedy generate() with a captured decoding step on the lazy device: each
later token is one replay (issue 40 item 3, per-token host cost).

transformers' ``_sample`` ran, per token, the step and then its bookkeeping
op by op (the mask and positions grown by ``torch.cat``, the logits' argmax,
the ids grown, the stopping criteria, the stop check): about twenty op
dispatches per token besides the step, on shapes that grow every token.
Greedy decoding with nothing but max-length criteria now makes each token
in the replayed step (frontends/torch/generation.py ``_greedy``): tokens
equal to eager's, programs bounded as before. These tests count op
dispatches, replays, barriers and programs, never time.
"""

import pytest
import torch

import lazycore
import lazycore.torch as ltorch
from lazycore.frontends.torch import generation
from lazycore.ir import events

transformers = pytest.importorskip("transformers")

from _bits import BY_HAND  # noqa: E402
from _generation_models import LENGTHS, gpt2 as _gpt2, programs as _programs, prompts as _prompts  # noqa: E402
from _replay_counts import Dispatches  # noqa: E402


@pytest.fixture(autouse=True)
def greedy_loop(monkeypatch):
    """The loop is on by default; these tests ask for it whatever the default."""
    monkeypatch.setattr(generation, "_GREEDY_LOOP", True)


def _generate(model, ids, mask, n, cache="static", **kw):
    if cache == "static":
        kw["cache_implementation"] = "static"  # (the default cache where nobody sees it: a static one)
    with torch.no_grad():
        return model.generate(ids, attention_mask=mask, max_new_tokens=n, do_sample=False, **kw)


@pytest.mark.parametrize("cache,lengths", [
    pytest.param("static", (8,), id="static-1-prompt"),
    pytest.param("static", LENGTHS, id="static-8-prompts", marks=BY_HAND),
    pytest.param("dynamic", (8,), id="dynamic-1-prompt", marks=BY_HAND),
    # CI: static-1-prompt counts the same dispatches; test_default_cache_decodes_with_a_static_one: 8 prompts' swap
    pytest.param("dynamic", LENGTHS, id="dynamic-8-prompts", marks=BY_HAND)])
def test_a_later_token_dispatches_no_op(clean_runtime, monkeypatch, lengths, cache):
    eager, lazy = _gpt2(), _gpt2().to(ltorch.device())
    ids, mask = _prompts(lengths)
    dev = ltorch.device()
    ops = Dispatches(monkeypatch)
    counts, barriers = {}, {}
    for n in (16, 8, 16):  # (the first call compiles and records)
        want = _generate(eager, ids, mask, n, cache)
        before, graphs, steps = ops.count, len(events.EVENTS.graphs), generation.decoding_steps(lazy)
        got = _generate(lazy, ids.to(dev), mask.to(dev), n, cache)
        counts[n], barriers[n] = ops.count - before, len(events.EVENTS.graphs) - graphs
        assert torch.equal(got.cpu(), want)
    # the last call: every one of its 15 decoding steps replayed
    traces, replays = (b - a for a, b in zip(steps, generation.decoding_steps(lazy)))
    assert (traces, replays) == (0, 15)
    # 8 more tokens: no op dispatched for them (about 20 each before), one barrier each
    assert counts[16] == counts[8], counts
    assert barriers[16] - barriers[8] == 8, barriers


def test_sixty_four_tokens_programs(clean_runtime):
    # a cold call of 64 tokens: generate()'s setup reads, the prompt's
    # program, one program for every later token (as transformers' loop).
    # The second token's barrier donated two inputs fewer than the later
    # ones' (the first step's ids and positions, held by _greedy_replayed's
    # plan of the step while the loop ran): a program of its own, 5 in all
    eager, lazy = _gpt2(), _gpt2().to(ltorch.device())
    ids, mask = _prompts((8,))
    dev = ltorch.device()
    want = _generate(eager, ids, mask, 64)
    before, tokens = _programs(), lazycore.metrics.counters()["generated_tokens"]
    got = _generate(lazy, ids.to(dev), mask.to(dev), 64)
    assert torch.equal(got.cpu(), want)
    assert lazycore.metrics.counters()["generated_tokens"] - tokens == 64  # one model call per token
    assert _programs() - before <= 2 + 2


@pytest.mark.parametrize("kw", [pytest.param(dict(repetition_penalty=1.5), id="logits-processor"),
                                pytest.param(dict(min_new_tokens=3), id="min-new-tokens", marks=BY_HAND)])
def test_processors_decode_through_transformers_loop(clean_runtime, kw):
    # a logits processor reads the ids: transformers' own loop, as before
    eager, lazy = _gpt2(), _gpt2().to(ltorch.device())
    ids, mask = _prompts(LENGTHS)
    dev = ltorch.device()
    want = _generate(eager, ids, mask, 6, **kw)
    assert torch.equal(_generate(lazy, ids.to(dev), mask.to(dev), 6, **kw).cpu(), want)


# CI: test_generation_host_stop.py::test_end_token_still_read_every_token decodes with the loop off (eager's tokens)
@BY_HAND
def test_off_decodes_through_transformers_loop(clean_runtime, monkeypatch):
    monkeypatch.setattr(generation, "_GREEDY_LOOP", False)
    eager, lazy = _gpt2(), _gpt2().to(ltorch.device())
    ids, mask = _prompts(LENGTHS)
    dev = ltorch.device()
    want = _generate(eager, ids, mask, 6)
    assert torch.equal(_generate(lazy, ids.to(dev), mask.to(dev), 6).cpu(), want)
    assert generation._DECODERS[lazy].greedy.traces + generation._DECODERS[lazy].greedy.replays == 0
