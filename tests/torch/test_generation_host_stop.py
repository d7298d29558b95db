"""transformers' stop check during a captured decoding loop on the lazy
device (issue 40 item 3, per-token host cost).

transformers reads ``unfinished_sequences.max() == 0`` after every token: a
read, so a wait for the token's program and a copy to the host each token.
Where every stopping criterion is a max-length one (no end token), the
sequences all finish exactly when the ids reach that length, so the host
knows the answer: the token's program is started there and not waited for
or read. Anything else (an end token, a criterion of the user's, a
streamer) reads as before. These tests count reads and programs, never time.
"""

import pytest
import torch

import lazycore
import lazycore.torch as ltorch

transformers = pytest.importorskip("transformers")

from _generation_models import (  # noqa: E402
    ONE_AND_MANY, gpt2 as _gpt2, programs as _programs, prompts as _prompts)


def _generate(model, ids, mask, n, **kw):
    with torch.no_grad():
        return model.generate(ids, attention_mask=mask, max_new_tokens=n, do_sample=False,
                              cache_implementation="static", **kw)


def _reads(model, ids, mask, n, **kw):
    """``(tokens, host reads, programs)`` of a lazy generate() call, the tokens on the host."""
    before = lazycore.metrics.counters()["transfers_to_host"], _programs()
    out = _generate(model, ids, mask, n, **kw)
    reads, programs = lazycore.metrics.counters()["transfers_to_host"] - before[0], _programs() - before[1]
    return out.cpu(), reads, programs


@pytest.mark.parametrize("lengths", ONE_AND_MANY)
def test_max_length_decoding_reads_nothing_per_token(clean_runtime, lengths):
    eager, lazy = _gpt2(), _gpt2().to(ltorch.device())
    ids, mask = _prompts(lengths)
    dev = ltorch.device()
    reads = {}
    for n in (16, 8, 16):  # (the first call compiles)
        want = _generate(eager, ids, mask, n)
        got, reads[n], programs = _reads(lazy, ids.to(dev), mask.to(dev), n)
        assert torch.equal(got, want)
    assert programs == 0
    # generate()'s setup reads (of the prompts and their mask) and the
    # result's alone, however many tokens: the stop check read every token
    # before (8 more for 16 tokens than for 8)
    assert reads[16] == reads[8], reads


def test_end_token_still_read_every_token(clean_runtime, monkeypatch):
    # an end token stops a sequence at a value only the device knows: in
    # transformers' loop read every token as before, and the call stops
    # where eager's stops (the greedy loop, on by default, reads it every
    # few tokens: test_generation_end_token)
    from lazycore.frontends.torch import generation

    monkeypatch.setattr(generation, "_GREEDY_LOOP", False)
    eager, lazy = _gpt2(), _gpt2().to(ltorch.device())
    ids, mask = _prompts((8,))
    dev = ltorch.device()
    free = _generate(eager, ids, mask, 12)
    end = int(free[0, 8 + 4])  # the fifth new token (the tiny model's first too: it repeats one)
    eager.generation_config.eos_token_id = lazy.generation_config.eos_token_id = end
    want = _generate(eager, ids, mask, 12)
    assert want.shape[-1] < free.shape[-1]  # (stopped early)
    got, _, _ = _reads(lazy, ids.to(dev), mask.to(dev), 12)
    assert torch.equal(got, want)
    # an end token no token is: one read per token
    never = next(t for t in range(1, 128) if t not in free[0].tolist())
    eager.generation_config.eos_token_id = lazy.generation_config.eos_token_id = never
    reads = {}
    for n in (12, 6):
        want = _generate(eager, ids, mask, n)
        got, reads[n], _ = _reads(lazy, ids.to(dev), mask.to(dev), n)
        assert torch.equal(got, want)
    assert reads[12] - reads[6] == 6, reads


def test_a_criterion_of_the_users_is_read(clean_runtime):
    class AtMost(transformers.StoppingCriteria):
        def __init__(self, n):
            self.n = n

        def __call__(self, input_ids, scores, **kwargs):
            return torch.full((input_ids.shape[0],), input_ids.shape[1] >= self.n, device=input_ids.device)

    eager, lazy = _gpt2(), _gpt2().to(ltorch.device())
    ids, mask = _prompts((8,))
    dev = ltorch.device()
    criteria = transformers.StoppingCriteriaList([AtMost(13)])
    want = _generate(eager, ids, mask, 12, stopping_criteria=criteria)
    assert want.shape[-1] == 13
    got, reads, _ = _reads(lazy, ids.to(dev), mask.to(dev), 12, stopping_criteria=criteria)
    assert torch.equal(got, want)
    assert reads >= 5


def test_streamer_still_gets_every_token(clean_runtime):
    class Keep(transformers.generation.streamers.BaseStreamer):
        def __init__(self):
            self.got = []

        def put(self, value):
            self.got.append(value.clone())

        def end(self):
            pass

    eager, lazy = _gpt2(), _gpt2().to(ltorch.device())
    ids, mask = _prompts((8,))
    dev = ltorch.device()
    want, mine = Keep(), Keep()
    _generate(eager, ids, mask, 6, streamer=want)
    _generate(lazy, ids.to(dev), mask.to(dev), 6, streamer=mine)
    assert len(mine.got) == len(want.got)
    assert all(torch.equal(a.cpu(), b) for a, b in zip(mine.got, want.got))
