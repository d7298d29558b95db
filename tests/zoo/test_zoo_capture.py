"""The zoo's transformers training steps under ``lazycore.torch.capture``
(issue 40 item 2): AdamW, transformers' linear warm-up schedule and
``clip_grad_norm_``, the whole step captured. Each replays from its third
call, every guard holding, with eager's losses and parameters.

Llama (rotary embeddings, grouped key-value heads) runs in CI, as one of the
two that once refused to replay (their key-value caches start as an empty host
tensor every forward: 78c69dd); the other, T5 (an encoder-decoder with relative
position buckets, 98 s of a loaded CI worker), and the rest of the family with
``LAZYCORE_TEST_FULL=1``."""

import pytest
import torch

import lazycore.torch as ltorch
import zoo_harness
import zoo_models
from _bits import FULL  # (tests/ is on the path)

CALLS = 5
NAMES = [s.name for s in zoo_models.SPECS
         if s.library == "transformers" and (FULL or s.name == "llama")]
KNOWN: dict[str, str] = {}
"""name -> reason: strict xfails, as tests/zoo/test_zoo.py's."""


def _params():
    return [pytest.param(n, marks=[pytest.mark.xfail(reason=KNOWN[n], strict=True)] if n in KNOWN else [], id=n)
            for n in NAMES]


@pytest.mark.parametrize("name", _params())
def test_a_captured_transformers_step_replays_from_its_third_call_with_eagers_values(name):
    spec = zoo_models.BY_NAME[name]
    dev = ltorch.device()
    lazy, eager = zoo_harness.build(spec)
    g = torch.Generator().manual_seed(1)
    batches = [spec.batch(g) for _ in range(CALLS)]

    opt, sched, clip = zoo_harness._optimizer(spec, eager, CALLS)
    want = [zoo_harness._step(spec, eager, opt, sched, clip, b).item() for b in batches]

    opt, sched, clip = zoo_harness._optimizer(spec, lazy, CALLS)

    @ltorch.capture
    def step(batch):
        return zoo_harness._step(spec, lazy, opt, sched, clip, batch)

    got = []
    for b in batches:
        got.append(step({k: v.to(dev) for k, v in b.items()}))
        ltorch.mark_step()
    assert (step.traces, step.replays, step.why) == (2, CALLS - 2, None)
    got = [float(x.cpu()) for x in got]
    assert max(zoo_harness._rel(a, b) for a, b in zip(got, want)) <= 1e-4, (got, want)
    eager_state = eager.state_dict()
    for k, v in lazy.state_dict().items():
        if v.is_floating_point():
            assert zoo_harness._max_diff(v.cpu(), eager_state[k]) <= 1e-4, k
