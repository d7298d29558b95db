"""Recorded lowerings replayed per call signature (lazycore.recipes) give what tracing gives."""

import numpy as np
import pytest
import torch

import lazycore
import lazycore.torch as ltorch
from lazycore.trace import recipes
from lazycore.ir.config import override


def _digest(t):
    from lazycore.frontends.torch.tensor import read

    return read(t).value.node.digest


def _rand(*shape, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def test_replayed_graph_hashes_as_the_traced_one(dev):
    x, y = _rand(4, 5).to(dev), _rand(5, seed=1).to(dev)

    def f(a, b):
        return torch.tanh(a * 0.5 + b) - 2.5 * a / (b + 3)

    with override(replay=False):
        traced = _digest(f(x, y))
    f(x, y)  # records
    replayed = f(x, y)
    assert _digest(replayed) == traced
    np.testing.assert_allclose(replayed.cpu().numpy(), f(x.cpu(), y.cpu()).numpy(), rtol=1e-5, atol=1e-6)


def test_replays_hash_by_their_inputs_structure_not_the_last_replay(dev):
    """A replay reuses the node digests of the one before only when its
    inputs' digests are the same; inputs of another structure hash anew."""
    x, y = _rand(4, 5).to(dev), _rand(5, seed=1).to(dev)

    def f(a):
        return torch.tanh(a * 0.5 + y)

    inputs = [x, x * 2, x, torch.exp(x), x * 2, x]
    with override(replay=False):
        traced = [_digest(f(a)) for a in inputs]
    f(x)  # records
    assert [_digest(f(a)) for a in inputs] == traced
    assert len(set(traced)) == 3


def test_multi_result_and_list_lowerings_replay_as_traced(dev):
    # results that are a tuple (max with dim), a list input (cat): the
    # generated replay code builds them as the recorded lowering did
    x, y = _rand(4, 5).to(dev), _rand(4, 5, seed=1).to(dev)

    def f(a, b):
        values, indices = torch.max(a * 1.5, dim=1)
        return torch.cat([values, b.sum(0), values], 0), indices

    with override(replay=False):
        traced = [_digest(t) for t in f(x, y)]
    f(x, y)  # records
    for _ in range(2):
        got = f(x, y)
        assert [_digest(t) for t in got] == traced
    want = f(x.cpu(), y.cpu())
    np.testing.assert_allclose(got[0].cpu().numpy(), want[0].numpy(), rtol=1e-6)
    np.testing.assert_array_equal(got[1].cpu().numpy(), want[1].numpy())


def test_a_recording_with_one_input_twice_does_not_serve_two_inputs(dev):
    a, b = _rand(3, 3).to(dev), _rand(3, 3, seed=1).to(dev)
    sq = a * a  # recorded with both operands one handle
    ab = a * b  # same signature, distinct inputs
    ba = b * b
    np.testing.assert_allclose(ab.cpu().numpy(), (a.cpu() * b.cpu()).numpy(), rtol=1e-6)
    np.testing.assert_allclose(sq.cpu().numpy(), (a.cpu() ** 2).numpy(), rtol=1e-6)
    np.testing.assert_allclose(ba.cpu().numpy(), (b.cpu() ** 2).numpy(), rtol=1e-6)


@pytest.mark.parametrize("values", [(0.5, 1.0, 0.0, 2.5, 0.5), (1.0, 3.0, 1.0, 0.0)])
def test_python_numbers_take_their_own_value_at_every_call(dev, values):
    x = _rand(8).to(dev)
    for v in values:  # 0 and 1 are baked constants, others parameters: each value its own recording
        np.testing.assert_allclose((x * v + v).cpu().numpy(), (x.cpu() * v + v).numpy(), rtol=1e-6)
        np.testing.assert_allclose(torch.add(x, x, alpha=int(v)).cpu().numpy(),
                                   torch.add(x.cpu(), x.cpu(), alpha=int(v)).numpy(), rtol=1e-6)


def test_in_place_updates_replay_into_the_right_tensor(dev):
    ws = [_rand(6, seed=i).to(dev) for i in range(3)]
    ref = [w.cpu().clone() for w in ws]
    for step in range(3):
        for w, r in zip(ws, ref):
            w.add_(w * 0.1, alpha=-0.5)
            r.add_(r * 0.1, alpha=-0.5)
        ltorch.mark_step()
    for w, r in zip(ws, ref):
        np.testing.assert_allclose(w.cpu().numpy(), r.numpy(), rtol=1e-6)


def test_random_ops_are_never_replayed(dev):
    ltorch.manual_seed(0)
    x = torch.ones(1000, device=dev)
    a = torch.nn.functional.dropout(x, 0.5)
    b = torch.nn.functional.dropout(x, 0.5)
    assert not torch.equal(a.cpu(), b.cpu())
    u, v = torch.rand(100, device=dev), torch.rand(100, device=dev)
    assert not torch.equal(u.cpu(), v.cpu())


def test_a_lowering_that_looks_at_values_runs_every_call(dev):
    aten = torch.ops.aten

    def sign_by_value(ctx, x):  # a (bad) lowering whose nodes depend on the input's values
        from lazycore.frontends.torch import lowering

        s = float(np.sign(lazycore.to_numpy(x)).sum())
        return lowering.scalar(s, x.dtype, ctx.device, x.shape)

    ltorch.register_lowering(aten.sign.default, sign_by_value)
    try:
        pos, neg = torch.ones(3).to(dev), -torch.ones(3).to(dev)
        assert torch.sign(pos).cpu().tolist() == [3.0] * 3
        assert torch.sign(neg).cpu().tolist() == [-3.0] * 3
    finally:
        ltorch.unregister_lowering(aten.sign.default)


def test_a_lowering_that_reads_other_state_runs_every_call(dev):
    aten = torch.ops.aten
    state = {}

    def add_state(ctx, x):
        return lazycore.apply("add", x, state["h"])

    ltorch.register_lowering(aten.sign.default, add_state)
    try:
        x = torch.zeros(2).to(dev)
        state["h"] = lazycore.from_numpy(np.float32([1, 2]))
        assert torch.sign(x).cpu().tolist() == [1, 2]
        state["h"] = lazycore.from_numpy(np.float32([5, 7]))
        assert torch.sign(x).cpu().tolist() == [5, 7]
    finally:
        ltorch.unregister_lowering(aten.sign.default)


def test_replacing_a_lowering_drops_its_recordings(dev):
    aten = torch.ops.aten
    x = _rand(5).to(dev)
    torch.sign(x)  # recorded with the built-in lowering
    ltorch.register_lowering(aten.sign.default, lambda ctx, h: lazycore.apply("neg", h))
    try:
        np.testing.assert_allclose(torch.sign(x).cpu().numpy(), -x.cpu().numpy())
    finally:
        ltorch.unregister_lowering(aten.sign.default)
    np.testing.assert_allclose(torch.sign(x).cpu().numpy(), torch.sign(x.cpu()).numpy())


def test_core_recording_refuses_assign_and_unknown_handles():
    a = lazycore.from_numpy(np.float32([1, 2]))
    b = lazycore.from_numpy(np.float32([3, 4]))

    res, recipe = recipes.record(lambda x: lazycore.apply("add", x, lazycore.broadcast_to(lazycore.scalar(2.5), (2,))), [a], a)
    assert recipe is not None
    again = recipe.replay([b])
    assert again.value.node.digest == res.value.node.digest
    np.testing.assert_allclose(lazycore.to_numpy(again), [5.5, 6.5])

    def assigns(x):
        x.assign(lazycore.apply("neg", x))
        return x

    _, recipe = recipes.record(assigns, [a], a)
    assert recipe is None
    _, recipe = recipes.record(lambda x: lazycore.apply("add", x, b), [a], a)  # b is no input
    assert recipe is None
    assert not recipes.recording()


def test_replay_can_be_switched_off(dev):
    x = _rand(3).to(dev)
    with override(replay=False):
        for _ in range(2):
            np.testing.assert_allclose((x * 3.0).cpu().numpy(), (x.cpu() * 3.0).numpy())


@pytest.mark.parametrize("dtype", [torch.float16, torch.float64, torch.int64])
def test_in_place_ops_compute_in_the_promoted_type_then_cast(dev, dtype):
    base = (torch.arange(6) - 2).to(dtype)
    other = torch.linspace(-1, 1, 6, dtype=torch.float32) if dtype.is_floating_point else torch.arange(6) * 3
    t, o = base.to(dev), other.to(dev)
    for _ in range(2):  # recorded, then replayed
        t.add_(o, alpha=3)
        t.mul_(o)
        base.add_(other, alpha=3)
        base.mul_(other)
    assert t.dtype == dtype
    np.testing.assert_array_equal(t.cpu().numpy(), base.numpy())


def test_replays_with_a_variadic_operand_group(dev):
    # scatter into a corner of x ends in lazy.dynamic_update_slice, whose start
    # indices are one variadic group
    x = _rand(4, 5)
    for seed in (1, 2, 3):
        idx = torch.from_numpy(np.random.default_rng(seed).integers(0, 4, (4, 2)))
        src = _rand(4, 2, seed=seed)
        got = x.to(dev).scatter(0, idx.to(dev), src.to(dev))
        np.testing.assert_array_equal(got.cpu().numpy(), x.scatter(0, idx, src).numpy())


def test_signed_zeros_and_nan_are_their_own_recordings(dev):
    x = torch.tensor([1.0, -2.0, 3.0])
    xl = x.to(dev)
    for v in (0.0, -0.0, 0.0, -0.0, float("nan"), float("nan"), 0.0):
        got, want = (xl * v).cpu(), x * v
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        np.testing.assert_array_equal(np.signbit(got.numpy()), np.signbit(want.numpy()))


def test_replayed_nodes_carry_the_callers_line(dev):
    from lazycore.frontends.torch.tensor import read
    from lazycore.ir.sourceloc import resolve

    x = _rand(3).to(dev)
    first = x * 2.5  # recorded here
    second = x * 2.5  # replayed here
    lines = [resolve(read(t).value.node.loc) for t in (first, second)]
    assert lines[0][0] == __file__ and lines[1][0] == __file__
    assert lines[1][1] == lines[0][1] + 1


@pytest.fixture
def library_scale(tmp_path):
    """An ``nn.Module`` from a library folder: a frame between the user's lines
    and the op, as ``nn.Linear``'s is."""
    import importlib.util

    from lazycore.ir import sourceloc

    folder = tmp_path / "somelib"
    folder.mkdir()
    (folder / "scale.py").write_text(
        "import torch\n\n\nclass Scale(torch.nn.Module):\n    def forward(self, x):\n        return x * 2.5\n"
    )
    spec = importlib.util.spec_from_file_location("somelib_scale", folder / "scale.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sourceloc.skip(mod)
    try:
        yield mod.Scale()
    finally:
        sourceloc._SKIP.remove(str(folder) + __import__("os").sep)
        sourceloc._LIBRARY.clear()


def _lines(*tensors):
    from lazycore.frontends.torch.tensor import read
    from lazycore.ir.sourceloc import resolve

    return [resolve(read(t).value.node.loc)[1] for t in tensors]


def test_remembered_frames_name_each_users_line(dev, library_scale):
    # Library frames are remembered while they call the library (sourceloc.caller's
    # `remember`); one library function called from three lines must still name
    # each line, even when a later frame reuses an earlier one's memory.
    x = _rand(3).to(dev)
    for _ in range(3):
        a = library_scale(x)  # line A
        b = library_scale(x)  # line B
        c = library_scale(x)  # line C
        first, second, third = _lines(a, b, c)
        assert second == first + 1 and third == first + 2


def test_backward_and_optimizer_ops_name_their_users_lines(dev):
    from lazycore.ir.sourceloc import resolve

    from lazycore.ir.config import override

    lin = torch.nn.Linear(4, 3).to(dev)
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    x = _rand(5, 4).to(dev)
    # (the graph is inspected after opt.step(): no automatic barrier there)
    with override(auto_barrier=False):
        for _ in range(3):
            opt.zero_grad()
            loss = lin(x).square().mean()
            loss.backward()  # the backward line
            grads = [p.grad for p in lin.parameters()]
            opt.step()  # the step line
            here = __import__("inspect").currentframe().f_lineno
            for g in grads:  # the node behind the storage (reading a view would make one here)
                assert resolve(g._storage.handle.value.node.loc) == (__file__, here - 3)
            for p in lin.parameters():
                assert resolve(p._storage.handle.value.node.loc) == (__file__, here - 1)
            ltorch.mark_step()


def test_a_barrier_keeps_no_frame_alive(dev, library_scale):
    import gc
    import weakref

    from lazycore.ir import sourceloc

    x = _rand(3).to(dev)

    def make():
        y = library_scale(x)
        return weakref.ref(y)  # y dies with this frame (or a frame kept for its line)

    for _ in range(3):
        ref = make()
        ltorch.mark_step()
        gc.collect()
        assert ref() is None
        assert sourceloc._LAST[0] is None


def test_reads_and_writes_through_views_replay(dev):
    x = _rand(4, 6)
    xl = x.to(dev)
    for _ in range(3):  # the first round records each view read and write, the others replay
        xl.t()[1:3].mul_(1.5)
        x.t()[1:3].mul_(1.5)
        xl[:, ::2].add_(xl[:, 1::2].flip(0))
        x[:, ::2].add_(x[:, 1::2].flip(0))
        xl.as_strided((3, 2), (5, 2), 1).sub_(0.25)
        x.as_strided((3, 2), (5, 2), 1).sub_(0.25)
    np.testing.assert_allclose(xl.cpu().numpy(), x.numpy(), rtol=1e-6)


def test_the_default_dtype_is_part_of_the_signature(dev):
    x = torch.arange(3).to(dev)
    assert (x * 1.5).dtype == torch.float32
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        y = x * 1.5  # an int tensor times a float takes the default dtype, as in eager
        assert y.dtype == torch.float64
        np.testing.assert_array_equal(y.cpu().numpy(), (torch.arange(3) * 1.5).numpy())
    finally:
        torch.set_default_dtype(old)


# --- float arguments that change every call (lazycore.recipes.record_call) ---------------


@pytest.fixture
def recordings(monkeypatch):
    """How many lowerings were recorded (rather than replayed) so far."""
    from lazycore.frontends.torch import dispatch

    calls = []
    real = dispatch.record_call

    def counting(fn, inputs, args, kwargs, floats=True):
        calls.append(args[0].func)
        return real(fn, inputs, args, kwargs, floats)

    monkeypatch.setattr(dispatch, "record_call", counting)
    return calls


def test_a_learning_rate_that_changes_every_step_is_recorded_once(dev, recordings):
    w, g = _rand(6, 5), _rand(6, 5, seed=1)
    lw, lg = w.to(dev), g.to(dev)
    lazycore.metrics.reset()
    lr = 0.1
    for step in range(6):
        lr *= 0.9  # 0.09, 0.081, ...: every value new
        lw.add_(lg * 0.3, alpha=-lr)
        w.add_(g * 0.3, alpha=-lr)
        ltorch.mark_step()
        np.testing.assert_allclose(lw.cpu().numpy(), w.numpy(), rtol=1e-6)
        if step == 0:
            first = list(recordings)
    assert recordings == first  # the first step's only
    assert torch.ops.aten.add.Tensor in first
    assert lazycore.metrics.counters()["compiles"] == 1


def test_a_float_argument_serves_only_values_of_its_class(dev, recordings):
    """Whole numbers (0 and 1 are baked constants) and each sign get their own recordings."""
    x, y = _rand(7), _rand(7, seed=1)
    lx, ly = x.to(dev), y.to(dev)
    for v in (0.3, 0.7, 2.0, 1.0, -0.3, -0.9, 0.0, -2.0, 1e-3, float("inf"), 5.5):
        got = torch.add(lx, ly, alpha=v).cpu().numpy()
        np.testing.assert_allclose(got, torch.add(x, y, alpha=v).numpy(), rtol=1e-6)
    # 0.3 (then 0.7, 1e-3, 5.5 replay it), 2.0, 1.0, -0.3 (then -0.9), 0.0, -2.0, inf
    assert recordings.count(torch.ops.aten.add.Tensor) == 7  # (the uploads' empty tensors record once more)


def test_a_factory_is_recorded_once_per_signature_and_a_float_that_sizes_it_is_in_the_signature(dev, recordings):
    """``torch.zeros(..., device=lazy)``, ``arange`` and the ``ones`` inside
    attention's math reach the lazy key, not the tensor class: they are
    recorded and replayed as any op (a replay shares the recorded constants),
    and ``arange``'s float end, which sizes its result, keys its meta result."""
    for _ in range(3):
        z = torch.zeros(4, 5, device=dev)
    assert recordings.count(torch.ops.aten.zeros.default) == 1
    np.testing.assert_array_equal(z.cpu().numpy(), np.zeros((4, 5), np.float32))
    for end in (15.0, 30.0, 15.0, 7.5):
        got = torch.arange(end, device=dev)
        np.testing.assert_array_equal(got.cpu().numpy(), torch.arange(end).numpy())
    assert recordings.count(torch.ops.aten.arange.default) == 3
    assert lazycore.metrics.fallbacks() == {}


def test_adam_replays_every_step_and_matches_eager(dev, recordings):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    lmodel = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    lmodel.load_state_dict(model.state_dict())
    lmodel.to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    lopt = torch.optim.Adam(lmodel.parameters(), lr=0.05)
    x, y = _rand(16, 5, seed=2), _rand(16, 3, seed=3)
    lx, ly = x.to(dev), y.to(dev)
    for step in range(8):
        for m, o, a, b in ((model, opt, x, y), (lmodel, lopt, lx, ly)):
            o.zero_grad()
            torch.nn.functional.mse_loss(m(a), b).backward()
            o.step()
        ltorch.mark_step()
        if step == 2:
            settled = len(recordings)
            compiles = lazycore.metrics.counters()["compiles"]
    assert len(recordings) == settled  # Adam's step size and bias corrections change every step
    assert lazycore.metrics.counters()["compiles"] == compiles
    for p, lp in zip(model.parameters(), lmodel.parameters()):
        np.testing.assert_allclose(lp.detach().cpu().numpy(), p.detach().numpy(), rtol=1e-4, atol=1e-5)


def test_lerp_branching_on_its_weight_is_recorded_per_weight(dev, recordings):
    """The lerp lowering picks its formula by ``abs(weight) < 0.5``: looking at the
    weight makes each recording serve its own value only."""
    x, y = _rand(9), _rand(9, seed=1)
    lx, ly = x.to(dev), y.to(dev)
    for w in (0.3, 0.7, 0.2, 0.9):
        np.testing.assert_allclose(torch.lerp(lx, ly, w).cpu().numpy(), torch.lerp(x, y, w).numpy(),
                                   rtol=1e-6, atol=1e-7)
    assert recordings.count(torch.ops.aten.lerp.Scalar) == 4


def _recorded(fn, value):
    a = lazycore.from_numpy(np.float32([1, 2, 3]))
    res, recipe = recipes.record_call(fn, [a], (a, value), {})
    return a, res, recipe


@pytest.mark.parametrize("looks", [
    lambda s: s > 0.5,
    lambda s: s * 2,
    lambda s: -s,
    lambda s: float(s),
    lambda s: abs(s),
    lambda s: s == 0.25,
    lambda s: round(s, 3),
    lambda s: f"{s:.3f}",
    lambda s: {s: 1},
])
def test_a_float_the_lowering_looks_at_makes_the_recording_value_specific(looks):
    def fn(x, s):
        looks(s)
        return lazycore.apply("mul", x, lazycore.broadcast_to(lazycore.scalar(s), (3,)))

    _, _, recipe = _recorded(fn, 0.25)
    assert recipe is not None and not recipe.parametric


def _unnoticed(s):
    import struct

    return struct.unpack("d", struct.pack("d", s))[0]  # read in C, as a plain double


@pytest.mark.parametrize("bake", [
    lambda s: lazycore.apply("constant", value=np.asarray(_unnoticed(s), np.float32)),
    lambda s: lazycore.scalar(_unnoticed(s)),
    lambda s: lazycore.convert_to(lazycore.scalar(np.float16(_unnoticed(s)), "f16"), "f32"),
])
def test_a_float_baked_into_a_constant_makes_the_recording_value_specific(bake):
    def fn(x, s):
        return lazycore.apply("mul", x, lazycore.broadcast_to(bake(s), (3,)))

    _, _, recipe = _recorded(fn, 0.375)
    assert recipe is not None and not recipe.parametric


def test_a_parametric_recording_replays_other_values_with_the_same_digests():
    def fn(x, s):
        if s == 1 or s < 0:  # decided by the value class: unnoticed
            return x
        return lazycore.apply("mul", x, lazycore.broadcast_to(lazycore.scalar(s), (3,)))

    a, res, recipe = _recorded(fn, 0.25)
    assert recipe.parametric
    b = lazycore.from_numpy(np.float32([4, 5, 6]))
    outs = [recipe.replay([b], [v]) for v in (0.5 + 0.25, 1.5, 0.75)]
    assert {o.value.node.digest for o in outs} == {res.value.node.digest}
    # one value, one scalar parameter (and one broadcast), as one constant would be
    assert outs[0].value.node.operands[1] == outs[2].value.node.operands[1]
    assert outs[0].value.node.operands[1] != outs[1].value.node.operands[1]
    np.testing.assert_allclose(lazycore.to_numpy(outs[1]), [6, 7.5, 9])
    np.testing.assert_allclose(lazycore.to_numpy(outs[2]), [3, 3.75, 4.5])
    np.testing.assert_allclose(lazycore.to_numpy(res), [0.25, 0.5, 0.75])
