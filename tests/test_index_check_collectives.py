"""Index checks add no collective to a mesh program (benchmark 8, issue 41's cost).

A data-parallel step whose embedding and loss index with values held on the
device checks those indices on each device's shard, and the flag leaves the
program replicated, so XLA all-reduces it. As a maximum that all-reduce
could join no other (the gradients' are sums): every step paid a rendezvous
of all devices more than with checks off. As a sum of the mask's floats it
joins the gradients' all-reduce.
"""

from __future__ import annotations

from isolated import FOUR_DEVICES, run_isolated


def _collectives(checks_on: bool, n: int = 4):
    import torch

    import lazycore
    import lazycore.torch as ltorch
    from lazycore.ir.config import override

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(16, 8), torch.nn.Flatten(), torch.nn.Linear(8 * 4, 16))
    eager = torch.nn.Sequential(torch.nn.Embedding(16, 8), torch.nn.Flatten(), torch.nn.Linear(8 * 4, 16))
    eager.load_state_dict(model.state_dict())
    x = torch.randint(0, 16, (8, 4))
    y = torch.randint(0, 16, (8,))

    mesh = lazycore.Mesh((n,), ("data",), devices=[f"cpu:{i}" for i in range(n)])
    dev = ltorch.device(mesh)
    model = model.to(dev)
    lx, ly = x.to(dev), y.to(dev)
    ltorch.mark_sharding(lx, mesh, ("data", None))
    ltorch.mark_sharding(ly, mesh, ("data",))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    eopt = torch.optim.SGD(eager.parameters(), lr=0.1)
    with override(index_checks=checks_on):
        for _ in range(2):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(lx), ly).backward()
            opt.step()
            ltorch.mark_step(wait=True)
    for _ in range(2):
        eopt.zero_grad()
        torch.nn.functional.cross_entropy(eager(x), y).backward()
        eopt.step()
    for a, b in zip(model.parameters(), eager.parameters()):
        torch.testing.assert_close(a.detach().cpu(), b.detach(), rtol=1e-5, atol=1e-6)
    return dict(lazycore.metrics.programs()[-1].collectives)


def _body():
    on, off = _collectives(True), _collectives(False)
    assert on.get("all-reduce", 0) >= 1, on  # the gradients' (the step is data-parallel)
    assert on == off, f"index checks added collectives: {on} with checks, {off} without"


def test_index_checks_add_no_all_reduce_to_a_data_parallel_step():
    run_isolated(__file__, "_body", timeout=300, env=FOUR_DEVICES)
