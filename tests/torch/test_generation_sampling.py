"""transformers' sampling, ``generate(do_sample=True)``, on the lazy device
picks eager's tokens for the same ``torch.manual_seed`` (issue 39): each
token's ``torch.multinomial`` draws its random part on the host from eager's
CPU generator (frontends/torch/ops/random.py), the rest in the token's
program. Before, the device's own stream drew other tokens, and the CPU
generator was left where it was."""

import pytest
import torch

import lazycore.torch as ltorch

transformers = pytest.importorskip("transformers")

from _bits import BY_HAND  # noqa: E402
from _generation_models import gpt2 as _gpt2, programs as _programs, prompts as _prompts  # noqa: E402


@pytest.mark.parametrize("kw", [
    pytest.param(dict(), id="plain", marks=BY_HAND),  # the next one's path without its processors
    pytest.param(dict(top_k=20, top_p=0.9, temperature=0.7), id="topk-topp-temp"),
    # CI: topk-topp-temp takes the same path (its default cache decodes as a static one; top-k among its processors)
    pytest.param(dict(top_k=10, cache_implementation="static"), id="topk-static", marks=BY_HAND),
])
def test_sampled_tokens_are_eagers(clean_runtime, kw):
    eager, lazy = _gpt2(), _gpt2().to(ltorch.device())
    dev = ltorch.device()
    ids, mask = _prompts((3, 8, 12, 16))  # left-padded: each row its own distribution
    kw = dict(max_new_tokens=8, do_sample=True, **kw)
    with torch.no_grad():
        torch.manual_seed(7)
        want, after = eager.generate(ids, attention_mask=mask, **kw), torch.rand(4)
        torch.manual_seed(7)
        got = lazy.generate(ids.to(dev), attention_mask=mask.to(dev), **kw).cpu()
        assert torch.equal(torch.rand(4), after)  # the CPU generator moved as eager's generate() moved it
        assert torch.equal(got, want), (got, want)
        # a second call, from where the first left the generator: eager's tokens, from the programs made
        state = torch.get_rng_state()
        want = eager.generate(ids, attention_mask=mask, **kw)
        torch.set_rng_state(state)
        before = _programs()
        got = lazy.generate(ids.to(dev), attention_mask=mask.to(dev), **kw).cpu()
    assert torch.equal(got, want), (got, want)
    assert _programs() == before
