"""generate()'s first token on the lazy device (issue 40 item 4): the prompt's
forward replayed per prompt shape, and the setup's read of the uploaded ids
answered from their host copy.

A warm generate() call traced the prompt's forward op by op (about 190 op
dispatches for a tiny GPT-2) and ran a program for transformers'
``(encoder_input_ids < 0).any()`` (generation/utils.py, the logits
processors' setup) every call. Now the prompt's forward is captured
(frontends/torch/prompt_step.py: recorded and confirmed at the first call,
replayed from the second) and that read costs no program. These tests count
module calls, op dispatches, replays, barriers and programs, never time.
"""

import pytest
import torch

import lazycore
import lazycore.torch as ltorch
from lazycore.frontends.torch import prompt_step
from lazycore.ir import events
from lazycore.runtime import buckets

transformers = pytest.importorskip("transformers")

from _bits import BY_HAND, MODEL_RUN  # noqa: E402
from _generation_models import LENGTHS, gpt2 as _gpt2, programs as _programs, prompts as _prompts  # noqa: E402
from _replay_counts import Dispatches  # noqa: E402



def _generate(model, ids, mask, n, cache="static"):
    kw = dict(max_new_tokens=n, do_sample=False)
    if cache == "static":
        kw["cache_implementation"] = "static"
    with torch.no_grad():
        return model.generate(ids, attention_mask=mask, **kw).cpu()


def test_uploaded_ids_read_in_a_padded_loop_without_a_program(clean_runtime):
    # generate() fixes a bucket ceiling for its loop, and reads there were
    # barriers: ``(ids < 0).any()`` of the uploaded prompt ran a program with
    # the call's setup work. Its value is the host copy's: no program.
    dev = ltorch.device()
    ids = torch.tensor([[3, 0, 7], [1, 2, 5]]).to(dev)
    negative = torch.tensor([[3, -1, 7]]).to(dev)
    pending = torch.ones(4, device=dev) * 2  # other work in flight, as generate()'s setup has
    before = buckets.fix(16)
    try:
        counts = lazycore.metrics.counters()
        graphs = len(events.EVENTS.graphs)
        assert bool((ids < 0).any()) is False
        assert bool((negative < 0).any()) is True
        assert int((ids == 7).sum()) == 1
        after = lazycore.metrics.counters()
        assert len(events.EVENTS.graphs) == graphs  # no barrier
        assert after["executions"] == counts["executions"] and after["compiles"] == counts["compiles"]
        assert after["host_reads"] - counts["host_reads"] == 3
    finally:
        buckets.fix(before)
    assert torch.equal(pending.cpu(), torch.full((4,), 2.0))  # the pending work is still computed


def test_a_read_of_device_results_in_the_loop_is_still_a_barrier(clean_runtime):
    # a value the host copies do not give (a program's result) is read as before
    dev = ltorch.device()
    x = torch.tensor([1.0, -2.0]).to(dev) * 3
    before = buckets.fix(16)
    try:
        graphs = len(events.EVENTS.graphs)
        assert bool((x < 0).any()) is True
        assert len(events.EVENTS.graphs) == graphs + 1
    finally:
        buckets.fix(before)


@pytest.mark.parametrize("cache, lengths, n", [
    ("dynamic", (8,), 1),  # the first token alone: the prompt's program (a few seconds)
    pytest.param("dynamic", LENGTHS, 4, marks=BY_HAND),
    pytest.param("static", (8,), 4, marks=BY_HAND),
    pytest.param("static", LENGTHS, 4, marks=BY_HAND),
], ids=["first-token", "dynamic-8-prompts", "static-1-prompt", "static-8-prompts"])
def test_second_call_replays_the_prompt(clean_runtime, cache, lengths, n):
    eager, lazy = _gpt2(), _gpt2().to(ltorch.device())
    ids, mask = _prompts(lengths)
    dev = ltorch.device()
    calls = [0]
    lazy.transformer.register_forward_pre_hook(lambda m, a: calls.__setitem__(0, calls[0] + 1))
    want = _generate(eager, ids, mask, n, cache)
    got = _generate(lazy, ids.to(dev), mask.to(dev), n, cache)
    assert torch.equal(got, want), (got, want)
    # traced for its result, then once more to confirm the recording (prompt_step._confirm)
    assert prompt_step.prompt_steps(lazy) == (2, 0)
    for _ in range(2):
        calls[0], compiled = 0, _programs()
        got = _generate(lazy, ids.to(dev), mask.to(dev), n, cache)
        assert torch.equal(got, want), (got, want)
        # the model's modules never ran: the prompt (and every decoding step) replayed
        assert calls[0] == 0
        assert _programs() == compiled
    assert prompt_step.prompt_steps(lazy) == (2, 2)


@MODEL_RUN
def test_first_token_call_dispatches_few_ops(clean_runtime, monkeypatch):
    # generate(max_new_tokens=1), warm: the prompt's forward is one replay;
    # what is left is transformers' setup and the prompt's inputs
    eager, lazy = _gpt2(), _gpt2().to(ltorch.device())
    ids, mask = _prompts((8,))
    dev = ltorch.device()
    want = _generate(eager, ids, mask, 1, "dynamic")
    ops = Dispatches(monkeypatch)
    counts = {}
    for replay in (False, True, True):
        monkeypatch.setattr(prompt_step, "PROMPT_REPLAY", replay)
        before = ops.count
        assert torch.equal(_generate(lazy, ids.to(dev), mask.to(dev), 1, "dynamic"), want)
        counts[replay] = ops.count - before
    assert counts[True] * 4 < counts[False], counts


@MODEL_RUN
def test_off_traces_the_prompt(clean_runtime, monkeypatch):
    monkeypatch.setattr(prompt_step, "PROMPT_REPLAY", False)
    eager, lazy = _gpt2(), _gpt2().to(ltorch.device())
    ids, mask = _prompts(LENGTHS)
    dev = ltorch.device()
    want = _generate(eager, ids, mask, 3)
    for _ in range(2):
        assert torch.equal(_generate(lazy, ids.to(dev), mask.to(dev), 3), want)
    assert prompt_step.prompt_steps(lazy) == (0, 0)
