"""A product that a sum takes is rounded before the sum, as eager's two
kernels round it (issue 39): XLA's CPU backend lets LLVM contract a float
multiply feeding an add or subtract into one fused multiply-add, and
``lazy-keep-roundings``, in every default pipeline, fences the product so it
cannot. Where eager itself computes one fused multiply-add (``addcmul``,
``add``/``sub`` with ``alpha``, ``lerp``, torch.optim's ``param.add_(grad,
alpha=-lr)`` with a device learning rate), the lowering builds ``lazy.fma``,
whose product the pass leaves to XLA's contraction.

Without the pass: ``x * 0.3 + y`` differed from eager in 18% of float32 values,
``buf.mul(0.9).add(g)`` (SGD momentum) in 28%, float64 in 15%. With it and
without ``lazy.fma``: float64 ``addcmul`` and ``add(alpha=)`` and ``lerp`` in
a quarter of their values."""

import os
import sys

import numpy
import pytest
import torch

import lazycore
import lazycore.torch as ltorch
from lazycore.frontends.torch.ops import eager_loops
from lazycore.ir import config
from lazycore.passes.pipeline import CHANNELS_LAST_PIPELINE, DEFAULT_PIPELINE, default_for

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _bits import INTEL_KERNELS  # noqa: E402

N = 4099  # a tail after every vector width's chunks
FLOATS = [torch.float32, torch.float64]


def _randn(n, dtype, seed):
    return torch.randn(n, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def test_every_default_pipeline_keeps_roundings():
    for pipeline in (DEFAULT_PIPELINE, CHANNELS_LAST_PIPELINE, default_for("cpu"), default_for("gpu")):
        assert pipeline.split(",")[-1] == "lazy-keep-roundings", pipeline


CASES = {
    "x*c+y": lambda x, y, z: x * 0.3 + y,
    "y-x*c": lambda x, y, z: y - x * 0.3,
    "momentum": lambda x, y, z: x.mul(0.9).add(y),
    "x*y+z": lambda x, y, z: x * y + z,
    "-(x*y)+z": lambda x, y, z: -(x * y) + z,
    "broadcast": lambda x, y, z: (x[:1] * y).reshape(1, -1) + z.reshape(1, -1),
}

FUSED = {  # eager's own fused multiply-adds (fmadd), each rounded once
    "addcmul": lambda x, y, z: torch.addcmul(x, y, z),
    "addcmul value": lambda x, y, z: torch.addcmul(x, y, z, value=0.3),
    "add alpha": lambda x, y, z: torch.add(x, y, alpha=0.3),
    "sub alpha": lambda x, y, z: torch.sub(x, y, alpha=0.3),
    "product add alpha": lambda x, y, z: x.mul(0.3).add_(y, alpha=0.6),
    "lerp 0.3": lambda x, y, z: torch.lerp(x, y, 0.3),
    "lerp 0.7": lambda x, y, z: torch.lerp(x, y, 0.7),
    "lerp tensor": lambda x, y, z: torch.lerp(x, y, z.abs().remainder(1.0)),
}


def _run(f, dtype):
    dev = ltorch.device()
    x, y, z = (_randn(N, dtype, s) for s in range(3))
    return f(x.to(dev), y.to(dev), z.to(dev)).cpu(), f(x, y, z)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", list(CASES))
def test_a_product_then_a_sum_is_eagers_bits(case, dtype):
    got, want = _run(CASES[case], dtype)
    assert torch.equal(got, want), int((got != want).sum())


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", list(FUSED))
def test_eagers_fused_multiply_adds_are_its_bits(case, dtype):
    """(eager's answers are libm's ``fma`` of the same operands, float32 and
    float64, on 100k values: checked by hand.)"""
    got, want = _run(FUSED[case], dtype)
    assert torch.equal(got, want), int((got != want).sum())


def test_nan_and_inf_products_stay_nan_and_inf():
    dev = ltorch.device()
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, 1e30, -1e-45, 2.0])
    y = torch.tensor([1.0, 0.0, 1.0, float("inf"), 1e30, 1e-45, float("nan")])
    want = x * y + 1.0
    got = (x.to(dev) * y.to(dev) + 1.0).cpu()
    assert torch.equal(got.isnan(), want.isnan())
    assert torch.equal(got.nan_to_num(0.0, 7.0, -7.0), want.nan_to_num(0.0, 7.0, -7.0))


@pytest.mark.parametrize("dtype", FLOATS)
def test_sgd_momentum_steps_are_eagers_bits(dtype):
    """SGD with momentum's single-tensor update (torch.optim's formulas with a
    Python learning rate), several steps, each a program."""
    dev = ltorch.device()
    p, g = _randn(N, dtype, 0), _randn(N, dtype, 1)
    lp, lg = p.to(dev), g.to(dev)
    buf, lbuf = g.clone(), lg.clone()
    for step in range(4):
        if step:
            buf.mul_(0.9).add_(g)
            lbuf.mul_(0.9).add_(lg)
        p.add_(buf, alpha=-0.05)
        lp.add_(lbuf, alpha=-0.05)
        lazycore.mark_step()
        assert torch.equal(lbuf.cpu(), buf), (step, int((lbuf.cpu() != buf).sum()))
        assert torch.equal(lp.cpu(), p), (step, int((lp.cpu() != p).sum()))


def _mlp(dtype):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4)).to(dtype)


OPTIMIZERS = {
    "sgd momentum": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9),
    "sgd nesterov decay": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
    "adam": lambda ps: torch.optim.Adam(ps, lr=1e-2),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1),
}


def _rounded_sqrt_differs(state) -> torch.Tensor:
    """Where eager's own ``sqrt`` of Adam's ``exp_avg_sq`` is not the
    correctly rounded square root (NumPy's, XLA's): eager's CPU sqrt of a
    large contiguous tensor is MKL's vectorized one, 0.7% of float64 values
    an ulp off. False everywhere for the other optimizers."""
    v = state.get("exp_avg_sq")
    if v is None:
        return torch.zeros((), dtype=torch.bool)
    return v.sqrt() != torch.from_numpy(numpy.sqrt(v.numpy()))


def _warmup(opt):
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: (s + 1) / 3 if s < 2 else 0.7 ** s)


@INTEL_KERNELS
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name,scheduled", [(n, False) for n in OPTIMIZERS] + [("sgd momentum", True)])
def test_optimizer_steps_on_a_mlp_are_eagers_bits(name, scheduled, dtype):
    """torch.optim's steps on a small MLP's parameters, as a user writes them
    (the gradients given: a matmul's sums are not eager's order), four steps,
    each a program: every state tensor eager's bits, and every parameter
    element, but those whose Adam denominator eager took from a square root
    that is not correctly rounded (:func:`_rounded_sqrt_differs`). Scheduled,
    SGD's rate is a device value (``param.add_(grad, alpha=-lr)`` is
    ``addcmul_``: eager's one fused multiply-add)."""
    dev = ltorch.device()
    eager = _mlp(dtype)
    lazy = _mlp(dtype).to(dev)
    opts = [OPTIMIZERS[name](m.parameters()) for m in (eager, lazy)]
    schedules = [_warmup(opt) for opt in opts] if scheduled else []
    off = {p: torch.zeros(p.shape, dtype=torch.bool) for p in eager.parameters()}
    for step in range(4):
        for i, (p, lp) in enumerate(zip(eager.parameters(), lazy.parameters())):
            p.grad = _randn(p.numel(), dtype, 100 * step + i).reshape(p.shape)
            lp.grad = p.grad.to(dev)
        for opt in opts:
            opt.step()
        for schedule in schedules:
            schedule.step()
        lazycore.mark_step()
        for (n, p), lp in zip(eager.named_parameters(), lazy.parameters()):
            for k, v in opts[0].state[p].items():
                lv = opts[1].state[lp][k]
                if isinstance(v, torch.Tensor) and v.is_floating_point():
                    assert torch.equal(lv.cpu().to(v.dtype), v), (step, n, k, int((lv.cpu() != v).sum()))
            off[p] |= _rounded_sqrt_differs(opts[0].state[p])
            got, want = lp.detach().cpu(), p.detach()
            assert off[p].float().mean() < 0.05, (step, n)
            assert torch.equal(got[~off[p]], want[~off[p]]), (step, n, int((got != want)[~off[p]].sum()))


def test_without_the_pass_xla_contracts():
    """What the fence prevents: the same program compiled without it fuses
    (so the tests above show the pass, not an XLA that stopped contracting)."""
    dev = ltorch.device()
    x, y = _randn(N, torch.float32, 0), _randn(N, torch.float32, 1)
    with config.override(pipeline=CHANNELS_LAST_PIPELINE.replace(",lazy-keep-roundings", "")):
        got = (x.to(dev) * 0.3 + y.to(dev)).cpu()
    assert not torch.equal(got, x * 0.3 + y)


@pytest.mark.parametrize("dtype", FLOATS)
def test_a_product_a_short_sum_takes_is_eagers_bits(dtype):
    """``(x * x).sum(-1)`` over rows of 2, NumPy's failing case
    (tests/numpy/test_numpy_keep_roundings.py) through torch: a guard, it
    was eager's bits before products that a reduce sums were fenced too."""
    got, want = _run(lambda x, y, z: (x[:-1].reshape(-1, 2) * x[:-1].reshape(-1, 2)).sum(-1), dtype)
    assert torch.equal(got, want), int((got != want).sum())


@pytest.mark.parametrize("dtype", FLOATS)
def test_a_product_an_eager_sum_kernel_takes_is_eagers_bits(dtype):
    """T5's RMS norm, ``x.pow(2).mean(-1)``: the sum is eager's vectorized
    kernel (``lazy.vector_sum``), whose lowering reaches its first add seven
    slices and reshapes below the product; the pass looked four deep and left
    it contracted (9 of 64 float32 means of rows of 64 off eager's, 12 float64)."""
    got, want = _run(lambda x, y, z: x[:-(N % 64) or None].reshape(-1, 64).pow(2).mean(-1), dtype)
    assert torch.equal(got, want), int((got != want).sum())


@pytest.mark.parametrize("dtype", FLOATS)
def test_lerp_by_a_tensor_weight_is_one_fused_multiply_add(dtype):
    """Eager's lerp picks its side (weight < 0.5 or not) before one ``fmadd``;
    so does the lowering, instead of both sides' fused multiply-adds and a
    select of them (AdamW's ``exp_avg.lerp_(grad, 1 - beta1)`` with a device
    rate: two emulated float64 fmas an element for one). The bits of both
    sides, with weights below, at and above one half."""
    from lazycore.observe.testing import capture

    dev = ltorch.device()
    x, y = _randn(N, dtype, 0), _randn(N, dtype, 1) * 3
    w = torch.linspace(-0.25, 1.25, N, dtype=dtype)
    with capture() as cap:
        got = torch.lerp(x.to(dev), y.to(dev), w.to(dev)).cpu()
    assert torch.equal(got, torch.lerp(x, y, w)), int((got != torch.lerp(x, y, w)).sum())
    text = cap.text("stablehlo")
    products = text.count("stablehlo.multiply") + text.count("lazy.fma")
    assert products == 1, text


def test_the_fence_is_one_integer_op_an_element():
    """The fence is an xor with the replica id broadcast (0: lazycore
    compiles one replica; XLA computes it once a program), one integer op in
    the fused loop, where an xor with ``convert(compare NE m, m)`` cost three
    (benchmark 6's heat program: 1.88 -> 1.54 ms, no fence 1.61)."""
    from lazycore.observe.testing import capture

    dev = ltorch.device()
    x, y = _randn(N, torch.float32, 0), _randn(N, torch.float32, 1)
    with capture() as cap:
        got = (x.to(dev) * 0.3 + y.to(dev)).cpu()
    assert torch.equal(got, x * 0.3 + y), int((got != x * 0.3 + y).sum())
    text = cap.text("stablehlo")
    assert text.count("stablehlo.xor") == 1 and "stablehlo.replica_id" in text, text
    assert "stablehlo.compare" not in text, text


@pytest.mark.parametrize("dtype", FLOATS)
def test_a_nan_product_a_sum_takes_keeps_its_payload(dtype):
    """A NaN's payload goes through the fence unchanged, as through eager's
    two kernels (the xor with "is NaN" flipped its lowest bit)."""
    dev = ltorch.device()
    ints = {torch.float32: torch.int32, torch.float64: torch.int64}[dtype]
    quiet = {torch.float32: 0x7FC00000, torch.float64: 0x7FF8000000000000}[dtype]
    x = torch.tensor([quiet | p for p in (0, 1, 2, 0x1234, 0x2A)], dtype=ints).view(dtype)
    y = torch.ones(5, dtype=dtype)
    want = x * 0.3 + y
    got = (x.to(dev) * 0.3 + y.to(dev)).cpu()
    assert torch.equal(got.view(ints), want.view(ints)), (got.view(ints), want.view(ints))


@pytest.mark.parametrize("dtype", FLOATS)
def test_a_sum_of_a_scatter_adds_its_updates_first(dtype):
    """A tied embedding's gradient: the head's product plus the embedding's
    backward (a scatter-add into zeros). Eager sums each row's updates, then
    adds the product; XLA's simplifier folds ``a + scatter(0, i, u)`` into
    ``scatter(a, i, u)``, adding ``a`` first: 15 of 6,144 float32 elements
    were off (GPT-2's ``wte``, BERT's and T5's word embeddings), rows two
    tokens hit."""
    dev = ltorch.device()
    g = torch.Generator().manual_seed(3)
    weight = torch.randn(96, 64, generator=g, dtype=dtype)
    ids = torch.randint(0, 96, (4, 24), generator=g)
    v, u = torch.randn(4, 24, 64, generator=g, dtype=dtype), torch.randn(96, 64, generator=g, dtype=dtype)
    grads = []
    for d in ("cpu", dev):
        w = weight.to(d).detach().requires_grad_()
        # the weight used twice: looked up (a scatter-add backward) and whole (its gradient u)
        ((torch.nn.functional.embedding(ids.to(d), w) * v.to(d)).sum() + (w * u.to(d)).sum()).backward()
        grads.append(w.grad.cpu())
    want, got = grads
    assert torch.equal(got, want), int((got != want).sum())


@pytest.mark.skipif(not eager_loops.eager_gemm_is_blocked_chain(),
                    reason="eager's GEMM sums in another order on this CPU: lazycore keeps XLA's dot")
@pytest.mark.parametrize("act", ["gelu_new", "gelu"])
def test_tied_transformer_gradients_are_eagers_bits(act):
    """transformers' GPT-2 with its head tied to ``wte``: every gradient
    eager's bits (``wte`` was the one left). Its default activation,
    ``gelu_new``, takes float32 ``tanh``, which lazycore leaves to XLA: where
    eager's (SLEEF's AVX-512 code: 1,641 of 200,000 values off on an Intel
    Xeon) is another, only the erf GELU's model is claimed."""
    transformers = pytest.importorskip("transformers")
    if act == "gelu_new":
        x = torch.linspace(-6, 6, 20001)
        if not torch.equal(torch.tanh(x.to(ltorch.device())).cpu(), torch.tanh(x)):
            pytest.skip("eager's float32 tanh is not XLA's on this CPU")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=96, n_embd=32, n_layer=1, n_head=2, n_positions=32,
                                  activation_function=act)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    lazy = transformers.GPT2LMHeadModel(cfg).eval()
    lazy.load_state_dict(model.state_dict())
    lazy = lazy.to(ltorch.device())
    assert lazy.lm_head.weight is lazy.transformer.wte.weight
    ids = torch.randint(0, 96, (2, 12), generator=torch.Generator().manual_seed(1))
    model(input_ids=ids, labels=ids).loss.backward()
    lids = ids.to(ltorch.device())
    lazy(input_ids=lids, labels=lids).loss.backward()
    off = {n: int((p.grad != q.grad.cpu()).sum()) for (n, p), (_, q) in zip(model.named_parameters(),
                                                                               lazy.named_parameters())}
    assert not any(off.values()), {n: v for n, v in off.items() if v}
