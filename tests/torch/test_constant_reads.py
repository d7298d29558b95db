"""Reading a value made of constants alone does not cut the pending step.

transformers reads such values in the middle of a training step: with
``use_cache=False`` or gradient checkpointing its packed-sequence check reads a
value computed from an ``arange``; BART's decoder reads an all-ones mask. A
barrier there ran the step's graph so far as one program and the rest as
another, and a captured step that read one never replayed. Such a value is
computed by a small program of its own, and kept: a read of the same
constants (same graph, same Python numbers) runs no program after the first.
An integer or boolean one (transformers' fast_all) is computed on the host
instead, with no program at all (lazycore.runtime.reads._read_on_host).
A read with nothing else pending is a barrier, as any read.
"""

from __future__ import annotations

import pytest
import torch

import lazycore
import lazycore.torch as ltorch
from _bits import MODEL_RUN  # (tests/ is on the path)
from lazycore.frontends.torch.tensor import read
from lazycore.observe.guards import GuardError, guard


def _step(model, x, opt):
    opt.zero_grad()
    h = model(x)
    m = torch.ones(2, 6, device=x.device).bool()  # as transformers' all-ones mask
    if bool(m.sum() == m.numel()):  # a read of constants alone (transformers' fast_all)
        h = h * 2
    loss = h.square().mean()
    loss.backward()
    opt.step()
    return loss.detach()


def _runs() -> int:
    return lazycore.metrics.counters()["executions"]


def _model():
    torch.manual_seed(0)
    return torch.nn.Linear(6, 3)


def test_a_read_of_constants_leaves_the_step_whole_with_eagers_values(clean_runtime):
    dev = ltorch.device()
    x = torch.randn(4, 6)
    eager, lazy = _model(), _model().to(dev)
    eopt, lopt = torch.optim.SGD(eager.parameters(), lr=0.1), torch.optim.SGD(lazy.parameters(), lr=0.1)
    for _ in range(3):
        want = _step(eager, x, eopt)
        got = _step(lazy, x.to(dev), lopt)
        ltorch.mark_step(wait=True)
        torch.testing.assert_close(got.cpu(), want, rtol=1e-6, atol=1e-7)
    for a, b in zip(lazy.parameters(), eager.parameters()):
        torch.testing.assert_close(a.detach().cpu(), b.detach(), rtol=1e-6, atol=1e-7)


def test_the_read_does_not_run_the_pending_work(clean_runtime):
    dev = ltorch.device()
    w = torch.randn(4, 4).to(dev)
    ltorch.mark_step(wait=True)
    y = (w @ w).sum()  # pending work of the step
    m = torch.ones(2, 6, device=dev)
    runs = lambda: lazycore.metrics.counters()["executions"]  # noqa: E731
    before = runs()
    assert float(m.sum()) == m.numel()  # (a float value: an integer or boolean one is computed on the host)
    assert runs() == before + 1  # the read's own program (its first read since the caches were emptied)
    ltorch.mark_step(wait=True)
    assert runs() == before + 2  # y was still pending: the step's program computed it
    torch.testing.assert_close(y.cpu(), (w.cpu() @ w.cpu()).sum())


def test_a_captured_step_that_reads_constants_replays(clean_runtime):
    dev = ltorch.device()
    x = torch.randn(4, 6)
    eager, lazy = _model(), _model().to(dev)
    eopt, lopt = torch.optim.SGD(eager.parameters(), lr=0.1), torch.optim.SGD(lazy.parameters(), lr=0.1)
    step = ltorch.capture(lambda x: _step(lazy, x, lopt))
    programs = []
    for _ in range(7):
        want = _step(eager, x, eopt)
        before = _runs()
        got = step(x.to(dev))
        ltorch.mark_step(wait=True)
        programs.append(_runs() - before)
        torch.testing.assert_close(got.cpu(), want, rtol=1e-6, atol=1e-7)
    # from empty caches the first calls trace (the scalar policy learns the
    # step's numbers); the last three replay, one program each
    assert step.replays >= 3 and programs[-3:] == [1, 1, 1], (step.traces, step.replays, programs, step.why)


def test_a_second_read_of_the_same_constants_runs_no_program(clean_runtime):
    dev = ltorch.device()
    w = torch.randn(4, 4).to(dev)
    ltorch.mark_step(wait=True)
    for i in range(3):
        y = (w @ w).sum()  # the step's pending work
        before = _runs()
        assert int(torch.ones(2, 6, device=dev).sum()) == 12
        assert _runs() == before + (1 if i == 0 else 0)  # the first read's program, then its kept value
        ltorch.mark_step(wait=True)
        torch.testing.assert_close(y.cpu(), (w.cpu() @ w.cpu()).sum())
    y = (w @ w).sum()
    before = _runs()
    assert int(torch.ones(2, 7, device=dev).sum()) == 14  # other constants: a program of their own
    assert _runs() == before + 1
    lazycore.cache.clear()  # forgets the kept values with every cache
    assert int(torch.ones(2, 6, device=dev).sum()) == 12
    assert _runs() == before + 2
    ltorch.mark_step(wait=True)
    torch.testing.assert_close(y.cpu(), (w.cpu() @ w.cpu()).sum())


def test_a_kept_value_is_not_overwritten_by_an_update_of_a_read_tensor(clean_runtime):
    # the kept buffer is shared by every read of those constants: an in-place
    # update of one that was read must not donate it to its new value
    dev = ltorch.device()
    w = torch.randn(3).to(dev)
    ltorch.mark_step(wait=True)
    for _ in range(2):
        y = w * 2  # pending work
        m = torch.arange(5, device=dev) + torch.arange(5, device=dev)
        assert m.tolist() == [0, 2, 4, 6, 8]
        m.add_(1)
        ltorch.mark_step(wait=True)
        assert m.tolist() == [1, 3, 5, 7, 9]
        torch.testing.assert_close(y.cpu(), w.cpu() * 2)


def test_a_failed_check_in_a_read_of_constants_raises_eagers_error(clean_runtime):
    dev = ltorch.device()
    w = torch.randn(3).to(dev)
    ltorch.mark_step(wait=True)
    y = w + 1  # pending work
    q = torch.tensor([6, 4], device=dev) // torch.tensor([3, 0], device=dev)  # divides by zero
    for _ in range(2):  # the failed value stays failed
        with pytest.raises(lazycore.BarrierError, match="ZeroDivisionError"):
            q.cpu()
    assert torch.equal((torch.tensor([6, 4], device=dev) // torch.tensor([3, 1], device=dev)).cpu(),
                       torch.tensor([2, 4]))
    ltorch.mark_step(wait=True)
    torch.testing.assert_close(y.cpu(), w.cpu() + 1)


def test_only_a_read_that_would_cut_the_step_leaves_it_whole(clean_runtime):
    dev = ltorch.device()
    w = torch.randn(4).to(dev)
    ltorch.mark_step(wait=True)
    with guard(implicit_barriers="error"):
        y = w * 3  # pending work: the read of constants runs apart from it, no barrier
        assert int(torch.arange(4, device=dev).sum()) == 6
        assert int((torch.arange(4, device=dev) * 3).sum()) == 18  # a Python number: a parameter, kept by value
        ltorch.mark_step(wait=True)
        # nothing else pending: a barrier, as any read (plans, buckets, the persistent cache)
        with pytest.raises(GuardError):
            int(torch.arange(5, device=dev).sum())
    torch.testing.assert_close(y.cpu(), w.cpu() * 3)


def test_inside_a_fixed_bucket_ceiling_a_read_of_constants_is_a_barrier(clean_runtime):
    # generate()'s loop pads every token's step to one ceiling so that its
    # graph repeats, and its stop check (at the first token, constants and the
    # length parameter) ends each step: read apart, the first token's work
    # joined the second's graph, a program more to compile for each call shape
    from lazycore.runtime import buckets

    dev = ltorch.device()
    w = torch.randn(4).to(dev)
    ltorch.mark_step(wait=True)
    with guard(implicit_barriers="error"), buckets.fixed(16):
        y = w * 3
        with pytest.raises(GuardError):
            int(torch.arange(4, device=dev).sum())
    torch.testing.assert_close(y.cpu(), w.cpu() * 3)


def test_a_kept_value_handed_out_as_a_buffer_is_no_longer_shared(clean_runtime):
    # lazycore.to_buffer hands the buffer on (a jax program may donate it):
    # the next read of those constants computes a buffer of its own
    dev = ltorch.device()
    w = torch.randn(3).to(dev)
    ltorch.mark_step(wait=True)
    y = w * 2
    m = read(torch.arange(6.0, device=dev) + torch.arange(6.0, device=dev))  # (float: kept on the device)
    first = lazycore.to_buffer(m)
    y = y + 1
    before = _runs()
    n = torch.arange(6.0, device=dev) + torch.arange(6.0, device=dev)
    assert n.tolist() == [0, 2, 4, 6, 8, 10]
    assert _runs() == before + 1 and lazycore.to_buffer(read(n)) is not first
    ltorch.mark_step(wait=True)
    torch.testing.assert_close(y.cpu(), w.cpu() * 2 + 1)


# CI: test_zoo_capture.py[llama] trains Llama; test_a_read_of_constants_leaves_the_step_whole_... takes the read's path
@MODEL_RUN
def test_transformers_without_the_cache_trains_one_program_a_step(clean_runtime):
    # use_cache=False (fine-tuning's setting): the packed-sequence check reads
    # a value made from an arange in the middle of every step
    transformers = pytest.importorskip("transformers")

    def make():
        torch.manual_seed(0)
        cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                                       use_cache=False)
        return transformers.LlamaForCausalLM(cfg).train()

    dev = ltorch.device()
    ids = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(1))
    eager, lazy = make(), make().to(dev)
    eopt, lopt = torch.optim.SGD(eager.parameters(), lr=0.1), torch.optim.SGD(lazy.parameters(), lr=0.1)
    for i in range(3):
        want = eager(input_ids=ids, labels=ids).loss
        want.backward()
        eopt.step()
        eopt.zero_grad()
        before = _runs()
        got = lazy(input_ids=ids.to(dev), labels=ids.to(dev)).loss
        got.backward()
        lopt.step()
        lopt.zero_grad()
        ltorch.mark_step(wait=True)
        if i:  # (the first step also runs the check's own program, kept since)
            assert _runs() - before == 1
        torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=1e-5, atol=1e-6)


def test_an_integer_or_boolean_read_of_constants_runs_no_program(clean_runtime):
    # transformers' fast_all of a torch.ones mask in the middle of a training
    # step (BioGPT, RoFormer, M2M100, SEW: two programs in their first step,
    # this read's and the step's) is computed on the host: exact (integer and
    # boolean ops), no program, the step left whole; a captured step that
    # reads it still replays (no upload, no host read announced)
    dev = ltorch.device()
    w = torch.randn(4, 4).to(dev)
    ltorch.mark_step(wait=True)
    y = (w @ w).sum()
    m = torch.ones(2, 6, dtype=torch.long, device=dev)
    before = _runs()
    assert bool(m.bool().all()) and int((m * 3).sum()) == 36
    assert _runs() == before  # (before: the read's own program)
    ltorch.mark_step(wait=True)
    assert _runs() == before + 1
    torch.testing.assert_close(y.cpu(), (w.cpu() @ w.cpu()).sum())
