"""What a warm decoding token launches (issue 40, per-token time).

A warm greedy token with a static cache is one barrier (the stopping
check's read) and one program launch: the replayed decoding step, the
token's choice and the next step's inputs run together. The static cache
goes into that program donated, so XLA may write the new position into the
cache's own buffers instead of returning fresh copies of it every token.
These tests count launches and read XLA's figures for the program; they
never time anything.
"""

import collections

import pytest
import torch

import lazycore
import lazycore.torch as ltorch
from lazycore.runtime import pjrt

transformers = pytest.importorskip("transformers")

from _generation_models import ONE_AND_MANY, gpt2, prompts  # noqa: E402


def _generate(model, ids, mask, n):
    with torch.no_grad():
        return model.generate(ids, attention_mask=mask, max_new_tokens=n, do_sample=False,
                              cache_implementation="static").cpu()


def _executions() -> int:
    return lazycore.metrics.counters()["executions"]


@pytest.mark.parametrize("lengths", ONE_AND_MANY)
def test_one_launch_per_warm_token(clean_runtime, lengths):
    dev = ltorch.device()
    eager, lazy = gpt2(), gpt2().to(dev)
    ids, mask = prompts(lengths)
    lids, lmask = ids.to(dev), mask.to(dev)
    for n in (12, 8):  # warm: both lengths' programs made, decoding recorded
        assert torch.equal(_generate(lazy, lids, lmask, n), _generate(eager, ids, mask, n))
    runs = {}
    for n in (8, 12):
        before = _executions()
        _generate(lazy, lids, lmask, n)
        runs[n] = _executions() - before
    # the four more tokens cost four more launches: one each, whatever the call's fixed launches
    assert runs[12] - runs[8] == 4, runs
    assert runs[8] <= 8 + 3, runs  # (the prompt's programs and the first token's: a few, not one per op)


def test_decoding_program_takes_the_cache_donated(clean_runtime, monkeypatch):
    dev = ltorch.device()
    lazy = gpt2().to(dev)
    ids, mask = prompts((8,))
    _generate(lazy, ids.to(dev), mask.to(dev), 12)
    launched = collections.Counter()
    executables = {}
    launch = pjrt.Executable.launch

    def counted(self, buffers):
        launched[self.number] += 1
        executables[self.number] = self
        return launch(self, buffers)

    monkeypatch.setattr(pjrt.Executable, "launch", counted)
    _generate(lazy, ids.to(dev), mask.to(dev), 12)
    number, count = launched.most_common(1)[0]
    assert count >= 10  # the decoding program: every later token's
    exe = executables[number]
    config = lazy.config
    # the static cache's keys and values: a tensor each per layer, one position
    # longer than generate() asks for or more (it is reused across calls)
    cache = [t for t in exe.input_types if t.rank == 4 and t.shape[:2] == (1, config.n_head)
             and t.shape[3] == config.n_embd // config.n_head]
    assert len(cache) == 2 * config.n_layer, exe.input_types
    cache_bytes = sum(t.shape[0] * t.shape[1] * t.shape[2] * t.shape[3] * 4 for t in cache)
    memory = exe.memory()
    if "alias" not in memory:
        pytest.skip("this backend reports no aliasing figures")
    # every cache tensor's buffer is an output's too: donated, not copied out
    assert memory["alias"] >= cache_bytes, (memory, cache_bytes)
