"""Writes into tensors that share memory, as eager does them: through an
expanded view (some ops write there, and each memory location takes the one
value written to it), and from an input laid out over the written tensor's
memory (eager refuses a partial overlap). Each case runs eagerly on the CPU and
on the lazy device, from the same values; both must raise the same error or
leave every tensor the same."""

import warnings

import pytest
import torch

CASES = {
    # the written tensor's elements share memory: only some kernels accept it
    "add_": lambda x, e: e.add_(1),
    "mul_": lambda x, e: e.mul_(2),
    "neg_": lambda x, e: e.neg_(),
    "copy_": lambda x, e: e.copy_(torch.ones(2, 3, device=x.device)),
    "fill_ number": lambda x, e: e.fill_(7),
    "fill_ tensor": lambda x, e: e.fill_(torch.tensor(7.0, device=x.device)),
    "zero_": lambda x, e: e.zero_(),
    "fill_ a column of the expansion": lambda x, e: e[..., :1].fill_(-1),
    "setitem a column (fill_ of a tensor)": lambda x, e: e.__setitem__((slice(None), 1), 3),
    "fill_ the transposed expansion": lambda x, e: e.t().fill_(3),
    "masked_fill_": lambda x, e: e.masked_fill_(torch.tensor([[True, False, True]] * 2, device=x.device), 5),
    # the written tensor is one copy of the expansion: no element shares memory
    "setitem a row": lambda x, e: e.__setitem__(0, 7),
    "setitem a row from a tensor": lambda x, e: e.__setitem__(0, torch.tensor([4.0, 5.0, 6.0], device=x.device)),
    "setitem rows from a tensor": lambda x, e: e.__setitem__(slice(None, 1), torch.full((1, 3), 9.0, device=x.device)),
    "add_ into a row": lambda x, e: e[1].add_(torch.tensor([1.0, 2.0, 3.0], device=x.device)),
    "setitem one element": lambda x, e: e[1].__setitem__(0, 5),
}


def _run(case, device):
    x = torch.tensor([0.5, -1.0, 2.0], device=device)
    e = x.expand(2, 3)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # eager's deprecation of writes into expanded tensors
            case(x, e)
    except RuntimeError as err:
        return "raised", str(err)
    return x.cpu(), e.cpu()


@pytest.mark.parametrize("name", list(CASES))
def test_a_write_into_an_expanded_view_is_eagers(dev, name):
    want = _run(CASES[name], "cpu")
    got = _run(CASES[name], dev)
    if isinstance(want[0], str):
        assert got == want
    else:
        assert not isinstance(got[0], str), got
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=0, atol=0)


def test_a_write_into_an_expansion_of_a_conjugate_lands_conjugated(dev):
    for device in ("cpu", dev):
        x = torch.tensor([1 + 2j, 3 - 1j], device=device)
        x.conj().expand(2, 2)[1] = torch.tensor([5 + 5j, 6 + 6j], device=device)
        assert x.cpu().tolist() == [5 - 5j, 6 - 6j]


def test_where_an_expansion_writes_a_location_twice_the_last_value_stays(dev):
    """index_put_ writes rows 0 and 1 of a 2-row expansion of one row: eager
    writes them in order, so the memory holds row 1's values."""
    for device in ("cpu", dev):
        x = torch.zeros(3, device=device)
        values = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], device=device)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            x.expand(2, 3).index_put_((torch.tensor([0, 1], device=device),), values)
        assert x.cpu().tolist() == [4.0, 5.0, 6.0]


OVERLAPPING_INPUTS = {
    "x.add_(x[0])": lambda x: x.add_(x[0]),
    "x.t().add_(x)": lambda x: x.t().add_(x),
    "x.add_(x)": lambda x: x.add_(x),
    "x[1:].add_(x[:-1])": lambda x: x[1:].add_(x[:-1]),
    "x[1:].copy_(x[:-1])": lambda x: x[1:].copy_(x[:-1]),
    "x[:1] = x.t()[:1]": lambda x: x.__setitem__(slice(None, 1), x.t()[:1]),
    "x[0] = x[1]": lambda x: x.__setitem__(0, x[1]),
    "x.view(-1).mul_(x.view(-1))": lambda x: x.view(-1).mul_(x.view(-1)),
    "torch.add(x[0], x[1], out=x[1])": lambda x: torch.add(x[0], x[1], out=x[1]),
    "x.clamp_(min=x[0])": lambda x: x.clamp_(min=x[0]),
}


def _outcomes(dev, make, write):
    """On eager's CPU and on the lazy device: ``make(device)`` after ``write``, or the message it raised."""
    outcomes = []
    for device in ("cpu", dev):
        x = make(device)
        try:
            write(x)
            outcomes.append(x.cpu().tolist())
        except RuntimeError as err:
            outcomes.append(str(err))
    return outcomes


@pytest.mark.parametrize("name", list(OVERLAPPING_INPUTS))
def test_an_input_overlapping_the_written_tensor_is_eagers(dev, name):
    outcomes = _outcomes(dev, lambda d: torch.arange(9.0, device=d).reshape(3, 3), OVERLAPPING_INPUTS[name])
    assert outcomes[1] == outcomes[0]


# views of another dtype over one storage (view_as_real, .real, view(dtype)) stand in over
# one buffer in their own elements: the float views of a complex tensor cover twice its count
OVERLAPPING_DTYPE_VIEWS = {
    "view_as_real(z)[..., 1].copy_(view_as_real(z)[..., 0])":
        lambda z: torch.view_as_real(z)[..., 1].copy_(torch.view_as_real(z)[..., 0]),
    "z.view(float32)[1:3].copy_(view_as_real(z)[0])":
        lambda z: z.view(torch.float32)[1:3].copy_(torch.view_as_real(z)[0]),
    "z.mul_(z.real)": lambda z: z.mul_(z.real),
    "z[1:].add_(z[:-1].imag)": lambda z: z[1:].add_(z[:-1].imag),
}


@pytest.mark.parametrize("name", list(OVERLAPPING_DTYPE_VIEWS))
def test_a_view_of_another_dtype_overlapping_the_written_tensor_is_eagers(dev, name):
    outcomes = _outcomes(dev, lambda d: torch.complex(torch.arange(3.0), torch.arange(3.0) + 10).to(d),
                         OVERLAPPING_DTYPE_VIEWS[name])
    assert outcomes[1] == outcomes[0]
