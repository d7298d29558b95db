"""The complex32 (chalf) rule: eager's CPU kernel, run on stand-ins of an op's meta arguments,
says whether it takes chalf (:mod:`lazycore.frontends.torch.chalf_kernels`, issue 43).

Each case is an ATen op with real CPU arguments: eager's own call on them is the answer,
and :func:`refuse` on meta tensors of the same sizes, strides and types must raise the
same exception type and message, or return where eager computes."""

import warnings

import pytest
import torch

from lazycore.frontends.torch import chalf_kernels

pytestmark = pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")

aten = torch.ops.aten
CHALF = torch.complex32
G = torch.Generator().manual_seed(0)
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "ComplexHalf support is experimental")
    Z = torch.randn(2, 3, 8, 8, dtype=torch.complex64, generator=G).to(CHALF)
    V = torch.randn(6, dtype=torch.complex64, generator=G).to(CHALF)
    M = torch.randn(3, 4, dtype=torch.complex64, generator=G).to(CHALF)

CASES = {  # name -> (op, args, kwargs)
    "vdot": (aten.vdot.default, (V, V), {}),
    "cross": (aten.linalg_cross.default, (M[:, :3], M[:, 1:]), {}),
    "sort (a RuntimeError)": (aten.sort.default, (V,), {}),
    "sort of one element": (aten.sort.default, (V[:1],), {}),
    "topk": (aten.topk.default, (V, 2), {}),
    "max pooling": (aten.max_pool2d_with_indices.default, (Z, [2, 2]), {}),
    "reflection padding": (aten.reflection_pad2d.default, (Z, [1, 1, 1, 1]), {}),
    "isin (small: the default kernel)": (aten.isin.Tensor_Tensor, (V, V[:2]), {}),
    "isin (large: sorting, another kernel)": (aten.isin.Tensor_Tensor, (V.repeat(40), V[:2]), {}),
    "addbmm": (aten.addbmm.default, (M[:, :3], M.unsqueeze(0)[:, :, :2].expand(2, 3, 2), M.unsqueeze(0)[:, :2, :3]
                                      .expand(2, 2, 3)), {}),
    "maximum": (aten.maximum.default, (V, V), {}),
    "flip of a transposed tensor": (aten.flip.default, (M.t(), [0]), {}),
    "flip of a contiguous tensor's first dim": (aten.flip.default, (M, [0]), {}),
    "arange of dtype chalf": (aten.arange.start_step, (0, 5, 1), {"dtype": CHALF}),
    "add": (aten.add.Tensor, (V, V), {}),
    "mul by a number": (aten.mul.Scalar, (M, 2.5), {}),
    "cat": (aten.cat.default, ([M, M],), {}),
    "sum": (aten.sum.default, (M,), {}),
    "view_as_real": (aten.view_as_real.default, (V,), {}),
    "to complex64": (aten._to_copy.default, (V,), {"dtype": torch.complex64}),
    "bernoulli_ (a draw)": (aten.bernoulli_.float, (M.clone(), 0.5), {}),
}


def _meta(x):
    if isinstance(x, torch.Tensor):
        return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
    if isinstance(x, (list, tuple)):
        return type(x)(_meta(v) for v in x)
    return x


def _eager(op, args, kwargs):
    try:
        op(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args], **kwargs)
    except Exception as e:
        return e
    return None


@pytest.mark.parametrize("name", sorted(CASES))
def test_refuse_answers_as_eagers_cpu_kernel(name):
    op, args, kwargs = CASES[name]
    eager = _eager(op, args, kwargs)
    state = torch.random.get_rng_state()
    if eager is None:
        chalf_kernels.refuse(op, _meta(args), _meta(kwargs))
    else:
        with pytest.raises(type(eager)) as lazy:
            chalf_kernels.refuse(op, _meta(args), _meta(kwargs))
        assert str(lazy.value) == str(eager)
    assert torch.equal(torch.random.get_rng_state(), state)  # a draw's stand-ins move no generator


def test_the_cases_cover_refusals_and_acceptances():
    answers = {name: _eager(*CASES[name]) is None for name in CASES}
    assert 5 <= sum(answers.values()) < len(answers) - 5, answers
    assert not answers["flip of a transposed tensor"] and answers["flip of a contiguous tensor's first dim"]


def test_an_error_of_the_stand_ins_values_or_shapes_is_no_refusal():
    # eager's CPU refuses mismatched sizes for every element type: the meta kernel's word, not this rule's
    chalf_kernels.refuse(aten.vdot.default, (_meta(V), _meta(V[:4])), {})
    # and an index out of range in the user's values cannot be known here: ones are the stand-ins
    chalf_kernels.refuse(aten.index_select.default, (_meta(V), 0, torch.empty(3, dtype=torch.long, device="meta")), {})


def test_no_chalf_no_probe():
    # an op eager's CPU would refuse on these stand-ins is not run at all without a chalf argument
    chalf_kernels.refuse(aten.vdot.default, (torch.empty(3, device="meta"), torch.empty(4, device="meta")), {})
    assert not chalf_kernels.involves_chalf((torch.empty(3, device="meta"),), {"dtype": torch.complex64})
    assert chalf_kernels.involves_chalf((), {"dtype": CHALF})
    assert chalf_kernels.involves_chalf(([torch.empty(1, device="meta"), _meta(V)],), {})


def test_a_users_generator_is_not_touched():
    g = torch.Generator().manual_seed(5)
    before = g.get_state()
    with pytest.raises(NotImplementedError):
        chalf_kernels.refuse(aten.bernoulli_.float, (_meta(M), 0.5), {"generator": g})
    assert torch.equal(g.get_state(), before)
