"""``loss.backward()`` on the lazy device replays a recording of itself once two
backward passes over forwards of one structure made the same nodes: the same
nodes, so the same programs and bitwise the gradients of the engine's run; the
engine runs instead for every graph a replay cannot see into (hooks, Python
autograd Functions, retain_grad, create_graph, another set of leaves), and a
replayed graph is freed as the engine frees it."""

import pytest
import torch

import lazycore
import lazycore.torch as ltorch
from lazycore.frontends.torch import backward_replay as br
from lazycore.observe import metrics
from _bits import FULL  # (tests/ is on the path)


@pytest.fixture
def switch(monkeypatch):
    def set_on(on: bool):
        monkeypatch.setattr(br.SWITCH, "on", on)
        br._BACKOFF.clear()
        # saved-tensor hooks an earlier test pushed (checkpoint's) are not this test's: each
        # test starts as if its first backward came right after the last one
        monkeypatch.setattr(br.STATE, "pushes_seen", br.STATE.pushes)
        monkeypatch.setattr(br.STATE, "node_hooks", [])
        # (the engine's timed runs are test_the_faster_of_engine_and_replay_is_kept's)
        monkeypatch.setattr(br.SWITCH, "choose", False)
        for name in ("replays", "recordings", "engine"):
            setattr(br.Stats, name, 0)
        br.Stats.why = None

    return set_on


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))


def _loss(model, x, i):
    return model(x).pow(2).mean()


def _run(dev, switch, on, steps=6, loss=_loss, set_to_none=True, accumulate=1, before=None, clear=True):
    """(each step's gradients, compiles, (replays, recordings, engine runs))."""
    switch(on)
    if clear:
        lazycore.cache.clear()
    metrics.reset()
    model = _mlp().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    grads = []
    for i in range(steps):
        if before is not None:
            before(i, model)
        opt.zero_grad(set_to_none=set_to_none)
        for _ in range(accumulate):
            x = torch.randn(4, 8, generator=g).to(dev)
            loss(model, x, i).backward()
        opt.step()
        ltorch.mark_step()
        grads.append([None if p.grad is None else p.grad.cpu() for p in model.parameters()])
    return grads, metrics.counters()["compiles"], (br.Stats.replays, br.Stats.recordings, br.Stats.engine)


def _same(a, b):
    assert len(a) == len(b)
    for step_a, step_b in zip(a, b):
        for x, y in zip(step_a, step_b):
            assert (x is None) == (y is None)
            if x is not None:
                assert torch.equal(x, y)


@pytest.mark.parametrize("set_to_none,accumulate", [(True, 1), (False, 1), (True, 2)],
                         ids=["new_grads", "zero_grad_in_place", "accumulated"])
def test_mlp_gradients_bitwise_the_engines_with_its_programs(dev, switch, set_to_none, accumulate):
    off, compiles, _ = _run(dev, switch, False, set_to_none=set_to_none, accumulate=accumulate)
    on, again, (replays, recordings, engine) = _run(dev, switch, True, set_to_none=set_to_none,
                                                    accumulate=accumulate, clear=False)
    _same(off, on)
    assert compiles > 0 and again == 0  # the replays' programs are the traced steps'
    assert recordings <= 3 * accumulate and replays == 6 * accumulate - recordings and engine == 0


@pytest.mark.skipif(not FULL, reason="a transformers model's compiles (~15 s): LAZYCORE_TEST_FULL=1")
def test_tiny_transformers_model(dev, switch):
    transformers = pytest.importorskip("transformers")

    def run(on):
        switch(on)
        torch.manual_seed(0)
        cfg = transformers.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=32, n_positions=16, resid_pdrop=0.0,
                                      embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
        model = transformers.GPT2LMHeadModel(cfg).to(dev)
        g = torch.Generator().manual_seed(1)
        out = []
        for _ in range(5):
            ids = torch.randint(0, 32, (2, 8), generator=g).to(dev)
            model.zero_grad()
            model(ids, labels=ids).loss.backward()
            ltorch.mark_step()
            out.append([p.grad.cpu() for p in model.parameters()])
        return out, br.Stats.replays

    off, _ = run(False)
    on, replays = run(True)
    _same(off, on)
    assert replays >= 2


def _hooked(model, x, i):
    h = model[0](x)
    h.register_hook(lambda g: g * 2)
    return model[2](torch.tanh(h)).pow(2).mean()


def _retained(model, x, i):
    h = model[0](x)
    h.retain_grad()
    _retained.seen.append(h)
    return model[2](torch.tanh(h)).pow(2).mean()


class _Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        return g * 2


def _function(model, x, i):
    return model[2](torch.tanh(_Twice.apply(model[0](x)))).pow(2).mean()


def _leaf_hook(i, model):
    if i == 0:
        model[2].bias.register_hook(lambda g: g * 3)


@pytest.mark.parametrize("loss,before,why", [
    (_hooked, None, "hook or retain_grad"),
    (_retained, None, "hook or retain_grad"),
    (_function, None, "Python autograd.Function"),
    (_loss, _leaf_hook, "a leaf has a hook"),
], ids=["tensor_hook", "retain_grad", "custom_function", "leaf_hook"])
def test_what_a_replay_cannot_see_runs_the_engine(dev, switch, loss, before, why):
    _retained.seen = []
    off, _, _ = _run(dev, switch, False, loss=loss, before=before)
    seen_off = [h.grad.cpu() for h in _retained.seen]
    _retained.seen = []
    on, _, (replays, recordings, engine) = _run(dev, switch, True, loss=loss, before=before, clear=False)
    _same(off, on)
    assert replays == 0 and recordings == 0 and engine == 6 and why in br.Stats.why
    for a, b in zip(seen_off, [h.grad.cpu() for h in _retained.seen]):
        assert torch.equal(a, b)


def test_create_graph_runs_the_engine(dev, switch):
    def loss(model, x, i):
        out = model(x).pow(2).mean()
        if i >= 3:  # (after replays began)
            out.backward(create_graph=True)
            return model[0].weight.grad.pow(2).sum()
        return out

    off, _, _ = _run(dev, switch, False, loss=loss, set_to_none=False)
    on, _, (replays, _, _) = _run(dev, switch, True, loss=loss, set_to_none=False, clear=False)
    _same(off, on)
    assert replays == 0  # the step after create_graph's is another structure each time


def test_a_leaf_that_stops_requiring_grad_is_another_key(dev, switch):
    def freeze(i, model):
        if i == 4:
            model[0].weight.requires_grad_(False)
            model[0].weight.grad = None

    off, _, _ = _run(dev, switch, False, before=freeze, steps=7)
    on, _, (replays, recordings, _) = _run(dev, switch, True, before=freeze, steps=7, clear=False)
    _same(off, on)
    assert on[-1][0] is None and replays >= 1 and recordings >= 4


def test_second_backward_raises_eagers_error(dev, switch):
    switch(True)
    model = _mlp().to(dev)
    x = torch.randn(4, 8).to(dev)
    for i in range(4):
        model.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        ltorch.mark_step()
    assert br.Stats.replays >= 1
    with pytest.raises(RuntimeError) as lazy:
        loss.backward()
    cpu = _mlp()
    eager = cpu(x.cpu()).pow(2).mean()
    eager.backward()
    with pytest.raises(RuntimeError) as want:
        eager.backward()
    assert str(lazy.value) == str(want.value)


def test_replayed_graph_holds_no_forward_values(dev, switch):
    """A replayed graph is freed as the engine frees it: a loss kept alive keeps
    none of the forward's values, so the barriers' programs are the engine's."""
    def outputs(on):
        switch(on)
        metrics.reset()
        model = _mlp().to(dev)
        kept = []
        for i in range(5):
            model.zero_grad()
            loss = model(torch.randn(4, 8).to(dev)).pow(2).mean()
            loss.backward()
            kept.append(loss)  # (its graph lives on with it)
            ltorch.mark_step()
        return [s[1] for s in metrics.graph_sizes()], br.Stats.replays

    off, _ = outputs(False)
    on, replays = outputs(True)
    assert replays >= 2 and on[1:] == off[1:]  # (a process's first step may upload a constant)


def test_new_leaves_every_step_stop_recording(dev, switch):
    """An input given requires_grad each step is a new leaf: no key repeats, and
    after a few recordings the engine runs without one (the recording's cost)."""
    switch(True)
    model = _mlp().to(dev)
    for i in range(12):
        x = torch.randn(4, 8).to(dev).requires_grad_()
        model(x).pow(2).mean().backward()
        ltorch.mark_step()
        assert x.grad is not None
    assert br.Stats.replays == 0 and br.Stats.recordings <= 6 and br.Stats.engine >= 6, br.Stats.why


def test_a_new_loop_records_after_another_stopped_recording(dev, switch):
    """The backoff is the graph's: a loop that stopped recording (new leaves every
    step, 14 steps: the next recording 7 calls away) does not delay another loop's."""
    switch(True)
    model = _mlp().to(dev)
    for i in range(14):
        x = torch.randn(4, 8).to(dev).requires_grad_()
        model(x).pow(2).mean().backward()
        ltorch.mark_step()
    assert br.Stats.replays == 0 and br.Stats.engine >= 6, br.Stats.why
    other = torch.nn.Linear(8, 3).to(dev)
    for i in range(6):
        other.zero_grad()
        other(torch.randn(4, 8).to(dev)).pow(2).mean().backward()
        ltorch.mark_step()
    assert br.Stats.replays >= 2, br.Stats.why  # (recorded two or three times, then replayed)


def test_old_module_backward_hooks_and_anomaly_mode_run_the_engine(dev, switch):
    calls = []

    def before(i, model):
        if i == 4:  # after replays began
            model[2].register_backward_hook(lambda m, gi, go: calls.append(i))

    off, _, _ = _run(dev, switch, False, before=before, steps=7)
    on, _, (replays, _, engine) = _run(dev, switch, True, before=before, steps=7, clear=False)
    _same(off, on)
    assert len(calls) == 6 and replays >= 1 and engine == 3

    switch(True)
    model = _mlp().to(dev)
    for i in range(6):
        model.zero_grad()
        loss = model(torch.randn(4, 8).to(dev)).pow(2).mean()
        if i < 4:
            loss.backward()
        else:
            with torch.autograd.detect_anomaly():
                loss.backward()
        ltorch.mark_step()
    assert br.Stats.replays == 1 and br.Stats.recordings == 3


def _node_hook(kind):
    """A loss whose graph gets a hook on a node from step 3 on (after replays began)."""
    calls = []

    def loss(model, x, i):
        out = model(x).pow(2).mean()
        if i >= 3:
            if kind == "grad_fn":
                out.grad_fn.register_hook(lambda gi, go: calls.append(i))
            elif kind == "prehook":
                out.grad_fn.register_prehook(lambda go: calls.append(i))
            else:  # the first layer's weight's AccumulateGrad node (as FSDP and DDP hook it)
                acc = model[0].weight.view_as(model[0].weight).grad_fn.next_functions[0][0]
                acc.register_hook(lambda gi, go: calls.append(i))
        return out

    return loss, calls


@pytest.mark.parametrize("kind", ["grad_fn", "prehook", "accumulate_grad"])
def test_hooks_on_graph_nodes_run_the_engine(dev, switch, kind):
    loss, calls = _node_hook(kind)
    off, _, _ = _run(dev, switch, False, loss=loss)
    seen_off, calls[:] = list(calls), []
    on, _, (replays, _, engine) = _run(dev, switch, True, loss=loss, clear=False)
    _same(off, on)
    assert calls == seen_off == [3, 4, 5] and replays >= 1 and engine == 3, br.Stats.why
    assert "autograd node" in br.Stats.why


def test_a_node_hook_removed_or_dead_lets_replay_resume(dev, switch):
    handles = []

    def loss(model, x, i):
        out = model(x).pow(2).mean()
        if i == 3:
            handles.append(out.grad_fn.register_hook(lambda gi, go: None))
        if i == 4:
            handles.pop().remove()
        return out

    off, _, _ = _run(dev, switch, False, loss=loss, steps=7)
    on, _, (replays, _, engine) = _run(dev, switch, True, loss=loss, steps=7, clear=False)
    _same(off, on)
    assert engine == 1 and replays >= 3  # step 3 only: the hook removed at 4, step 3's graph dead after


def test_torch_autograd_functions_run_the_engine(dev, switch):
    """``torch.autograd.backward``/``grad`` are not replayed: the engine runs them, as
    eager's, and on a graph a replay freed it raises eager's error."""
    def loss(model, x, i):
        out = model(x).pow(2).mean()
        if i >= 4:  # after replays began
            torch.autograd.backward([out], [torch.ones((), device=out.device)])
            return model(x).sum() * 0  # (a second backward, replayed or not, adds zeros)
        return out

    off, _, _ = _run(dev, switch, False, loss=loss)
    on, _, (replays, _, engine) = _run(dev, switch, True, loss=loss, clear=False)
    _same(off, on)
    assert replays >= 1 and engine == 0

    switch(True)
    model = _mlp().to(dev)
    x = torch.randn(4, 8).to(dev)
    for i in range(4):
        model.zero_grad()
        out = model(x).pow(2).mean()
        out.backward()
        ltorch.mark_step()
    assert br.Stats.replays >= 1
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        torch.autograd.grad(out, [model[0].weight])


def test_distributed_runs_the_engine(dev, switch):
    """DDP's reducer hooks the leaves' AccumulateGrad nodes in C++, where nothing is
    seen: while torch.distributed is initialized, the engine runs."""
    dist = pytest.importorskip("torch.distributed")
    dist.init_process_group("lazy", rank=0, world_size=1, store=dist.HashStore())
    try:
        off, _, _ = _run(dev, switch, False)
        on, _, (replays, recordings, engine) = _run(dev, switch, True, clear=False)
    finally:
        dist.destroy_process_group()
    _same(off, on)
    assert replays == recordings == 0 and engine == 6 and br.Stats.why == "torch.distributed is initialized"


def test_the_cheaper_of_engine_and_replay_is_kept_by_counts(dev, switch, monkeypatch):
    """When a graph's plan is confirmed, the engine and the replay are weighed by
    counts (nodes since the barrier and nodes the replay makes, against autograd
    nodes): the engine from then on, without a walk, or replays. The same nodes
    either way: gradients bitwise, no compile more."""
    off, _, _ = _run(dev, switch, False, steps=8)
    for ratio, engine in ((1, True), (10**6, False)):
        switch(True)
        monkeypatch.setattr(br.SWITCH, "choose", True)
        monkeypatch.setattr(br, "NODES_PER_AUTOGRAD_NODE", ratio)
        on, again, (replays, recordings, engines) = _run(dev, lambda on: None, True, steps=8, clear=False)
        _same(off, on)
        assert again == 0
        assert list(br._CHOICES.values()) == [br.CHEAPER if engine else ""]
        if engine:  # 2 recordings, then the engine without a walk
            assert (recordings, replays, engines) == (2, 0, 6), br.Stats.why
            assert br.Stats.why == "the engine is cheaper than a replay on this graph"
        else:
            assert (recordings, replays, engines) == (2, 6, 0), br.Stats.why
        br._CHOICES.clear()


def test_the_choice_does_not_depend_on_time(dev, switch, monkeypatch):
    """A replay made slow (a busy loop burning thread time where it frees the
    graph) still replays: the choice is by counts, so the steps a loaded machine
    replays, hence its programs and compiles, are an unloaded one's (a choice by
    thread time kept the engine here)."""
    import time

    real_free = br._free

    def slow_free(*a):
        end = time.thread_time() + 0.02
        while time.thread_time() < end:
            pass
        return real_free(*a)

    off, _, _ = _run(dev, switch, False, steps=8)
    switch(True)
    monkeypatch.setattr(br.SWITCH, "choose", True)
    monkeypatch.setattr(br, "_free", slow_free)
    br._CHOICES.clear()
    on, again, (replays, recordings, engines) = _run(dev, lambda on: None, True, steps=8, clear=False)
    _same(off, on)
    assert again == 0
    assert (recordings, replays, engines) == (2, 6, 0), br.Stats.why
    br._CHOICES.clear()



class _RelativeBias(torch.nn.Module):
    """MaxViT's attention bias (torchvision's RelativePositionalMultiHeadAttention.
    get_relative_positional_bias): a table indexed by a buffer of positions. Its
    IndexBackward0 saves the indices as a tuple of saved tensors, ``(index,)``;
    ``table.t()[:, index[0]]`` saves ``(None, index)``, an undefined one first."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.proj = torch.nn.Linear(8, 3)
        self.table = torch.nn.Parameter(torch.randn(9, 2))
        self.register_buffer("index", torch.tensor([[0, 4, 8], [1, 2, 3], [5, 6, 7]]))

    def forward(self, x):
        bias = self.table[self.index.view(-1)].view(3, 3, 2).sum(-1)
        cols = self.table.t()[:, self.index[0]]
        return (self.proj(x) @ bias).pow(2).mean() + cols.pow(2).mean()


def test_saved_tensor_tuples_are_freed(dev, switch):
    """A node that saves a tensor list (index's indices: a tuple from its
    ``_raw_saved_indices``, MaxViT-T's relative position bias) replays and is
    freed; a replay raised AttributeError in _free before (a tuple has no
    register_hooks)."""
    def run(on):
        switch(on)
        model = _RelativeBias().to(dev)
        g = torch.Generator().manual_seed(1)
        grads = []
        for _ in range(5):
            model.zero_grad()
            loss = model(torch.randn(4, 8, generator=g).to(dev))
            loss.backward()
            ltorch.mark_step()
            grads.append([p.grad.cpu() for p in model.parameters()])
        return grads, loss

    off, _ = run(False)
    on, loss = run(True)
    _same(off, on)
    assert br.Stats.replays >= 2, br.Stats.why
    assert loss.grad_fn.metadata.get(br._FREED)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()
    # every saved tensor of the graph, the tuples' too, was released
    index_nodes, seen, todo = [], set(), [loss.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if type(node).__name__ == "IndexBackward0":
            index_nodes.append(node)
        todo.extend(n for n, _ in node.next_functions)
    assert len(index_nodes) == 2
    for node in index_nodes:
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            node._saved_indices


def test_a_graph_the_engine_freed_raises_eagers_error(dev, switch):
    """A second backward() of a graph the engine ran (a recording) meets a tensor
    list's getter raising: the engine runs and raises eager's error."""
    switch(True)
    model = _RelativeBias().to(dev)
    loss = model(torch.randn(4, 8).to(dev))
    loss.backward()  # (the first: recorded, the engine ran)
    assert br.Stats.recordings == 1
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()
    assert "freed already" in br.Stats.why


def test_a_replay_that_raises_runs_the_engine(dev, switch):
    """A replay that raises before it sets a gradient changed nothing the user
    sees: the engine runs that backward, and that graph's from then on."""
    class Broken:
        def replay(self, *args):
            raise ValueError("broken")

    def before(i, model):
        if i == 4:  # (after replays began)
            for plans in br._PLANS.values():
                for plan in plans:
                    plan.rec.fragment = Broken()

    off, _, _ = _run(dev, switch, False, steps=8)
    on, _, (replays, recordings, engine) = _run(dev, switch, True, steps=8, before=before, clear=False)
    _same(off, on)
    assert replays >= 1 and replays + recordings == 4 and engine == 4
    assert br.Stats.why == "a replay raised ValueError: broken"
    br._CHOICES.clear()
