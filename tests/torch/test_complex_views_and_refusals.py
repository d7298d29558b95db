"""Complex tensors where eager's CPU answers differently from the math (issue 43).

``view(dtype)`` of a complex tensor reads its (real, imaginary) pairs as
elements of a part's width, and elements of that width two at a time as
complex ones: eager does, for complex64, complex128 and complex32; lazycore
raised NotImplementedError. Where eager's CPU kernel refuses complex32
(``flip``, ``cumsum``, ``cumprod``, ``put_``) or float16 (``polar``), the lazy
device computed an answer (and ``arange``, ``linspace``, ``eye`` made complex32
tensors); it now raises eager's error, with eager's message."""

import warnings

import pytest
import torch

from lazycore.observe import metrics

pytestmark = pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")

CHALF = torch.complex32
G = torch.Generator().manual_seed(0)
Z64 = torch.randn(3, 4, dtype=torch.complex64, generator=G)
Z64[0, :2] = torch.tensor([complex(float("inf"), -0.0), complex(float("nan"), 1.0)])
Z128 = torch.randn(3, 4, dtype=torch.complex128, generator=G)
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "ComplexHalf support is experimental")
    Z32 = (torch.randn(3, 4, dtype=torch.complex64, generator=G) * 100).to(CHALF)
R32 = torch.randn(3, 8, generator=G)


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bytes, as eager lays them out."""
    if t.dtype == CHALF:
        t = torch.view_as_real(t.to(torch.complex64)).half()
    elif t.is_complex():
        t = torch.view_as_real(t)
    return t.contiguous().view(torch.uint8)


def _same(got: torch.Tensor, want: torch.Tensor):
    assert got.device.type == "lazy"
    got = got.cpu()
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    assert torch.equal(_bits(got), _bits(want))


VIEWS = {
    "complex64 as float32": (Z64, torch.float32),
    "complex64 as int32": (Z64, torch.int32),
    "complex128 as float64": (Z128, torch.float64),
    "complex128 as int64": (Z128, torch.int64),
    "complex32 as float16": (Z32, torch.float16),
    "complex32 as int16": (Z32, torch.int16),
    "complex32 as bfloat16": (Z32, torch.bfloat16),
    "float32 as complex64": (R32, torch.complex64),
    "int32 as complex64": (R32.view(torch.int32), torch.complex64),
    "float64 as complex128": (R32.double(), torch.complex128),
    "float16 as complex32": (R32.half(), CHALF),
    "int16 as complex32": (R32.half().view(torch.int16), CHALF),
}


@pytest.mark.parametrize("name", list(VIEWS))
def test_view_dtype_of_and_as_complex_reads_eagers_bytes(dev, name, no_fallback):
    x, dtype = VIEWS[name]
    lazy = x.to(dev)
    _same(lazy.view(dtype), x.view(dtype))
    _same(lazy[1:].view(dtype)[:, 1:] * 2, x[1:].view(dtype)[:, 1:] * 2)  # a view of a view, then math


@pytest.mark.parametrize("name", ["complex64 as float32", "complex32 as int16", "float32 as complex64",
                                  "float16 as complex32"])
def test_writes_through_a_complex_dtype_view_reach_the_base(dev, name, no_fallback):
    x, dtype = VIEWS[name]

    def update(t):
        v = t.view(dtype)
        if v.dtype.is_complex:
            v.mul_(1j)
        else:
            v[:, 1::2].mul_(-3).add_(1)  # the imaginary parts
        return t

    _same(update(x.clone().to(dev)), update(x.clone()))


@pytest.mark.parametrize("build", [lambda x: x.t(), lambda x: x[0, 0], lambda x: x[:, :3]],
                         ids=["strided last dim", "0-d", "odd last dim"])
def test_view_dtype_keeps_eagers_errors(dev, build):
    refused = 0
    for x, dtype in ((Z64, torch.float32), (R32[:, :7].contiguous(), torch.complex64), (R32, torch.complex64)):
        try:
            build(x).view(dtype)
            continue
        except RuntimeError as e:
            eager = str(e)
        with pytest.raises(RuntimeError) as lazy:
            build(x.to(dev)).view(dtype)
        assert str(lazy.value) == eager
        refused += 1
    assert refused


REFUSED = {
    "flip": lambda d: torch.flip(Z32[0].to(d), [0]),
    "flip of a last dim": lambda d: torch.flip(Z32.to(d), [1]),
    "fliplr": lambda d: torch.fliplr(Z32.to(d)),
    "cumsum": lambda d: torch.cumsum(Z32.to(d), 1),
    "cumsum of one element": lambda d: torch.cumsum(Z32[0, :1].to(d), 0),
    "cumsum of float16 to complex32": lambda d: torch.cumsum(R32.half().to(d), 0, dtype=CHALF),
    "cumprod": lambda d: torch.cumprod(Z32.to(d), 0),
    "put_": lambda d: Z32.clone().to(d).put_(torch.tensor([0, 5], device=d), Z32[1, :2].to(d)),
    "polar of float16": lambda d: torch.polar(R32.half().to(d), R32.half().to(d)),
    "arange": lambda d: torch.arange(0, 5, 1.5, dtype=CHALF, device=d),
    "linspace": lambda d: torch.linspace(0, 5, 4, dtype=CHALF, device=d),
    "linspace of a tensor end": lambda d: torch.linspace(torch.tensor(0.5, device=d), 5, 4, dtype=CHALF, device=d),
    "eye": lambda d: torch.eye(3, dtype=CHALF, device=d),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_refused_with_eagers_error_where_eagers_cpu_kernel_refuses(dev, name):
    fn = REFUSED[name]
    with pytest.raises(NotImplementedError) as eager:
        fn(torch.device("cpu"))
    with pytest.raises(NotImplementedError) as lazy:
        fn(dev).cpu()
    assert str(lazy.value) == str(eager.value)


ACCEPTED = {  # eager's kernels take these: nothing to flip or scan, or a layout copied whole
    "flip of size-1 dims": (lambda d: torch.flip(Z32[:1].to(d), [0]), False),
    "cumsum of a 0-d tensor": (lambda d: torch.cumsum(Z32[0, 0].to(d), 0), False),
    "cumsum of an empty tensor": (lambda d: torch.cumsum(Z32[:0].to(d), 1), False),
    "cumsum of complex32 to complex64": (lambda d: torch.cumsum(Z32.to(d), 1, dtype=torch.complex64), False),
    # (lowered since chalf_kernels asks eager's kernel: no fallback for what it takes)
    "flip of a contiguous tensor's first dim": (lambda d: torch.flip(Z32.to(d), [0]), False),
    "polar of float32": (lambda d: torch.polar(R32.abs().to(d), R32.to(d)), False),
    "polar of float64, broadcast": (lambda d: torch.polar(R32.double()[:, :1].to(d), R32.double().to(d)), False),
}


@pytest.mark.parametrize("name", list(ACCEPTED))
def test_what_eagers_kernels_take_still_gives_eagers_values(dev, clean_runtime, name):
    fn, counted = ACCEPTED[name]
    _same(fn(dev), fn(torch.device("cpu")))
    assert bool(metrics.fallbacks()) == counted, metrics.fallbacks()
