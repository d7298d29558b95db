"""``torch._scaled_mm`` on the lazy device (issue 43, item 5: float8 matrix
products with a wider accumulator and scales): eager's values and errors,
no fallback (frontends/torch/ops/scaled_mm.py).

Products of float8 values are exact in float32; only the order a row's
products are summed in may differ from eager's kernel, so float32 results
are compared to 1e-5 of the largest, and narrower results must be eager's bits or one of
the two neighbours of the float32 value they round.
"""

import pytest
import torch

import lazycore
import lazycore.torch as ltorch

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2


@pytest.fixture
def dev():
    return ltorch.device()


def _operands(dtype_a=E4M3, dtype_b=E4M3, m=16, k=32, n=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = (torch.randn(m, k, generator=g) * 8).to(dtype_a)
    b = (torch.randn(n, k, generator=g) * 8).to(dtype_b).t()  # column-major, as the fast kernels want it
    return a, b


def _lazy(fn, *args, **kwargs):
    move = lambda t: t.to(ltorch.device()) if isinstance(t, torch.Tensor) else t  # noqa: E731
    lazycore.mark_step()
    before = lazycore.metrics.counters()["fallbacks"]
    out = fn(*map(move, args), **{k: move(v) for k, v in kwargs.items()})
    assert out.device.type == "lazy"
    result = out.cpu()
    assert lazycore.metrics.counters()["fallbacks"] == before, lazycore.metrics.fallbacks()
    return result


def _close(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype == torch.float32:
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5 * float(want.abs().max()))
    else:  # a float32 sum in another order may round to the neighbouring value
        g, w = got.float(), want.float()
        assert torch.isnan(g).equal(torch.isnan(w))
        up = torch.nextafter(want.float(), torch.tensor(float("inf"))).to(want.dtype).float()
        down = torch.nextafter(want.float(), torch.tensor(float("-inf"))).to(want.dtype).float()
        same = (g == w) | (torch.isnan(g) & torch.isnan(w))
        fine = same | ((g - w).abs() <= torch.maximum((up - w).abs(), (w - down).abs()))
        assert fine.all(), (g[~fine], w[~fine])
        assert same.float().mean() > 0.9  # mostly eager's bits


SCALES = {"tensor": lambda m, n: (torch.tensor(0.75), torch.tensor(1.5)),
          "tensor_1d": lambda m, n: (torch.tensor([0.5]), torch.tensor([3.0])),
          "tensor_float64": lambda m, n: (torch.tensor(0.3, dtype=torch.float64), torch.tensor(1.7, dtype=torch.float64)),
          "row": lambda m, n: (torch.rand(m, 1, generator=torch.Generator().manual_seed(1)) + 0.5,
                               torch.rand(1, n, generator=torch.Generator().manual_seed(2)) + 0.5)}


@pytest.mark.parametrize("scales", list(SCALES))
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16, E4M3, None], ids=str)
def test_scaled_mm_matches_eager_without_a_fallback(dev, scales, out_dtype):
    a, b = _operands()
    sa, sb = SCALES[scales](16, 8)
    kwargs = {} if out_dtype is None else {"out_dtype": out_dtype}
    try:
        want = torch._scaled_mm(a, b, sa, sb, **kwargs)
    except (ValueError, RuntimeError) as e:
        # which scales eager's CPU kernel takes depends on the CPU: with AMX one scale per
        # operand goes to oneDNN, which takes float64 scales; the emulated kernel refuses them
        with pytest.raises(type(e), match="Invalid scaling configuration"):
            _lazy(torch._scaled_mm, a, b, sa, sb, **kwargs)
        return
    _close(_lazy(torch._scaled_mm, a, b, sa, sb, **kwargs), want)


@pytest.mark.parametrize("bias_dtype", [torch.float32, torch.bfloat16], ids=str)
def test_bias_and_result_scale(dev, bias_dtype):
    a, b = _operands(E5M2, E5M2, seed=3)
    sa, sb = torch.tensor(0.25), torch.tensor(2.0)
    bias = (torch.randn(8, generator=torch.Generator().manual_seed(4)) * 4).to(bias_dtype)
    for out_dtype in (torch.bfloat16, torch.float32):
        want = torch._scaled_mm(a, b, sa, sb, bias=bias, out_dtype=out_dtype)
        _close(_lazy(torch._scaled_mm, a, b, sa, sb, bias=bias, out_dtype=out_dtype), want)
    # a float8 result is scaled by 1 / scale_result first, and saturates at 448 (e4m3fn)
    big = torch.tensor(0.01)
    for r in (torch.tensor(4.0), big):
        want = torch._scaled_mm(a, b, sa, sb, scale_result=r, out_dtype=E4M3)
        _close(_lazy(torch._scaled_mm, a, b, sa, sb, scale_result=r, out_dtype=E4M3), want)


CALLS = {
    "float32_operands": lambda a, b, s: torch._scaled_mm(a.float(), b.float(), s, s, out_dtype=torch.float32),
    "shapes": lambda a, b, s: torch._scaled_mm(a, a, s, s, out_dtype=torch.float32),
    "row_scale_shape": lambda a, b, s: torch._scaled_mm(a, b, s.expand(3, 1).contiguous(), s.expand(1, 8).contiguous(),
                                                        out_dtype=torch.float32),
    "bias_size": lambda a, b, s: torch._scaled_mm(a, b, s, s, bias=torch.zeros(5, device=a.device),
                                                  out_dtype=torch.float32),
}


@pytest.mark.parametrize("call", list(CALLS))
def test_bad_calls_raise_eagers_error_at_the_call(dev, call):
    a, b = _operands()
    s = torch.tensor(1.0)
    with pytest.raises(Exception) as eager:
        CALLS[call](a, b, s)
    with pytest.raises(type(eager.value)) as lazy:
        CALLS[call](a.to(dev), b.to(dev), s.to(dev))
    assert str(lazy.value) == str(eager.value)
