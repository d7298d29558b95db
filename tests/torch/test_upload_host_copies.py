"""Uploaded data read back without a program (issues 39 and 40).

A small upload (``labels.to(lazy)``, at most 64 KiB) keeps its host copy, so
a read of it (``.tolist()``, ``bool(...)``) or of an integer or boolean
function of it and of constants (``labels.max() >= vocab``, the CTC targets'
mask and lengths, pack_padded_sequence's inverse order) is answered on the
host: no program, no device read. Before, each such read in a training step
ran a small program of its own: transformers' Wav2Vec2ForCTC ran 4 programs
a step, an LSTM over packed sequences 2.

Float uploads (float32, float64) keep theirs too: compares, selects, orders
and exact sums, products and quotients of them are computed on the host
(torchvision's degenerate-box check of the resized target boxes); a result
that would round is the device's. A read of a host-computable function of a
small live value a program computes (a detection sampler's two masks of one
labels tensor) computes and copies that value once for all such reads.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from lazycore.observe import metrics
from lazycore.runtime import transfer
from _bits import BY_HAND  # (tests/ is on the path)

pytestmark = pytest.mark.usefixtures("clean_runtime")


def _c(name: str) -> int:
    return metrics.counters().get(name, 0)


@pytest.fixture
def dev():
    import lazycore.torch as ltorch

    return ltorch.device()


# --- training steps: program counts per step -------------------------------------------------


class _CTC(torch.nn.Module):
    """What transformers' Wav2Vec2ForCTC does around its loss: a vocabulary
    check read of the labels, the targets' mask and lengths, masked_select,
    the logit lengths from an all-ones mask."""

    def __init__(self, vocab=6):
        super().__init__()
        self.vocab = vocab
        self.lin = torch.nn.Linear(4, vocab)

    def forward(self, x, labels):
        if labels.max() >= self.vocab:
            raise ValueError("Label values must be <= vocab_size")
        logits = self.lin(x)
        mask = (labels != -100) & (labels != 0)
        target_lengths = mask.sum(-1)
        targets = labels.masked_select(mask)
        input_lengths = torch.ones(x.shape[:2], dtype=torch.long, device=x.device).sum(-1)
        log_probs = torch.nn.functional.log_softmax(logits, -1).transpose(0, 1)
        return torch.nn.functional.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0)


def _ctc_batch(i):
    g = torch.Generator().manual_seed(i)
    labels = torch.randint(1, 6, (3, 4), generator=g)
    labels[0, 3] = -100
    labels[2, 2:] = -100
    return torch.randn(3, 10, 4, generator=g), labels


class _Packed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.LSTM(3, 4, batch_first=True)
        self.out = torch.nn.Linear(4, 1)

    def forward(self, x, lengths):
        p = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        o, _ = self.rnn(p)
        o, _ = torch.nn.utils.rnn.pad_packed_sequence(o, batch_first=True, total_length=x.shape[1])
        return self.out(o).pow(2).mean()


def _packed_batch(i):
    g = torch.Generator().manual_seed(i)
    return torch.randn(3, 3, 3, generator=g), torch.tensor([2, 3, 1])


def _train(dev, model, batches, lazy_args):
    """Eager and lazy losses, and the programs each lazy step ran."""
    import lazycore.torch as ltorch

    lazy = copy.deepcopy(model).to(dev)
    runs = []
    for m, device in ((model, "cpu"), (lazy, dev)):
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        losses, programs = [], []
        for b in batches:
            e0 = _c("executions")
            loss = m(*(lazy_args(b, device)))
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.detach())
            if device != "cpu":
                ltorch.mark_step()
            programs.append(_c("executions") - e0)
        runs.append(([float(l.cpu()) for l in losses], programs))
    (want, _), (got, programs) = runs
    return want, got, programs


def test_ctc_step_is_one_program(dev):
    torch.manual_seed(0)
    want, got, programs = _train(dev, _CTC(), [_ctc_batch(i) for i in range(4)],
                                 lambda b, d: (b[0].to(d), b[1].to(d)))
    np.testing.assert_allclose(got, want, rtol=1e-5)
    # the label check, the mask, the target lengths: answered on the host
    assert programs[1:] == [1, 1, 1], programs
    assert _c("fallbacks") == 0


# CI: test_inverse_permutation_on_the_host, test_host_known_masks.py::test_pad_packed_sequence_does_not_cut_the_step
@BY_HAND
def test_packed_lstm_step_is_one_program(dev):
    torch.manual_seed(0)
    want, got, programs = _train(dev, _Packed(), [_packed_batch(i) for i in range(3)],
                                 lambda b, d: (b[0].to(d), b[1]))
    np.testing.assert_allclose(got, want, rtol=1e-5)
    # pad_packed_sequence's unsorted_indices.cpu(): the inverse of an uploaded order
    assert programs[1:] == [1, 1], programs
    assert _c("fallbacks") == 0


# --- reads answered on the host ------------------------------------------------------------


def test_read_of_uploaded_data_copies_nothing(dev):
    cpu = torch.tensor([[3, -1, 7], [0, 2, 5]])
    lab = cpu.to(dev)
    cpu.add_(100)  # the user's tensor changes after the upload: the copy kept is the uploaded value
    e0, t0, h0 = _c("executions"), _c("transfers_to_host"), _c("host_reads")
    assert lab.tolist() == [[3, -1, 7], [0, 2, 5]]
    assert lab[1, 2].item() == 5
    assert (_c("executions"), _c("transfers_to_host")) == (e0, t0)
    assert _c("host_reads") - h0 == 2


def test_integer_functions_of_uploads_match_eager(dev):
    cpu = torch.tensor([[2**31 - 5, -7, 9, 0], [-(2**31), 3, -4, 11]], dtype=torch.int32)
    lazy = cpu.to(dev)
    cases = [
        lambda a: a.max() >= 10,
        lambda a: (a * 3 + 7).sum(-1),  # wraps as int32 does
        lambda a: torch.div(a, 3, rounding_mode="floor"),
        lambda a: torch.div(a, -4, rounding_mode="trunc"),
        lambda a: torch.remainder(a, 5),
        lambda a: (a != 0) & (a != 9),
        lambda a: (a > 0).long().sum(0),
        lambda a: a.t().reshape(-1)[1:6:2],
        lambda a: torch.cat([a, a.flip(0)], 1).min(1).values,
        lambda a: a.abs().argmax(1),
        lambda a: a.to(torch.int8),
        lambda a: torch.remainder(a, 1000).to(torch.float32) > 5.5,
        lambda a: (a > 0).float().sum(1),  # a count made float: whole numbers, exact in any order
        lambda a: torch.where(a > 0, a, torch.zeros_like(a)).amax(0),
    ]
    for i, f in enumerate(cases):
        e0 = _c("executions")
        assert torch.equal(f(lazy).cpu(), f(cpu)), i
        assert _c("executions") == e0, i
    # 2**31 - 5 is no float32: XLA rounds the conversion, the host does not answer it
    e0 = _c("executions")
    assert torch.equal((lazy.to(torch.float32) > 5.5).cpu(), cpu.to(torch.float32) > 5.5)
    assert _c("executions") == e0 + 1


def test_gathers_and_scatters_of_uploads_match_eager(dev):
    cpu = torch.tensor([[5, -3, 8, 1], [0, 7, -2, 4], [9, 9, -6, 2]])
    idx = torch.tensor([2, 0, 2])
    idx2 = torch.tensor([[3, 0], [1, 3], [0, 2]])
    lazy, lidx, lidx2 = cpu.to(dev), idx.to(dev), idx2.to(dev)
    cases = [
        lambda a, i, j: a[:, i],
        lambda a, i, j: a.index_select(0, i),
        lambda a, i, j: torch.gather(a, 1, j),
        lambda a, i, j: torch.zeros(3, dtype=a.dtype, device=a.device).scatter_add_(0, i, a[0, :3]),
        lambda a, i, j: torch.zeros_like(a).scatter_(1, j, a[:, :2]),
        lambda a, i, j: torch.nn.functional.pad(a, (1, 2), value=-1),
        lambda a, i, j: a[i == 2],
        # written into a corner (dynamic_update_slice: Qwen2-VL's position ids a row at a time)
        lambda a, i, j: torch.zeros(4, 5, dtype=a.dtype, device=a.device).scatter_(1, j, a[:, :2]),
        lambda a, i, j: a.clone().index_copy_(0, i[1:2], a[2:3]),
    ]
    for k, f in enumerate(cases):
        e0 = _c("executions")
        assert torch.equal(f(lazy, lidx, lidx2).cpu(), f(cpu, idx, idx2)), k
        assert _c("executions") == e0, k


def test_the_debug_line_names_a_read_on_the_host(dev, capsys):
    from lazycore.ir.config import override

    lab = torch.tensor([[1, 2, 0], [3, 0, 0]]).to(dev)
    capsys.readouterr()
    with override(debug=1):
        n = (lab != 0).sum().item()
    err = capsys.readouterr().err
    assert n == 3
    assert "read on the host: a read of a pending tensor<i64> value at " in err
    assert "test_upload_host_copies.py:" in err and " in test_the_debug_line_names_a_read_on_the_host" in err


def test_inverse_permutation_on_the_host(dev):
    order = torch.tensor([2, 0, 3, 1]).to(dev)
    e0 = _c("executions")
    inv = torch.empty_like(order).scatter_(0, order, torch.arange(4, device=dev))
    assert inv.tolist() == [1, 3, 0, 2]
    assert _c("executions") == e0


def test_out_of_bounds_scatter_raises_eager_error(dev):
    order = torch.tensor([2, 0, 4, 1]).to(dev)
    with pytest.raises(RuntimeError, match="out of bounds"):
        torch.empty_like(order).scatter_(0, order, torch.arange(4, device=dev)).tolist()


def test_in_place_update_is_read(dev):
    lab = torch.tensor([1, 2, 3]).to(dev)
    lab.add_(10)
    assert lab.tolist() == [11, 12, 13]
    lab[0] = -1
    assert lab.tolist() == [-1, 12, 13]


def test_float_work_stays_on_the_device(dev):
    x = torch.tensor([0.1, 0.2, 0.3]).to(dev)
    e0 = _c("executions")
    assert bool((x * 3).sum() > 1.5) == bool((torch.tensor([0.1, 0.2, 0.3]) * 3).sum() > 1.5)
    assert _c("executions") == e0 + 1  # float arithmetic is XLA's to round, not the host's


def test_large_uploads_keep_no_copy(dev):
    big = torch.arange(20000).to(dev)  # 160 KB
    t0 = _c("transfers_to_host")
    assert big[-1].item() == 19999
    assert _c("transfers_to_host") == t0 + 1
    small = torch.arange(10).to(dev)
    n, nbytes = transfer.host_copies()
    assert n >= 1 and nbytes >= small.numel() * 8


# --- float uploads: exact work only ----------------------------------------------------------


def test_degenerate_box_check_of_uploaded_boxes_runs_no_program(dev):
    """torchvision's detection models check the resized target boxes
    (``boxes[:, 2:] <= boxes[:, :2]``, then ``.any()``) in every training
    step: float32 boxes scaled by ``64 / 64`` compare on the host."""
    torchvision = pytest.importorskip("torchvision")
    from torchvision.models.detection.transform import resize_boxes

    assert torchvision
    boxes = torch.tensor([[1.5, 2.25, 30.0, 40.5], [3.0, 4.0, 10.0, 12.0], [5.0, 9.0, 5.0, 20.0]])
    lazy = boxes.to(dev)
    q = _pending_float_work(dev)  # the step's forward, pending: float work is computed on the host mid-step only
    for size in [(64, 64), (128, 32)]:  # ratios 1 and 2, 0.5: exact
        e0 = _c("executions")
        for b in (boxes, lazy):
            r = resize_boxes(b, (64, 64), size)
            got = (r[:, 2:] <= r[:, :2]), bool((r[:, 2:] <= r[:, :2]).any())
            if b is boxes:
                want = got
        assert torch.equal(got[0].cpu(), want[0]) and got[1] == want[1] is True
        assert _c("executions") == e0, size
    del q


def test_exact_float_functions_of_uploads_match_eager(dev):
    for dtype in (torch.float32, torch.float64):
        q = _pending_float_work(dev)  # mid-step (with nothing else pending, float uploads are the device's)
        cpu = torch.tensor([[1.5, -2.25, 3.0, 0.0], [1e6, -7.0, 0.125, 2.0**-20]], dtype=dtype)
        lazy = cpu.to(dev)
        exact = [
            lambda a: a * 0.5,
            lambda a: a / 4,
            lambda a: a / a.abs().clamp(min=0.125),  # quotients of exact results: +-1 and 0
            lambda a: a + 0.25,
            lambda a: a - a.flip(0),
            lambda a: a * 4.0,
            lambda a: torch.maximum(a, -a).amax(0),
            lambda a: torch.where(a > 1, a, -a).neg().abs(),
            lambda a: (a[:, :2] <= a[:, 2:]).any(1),
            lambda a: torch.ceil(a / 4), lambda a: torch.floor(a / 8), lambda a: torch.round(a * 0.5),
        ]
        for i, f in enumerate(exact):
            e0 = _c("executions")
            got, want = f(lazy).cpu(), f(cpu)
            assert torch.equal(got, want) and torch.equal(got.signbit(), want.signbit()), (dtype, i)
            assert _c("executions") == e0, (dtype, i)
        rounded = [
            lambda a: a * 0.1,  # 0.1 * 1.5 rounds
            lambda a: a / 3,
            lambda a: a + 1e-9 if dtype == torch.float32 else a + 2.0**-60,  # the addend is lost: rounded
            lambda a: a * 2.0**-140 if dtype == torch.float32 else a * 2.0**-1070,  # subnormal results
        ]
        for i, f in enumerate(rounded):
            e0 = _c("executions")
            f(lazy).cpu()
            assert _c("executions") == e0 + 1, (dtype, i)  # the device rounds, not the host


def test_conv_padding_of_uploaded_buffers_runs_no_program(dev):
    """transformers' Encodec works out each convolution's padding from its
    uploaded int64 buffers every call (``EncodecConv1d._get_extra_padding_for_conv1d``:
    ``ceil((length - kernel + padding) / stride + 1)``, then ``max(left, right + extra)``
    in Python): the quotient and its ceiling are exact, so no program runs. The
    ceiling had no host rule: 17 programs a training step of a tiny Encodec."""
    q = _pending_float_work(dev)
    for stride in (1, 2, 3):
        e0 = _c("executions")
        bufs = [torch.tensor(v, dtype=torch.int64) for v in (7, stride)]
        for kernel, step in (bufs, [b.to(dev) for b in bufs]):
            total = kernel - step
            frames = torch.ceil((255 - kernel + total) / step + 1).to(torch.int64) - 1
            extra = frames * step + kernel - total - 255
            right = total // 2
            got = max(total - right, right + extra)
            if kernel.device.type == "cpu":
                want = got
        assert int(got) == int(want), stride
        assert _c("executions") == e0, stride
    del q


def test_int_buffers_stay_known_to_the_host_across_steps(dev):
    """Encodec's convolutions keep stride, kernel size and padding as 0-d int64
    buffers (scalar parameters once moved) and read functions of them every
    call. A barrier's program returned them as device data without a host
    copy, and so did a read of one (``F.pad`` takes ``int(padding_total)``):
    each later call's reads ran a program of their own (1 a forward from its
    second step; 18 a step of a tiny Encodec). Now none."""
    transformers = pytest.importorskip("transformers")
    from transformers.models.encodec.modeling_encodec import EncodecConv1d

    cfg = transformers.EncodecConfig(sampling_rate=800, audio_channels=1, hidden_size=16, num_filters=4)
    torch.manual_seed(0)
    eager = EncodecConv1d(cfg, 4, 4, kernel_size=7, stride=2)
    lazy = copy.deepcopy(eager).to(dev)
    opts = [torch.optim.SGD(m.parameters(), lr=0.01) for m in (eager, lazy)]
    import lazycore.torch as ltorch

    programs = []
    for _ in range(3):
        x = torch.randn(2, 4, 61)
        outs = []
        for m, opt, d in ((eager, opts[0], "cpu"), (lazy, opts[1], dev)):
            e0 = _c("executions")
            y = m(x.to(d) * 1.5)  # (pending work before the reads: mid-step)
            if d == dev:
                programs.append(_c("executions") - e0)
            y.mean().backward()
            opt.step()
            opt.zero_grad()
            outs.append(y.detach().cpu())
        ltorch.mark_step()
        torch.testing.assert_close(outs[1], outs[0], rtol=1e-5, atol=1e-5)  # (XLA sums the convolution in its order)
    assert programs == [0, 0, 0], programs


def test_orders_of_signed_zeros_and_nan_are_the_devices(dev, monkeypatch):
    """Orders of -0.0 and +0.0 and of NaN computed on the host are the
    device's bits (its lowering's compares and selects); an addition of
    -0.0 is left to the device (a rewrite of ``x + 0`` keeps the sign)."""
    from lazycore.runtime import hostreads

    a = torch.tensor([-0.0, 0.0, 1.0, float("nan")])
    b = torch.tensor([0.0, -0.0, -1.0, 2.0])
    q = _pending_float_work(dev)  # mid-step
    cases = [lambda x, y: torch.maximum(x, y), lambda x, y: torch.minimum(x, y), lambda x, y: torch.fmax(x, y),
             lambda x, y: x.clamp(min=0.0), lambda x, y: torch.where(x > y, x, y), lambda x, y: x.isnan() | (y < 0)]
    on_host = []
    for i, f in enumerate(cases):
        e0 = _c("executions")
        on_host.append(f(a.to(dev), b.to(dev)).cpu())
        assert _c("executions") == e0, i
    e0 = _c("executions")
    (a.to(dev)[:3] + b.to(dev)[:3]).cpu()
    assert _c("executions") == e0 + 1
    monkeypatch.setattr(hostreads, "evaluate", lambda *args, **kw: None)
    for i, f in enumerate(cases):
        e0 = _c("executions")
        on_device = f(a.to(dev), b.to(dev)).cpu()
        assert _c("executions") == e0 + 1, i  # (read apart)
        assert torch.equal(on_device.view(-1, 1).view(torch.uint8) if on_device.dtype == torch.bool
                           else on_device.view(torch.int32), on_host[i].view(-1, 1).view(torch.uint8)
                           if on_host[i].dtype == torch.bool else on_host[i].view(torch.int32)), i


# --- small program results read for several reads ---------------------------------------


def _pending_float_work(dev):
    """A step's pending float work (reads beside it are read apart, or on the host)."""
    w = torch.nn.Linear(3, 1).to(dev)
    return w(torch.ones(2, 3, device=dev)).sum()


def test_float_work_with_nothing_else_pending_is_the_devices(dev):
    """With nothing else pending a barrier cuts nothing: a float value's
    program is the whole barrier, its graph the device's (the IR a user
    inspects); its upload's own values are still read from the copy."""
    x = torch.tensor([1.5, 2.0, -3.0]).to(dev)
    e0, t0 = _c("executions"), _c("transfers_to_host")
    assert (x * 2).tolist() == [3.0, 4.0, -6.0] and bool((x > 0).any())
    assert _c("executions") == e0 + 2
    assert x.tolist() == [1.5, 2.0, -3.0] and _c("transfers_to_host") == t0 + 2


def test_two_reads_of_one_pending_base_run_one_program(dev):
    """A detection sampler's ``torch.where(labels >= 1)`` and
    ``torch.where(labels == 0)`` of the same pending labels: the labels are
    computed by one program and copied once; both masks on the host."""
    g = torch.Generator().manual_seed(0)
    y = torch.randint(-3, 3, (40,), generator=g)
    lazy_y = y.to(dev).sort(descending=True).values  # a program's result (a sort: not computed on the host)
    lazycore_mark(dev)
    runs = []
    for device, yy in (("cpu", y.sort(descending=True).values), (dev, lazy_y)):
        q = _pending_float_work(dev) if device != "cpu" else None
        m = yy.sort().values - 1  # a sort: not computed on the host, a program computes the labels
        labels = (m >= 0).to(torch.float32)
        labels[m == -1] = 0.0
        labels[m <= -2] = -1.0
        e0, t0 = _c("executions"), _c("transfers_to_host")
        pos = torch.where(labels >= 1)[0]
        neg = torch.where(labels == 0)[0]
        counts = _c("executions") - e0, _c("transfers_to_host") - t0
        runs.append((pos.cpu(), neg.cpu(), *counts))
        del q
    (wp, wn, _, _), (gp, gn, programs, copies) = runs
    assert torch.equal(gp, wp) and torch.equal(gn, wn) and len(wp) and len(wn)
    assert programs == 1, programs  # was 2: one program for each read
    assert copies == 1, copies  # the labels, once


def test_reads_of_a_small_program_result_copy_it_once(dev):
    """A pooler's ``torch.where(levels == level)[0]`` for each level, of
    levels a program computed: one copy of the levels, no program."""
    levels_cpu = torch.tensor([0, 2, 1, 1, 0, 2, 2, 3])
    levels = levels_cpu.to(dev).exp2().log2().round().long()  # a program's result, not a host copy
    lazycore_mark(dev)
    q = _pending_float_work(dev)
    e0, t0 = _c("executions"), _c("transfers_to_host")
    got = [torch.where(levels == k)[0] for k in range(4)]
    assert _c("executions") == e0  # was one program a level
    assert _c("transfers_to_host") - t0 == 1
    for k in range(4):
        assert torch.equal(got[k].cpu(), torch.where(levels_cpu == k)[0]), k
    del q


def lazycore_mark(dev):
    import lazycore.torch as ltorch

    ltorch.mark_step(wait=True)
