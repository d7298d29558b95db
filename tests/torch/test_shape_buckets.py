"""Shape buckets on torch: a training step over varying batch sizes and sequence lengths, one program per bucket."""

import math

import pytest
import torch

import lazycore.torch as ltorch
from _bits import BY_HAND  # (tests/ is on the path)
from lazycore.ir.config import override
from lazycore.observe import metrics

pytestmark = pytest.mark.usefixtures("clean_runtime")


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(10, 24), torch.nn.ReLU(), torch.nn.Linear(24, 5))


def step_compiles(fn) -> int:
    """Compiles of the programs ``fn``'s barrier runs (reads of results after it not counted)."""
    before = metrics.counters()["compiles"]
    fn()
    return metrics.counters()["compiles"] - before


def affine_pair(cls, *args, dev):
    """A norm layer with random affine parameters, and its copy on ``dev``."""
    torch.manual_seed(0)
    model = cls(*args)
    with torch.no_grad():
        model.weight.normal_()
        model.bias.normal_()
    lazy = cls(*args).to(dev)
    lazy.load_state_dict(model.state_dict())
    return model, lazy


def check_grads(lazy_model, model):
    for a, b in zip(lazy_model.parameters(), model.parameters()):
        torch.testing.assert_close(a.grad.cpu(), b.grad, rtol=1e-5, atol=1e-6)


def pair(dev, make, seed):
    """The same model twice, eager and on the lazy device."""
    torch.manual_seed(seed)
    model = make()
    lazy = make().to(dev)
    lazy.load_state_dict(model.state_dict())
    return model, lazy


def both_steps(dev, model, lazy, loss_fn, inputs, dims, grads=True) -> int:
    """A training step of ``model`` (eager) and of ``lazy`` (its inputs marked
    along ``dims``, None: not marked); checks the lazy loss and gradients
    against eager's; returns the compiles of the lazy step's barrier."""
    model.zero_grad()
    loss = loss_fn(model, *inputs)
    loss.backward()
    lazy.zero_grad()
    marked = [x.to(dev) if d is None else ltorch.dynamic(x.to(dev), d) for x, d in zip(inputs, dims)]
    got = loss_fn(lazy, *marked)
    got.backward()
    compiled = step_compiles(ltorch.mark_step)
    torch.testing.assert_close(got.cpu(), loss.detach(), rtol=1e-6, atol=0)
    if grads:
        check_grads(lazy, model)
    return compiled


def cross_entropy(model, x, y):
    out = model(x)
    return torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))


@pytest.mark.parametrize("buckets, programs", [(None, 2), ("48,64", 1)])
def test_mlp_training_step_over_batch_sizes_30_to_33(dev, buckets, programs):
    """Powers of two: 30..32 share the bucket of 32 and 33 takes 64's; with a bucket at 48, one program."""
    model = mlp()
    lazy = mlp().to(dev)
    compiled = 0
    with override(buckets=buckets):
        for n in (30, 31, 32, 33):
            compiled += both_steps(dev, model, lazy, cross_entropy, (torch.randn(n, 10), torch.randint(0, 5, (n,))), (0, 0))
    assert compiled == programs


def test_mlp_outputs_with_the_batch_dimension_come_back_cut(dev):
    model = mlp()
    lazy = mlp().to(dev)
    for n in (6, 7):
        x = torch.randn(n, 10)
        out = lazy(ltorch.dynamic(x.to(dev), 0))
        ltorch.mark_step()
        assert out.shape == (n, 5)
        torch.testing.assert_close(out.cpu(), model(x).detach(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(out.softmax(-1).sum(-1).cpu(), torch.ones(n), rtol=1e-6, atol=1e-6)


class Block(torch.nn.Module):
    """A transformer block: causal attention (softmax over the padded sequence), layer norms, an MLP."""

    def __init__(self, d=8, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads
        q, k, v = (z.view(b, t, h, d // h).transpose(1, 2) for z in self.qkv(self.ln1(x)).split(d, dim=-1))
        att = (q @ k.transpose(-1, -2)) / math.sqrt(d // h)
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~causal, float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


# CI: test_token_model_embeddings_... (causal softmax over padded lengths), test_layer_norm_parameter_gradients_over_padded_rows_...
@BY_HAND
def test_transformer_block_over_sequence_lengths_40_to_64(dev):
    model, lazy = pair(dev, Block, 1)
    compiled = 0
    for t in range(40, 65):
        compiled += both_steps(dev, model, lazy, lambda m, x: m(x).pow(2).mean(), (torch.randn(2, t, 8),), (1,),
                               grads=t in (40, 53, 64))
    assert compiled <= 2  # the target; one today (every length in the bucket of 64)
    assert compiled == 1


class Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mha, self.head = torch.nn.MultiheadAttention(16, 2, batch_first=True), torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.mha(x, x, x)[0])


def test_multihead_attention_over_sequence_lengths_compiles_once_per_bucket(dev):
    # its in-projection's backward selects with broadcasts of one zero: a
    # replay of another step's recording brought that recording's broadcast
    # beside the one the step traced, a second program per bucket (6 compiles)
    model, lazy = pair(dev, Attention, 0)
    compiled = [both_steps(dev, model, lazy, lambda m, x: m(x).pow(2).mean(), (torch.randn(3, t, 16),), (1,),
                           grads=t in (9, 16)) for t in (5, 9, 7, 12, 3, 16, 6)]
    # buckets of 8, 16 and 4; the first step's program also loads the state dict, so 8 compiles twice
    assert compiled == [1, 1, 1, 0, 1, 0, 0]


def test_dynamic_needs_a_lazy_input(dev):
    with pytest.raises(TypeError):
        ltorch.dynamic(torch.ones(3), 0)
    x = torch.ones(4, 3).to(dev)
    with pytest.raises(ValueError, match="view"):
        ltorch.dynamic(x[1:], 0)
    with pytest.raises(IndexError):
        ltorch.dynamic(x, 2)
    assert ltorch.dynamic(x, 0) is x


class TokenLM(torch.nn.Module):
    """Token and position embeddings, attention masked by a causal buffer's ``[:t, :t]``, a vocabulary head."""

    def __init__(self, vocab=30, d=8, context=64):
        super().__init__()
        self.tok, self.pos = torch.nn.Embedding(vocab, d), torch.nn.Embedding(context, d)
        self.head = torch.nn.Linear(d, vocab)
        self.register_buffer("causal", torch.ones(context, context, dtype=torch.bool).tril())

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        att = (x @ x.transpose(-1, -2)) / math.sqrt(x.shape[-1])
        att = att.masked_fill(~self.causal[:t, :t], float("-inf")).softmax(-1)
        return self.head(att @ x)


def test_token_model_embeddings_and_their_gradients_over_lengths(dev):
    model, lazy = pair(dev, TokenLM, 2)
    compiled = 0
    for t in (40, 43, 47):  # the embeddings' gradients scatter-add the padded positions' zeros
        compiled += both_steps(dev, model, lazy, cross_entropy, (torch.randint(0, 30, (2, t)), torch.randint(0, 30, (2, t))),
                               (1, 1))
    assert compiled == 1


def test_unmarked_labels_beside_marked_inputs_are_padded_too(dev):
    model = mlp()
    lazy = mlp().to(dev)
    compiled = 0
    for n in (29, 30, 31):  # the labels are not marked
        compiled += both_steps(dev, model, lazy, cross_entropy, (torch.randn(n, 10), torch.randint(0, 5, (n,))), (0, None))
    assert compiled == 1


def test_an_unmarked_input_of_the_marked_inputs_shape_is_padded_as_it(dev):
    """A weight of the batch's shape (3, 5, n), not marked, beside a batch
    marked along its last dimension: at n = 3 and n = 5 another of its
    dimensions has the length too, and only the marked input's dimension is
    padded (before: those lengths were refused and compiled apart)."""
    g = torch.Generator().manual_seed(4)
    before = metrics.counters()["compiles"]
    with override(buckets="16"):
        for n in range(2, 8):
            x = torch.randn(3, 5, n, generator=g)
            w = torch.randn(3, 5, n, generator=g)
            grads = []
            for lazy in (False, True):
                v = (ltorch.dynamic(x.to(dev), 2) if lazy else x.clone()).requires_grad_()
                (torch.softmax(v, dim=-1) * (w.to(dev) if lazy else w)).sum().backward()
                grads.append(v.grad.cpu())
            torch.testing.assert_close(grads[1], grads[0], rtol=0, atol=0)
    assert metrics.counters()["compiles"] - before == 1


def test_value_checks_do_not_see_the_padding(dev):
    """Integer division checks its divisor for zeros: the padded positions (zeros) are masked out of that test."""
    for n in (5, 6):
        a, b = torch.arange(1, n + 1) * 7, torch.arange(1, n + 1)
        la, lb = ltorch.dynamic(a.to(dev), 0), ltorch.dynamic(b.to(dev), 0)
        got = torch.div(la, lb, rounding_mode="floor").sum()
        assert got.item() == torch.div(a, b, rounding_mode="floor").sum().item() == 7 * n
    zero = ltorch.dynamic(torch.tensor([1, 0, 3]).to(dev), 0)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):  # as eager: a real zero still fails
        torch.div(ltorch.dynamic(torch.tensor([1, 2, 3]).to(dev), 0), zero, rounding_mode="floor").sum().item()


def test_convolutions_over_a_padded_batch(dev):
    """The batch is a convolution's batch dimension; the weight gradient contracts it."""
    def cnn():
        torch.manual_seed(3)
        return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(4, 2, 3, stride=2),
                                   torch.nn.Flatten(), torch.nn.Linear(2 * 3 * 3, 3))

    model, lazy = cnn(), cnn().to(dev)
    compiled = 0
    for n in (5, 6, 7):  # the bucket of 8
        compiled += both_steps(dev, model, lazy, cross_entropy, (torch.randn(n, 3, 8, 8), torch.randint(0, 3, (n,))), (0, 0))
    assert compiled == 1


def test_max_pooling_over_a_padded_batch(dev):
    """Max pooling's window search and its backward's index reads over a padded batch."""
    def cnn():
        torch.manual_seed(5)
        return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(3, 2, 1),
                                   torch.nn.Flatten(), torch.nn.Linear(4 * 4 * 4, 3))

    model, lazy = cnn(), cnn().to(dev)
    compiled = 0
    for n in (5, 6, 7):
        compiled += both_steps(dev, model, lazy, cross_entropy, (torch.randn(n, 3, 8, 8), torch.randint(0, 3, (n,))), (0, 0))
    assert compiled == 1


def test_activation_checkpointing_over_a_padded_batch(dev):
    """A checkpointed block's recomputation takes its inputs through an
    optimization barrier, whose results are padded as its operands: one
    program for the bucket (was one a size: the barrier refused padding)."""
    from torch.utils.checkpoint import checkpoint

    def block(model, x, y):
        out = checkpoint(model, x, use_reentrant=False)
        return torch.nn.functional.cross_entropy(out, y)

    model, lazy = pair(dev, mlp, 0)
    compiled = 0
    for n in (11, 12, 13):  # (no size the model's widths share: 5 rows would make its 5 classes the symbol's)
        compiled += both_steps(dev, model, lazy, block, (torch.randn(n, 10), torch.randint(0, 5, (n,))), (0, 0))
    assert compiled == 1


def test_device_loader_marks_the_batch_dimension(dev):
    """94 samples in batches of 32: the last batch of 30 runs the program of 32, uploaded padded (no copy back)."""
    torch.manual_seed(4)
    data = torch.utils.data.TensorDataset(torch.randn(94, 10), torch.randint(0, 5, (94,)))
    loader = torch.utils.data.DataLoader(data, batch_size=32)
    model, lazy = mlp(), mlp().to(dev)
    before = dict(metrics.counters())
    sizes, losses = [], []
    for x, y in ltorch.DeviceLoader(loader, dev, dynamic=0):
        lazy.zero_grad()
        loss = cross_entropy(lazy, x, y)
        loss.backward()
        sizes.append(x.shape[0])
        losses.append(loss)
    after = metrics.counters()
    assert sizes == [32, 32, 30]
    assert after["compiles"] - before["compiles"] == 1
    assert after["transfers_to_host"] == before["transfers_to_host"]  # nothing padded through the host
    for (x, y), got in zip(loader, losses):
        torch.testing.assert_close(got.cpu(), cross_entropy(model, x, y).detach(), rtol=1e-6, atol=0)
    x, y = data[64:]
    model.zero_grad()
    cross_entropy(model, x, y).backward()
    check_grads(lazy, model)  # the last batch's gradients
    for x, _ in ltorch.DeviceLoader(loader, dev, dynamic=0):
        assert ltorch.dynamic(x, 0) is x  # marked already


def test_layer_norm_parameter_gradients_over_padded_rows_are_eagers_bits(dev, threads):
    # eager's per-thread buffers (lazy.buffer_sum) over the rows of a (batch, seq) pair padded in
    # both: the padded rows' products are identities wherever they stand, and each thread's rows
    # are the valid sizes' split, so every size of the bucket is one program and eager's bits
    model, lazy = affine_pair(torch.nn.LayerNorm, 16, dev=dev)
    compiled = 0
    for b, t in ((5, 40), (6, 53), (7, 64), (5, 33)):
        x, g = torch.randn(b, t, 16), torch.randn(b, t, 16)
        model.zero_grad()
        model(x).backward(g)
        lazy.zero_grad()
        xl = ltorch.dynamic(ltorch.dynamic(x.to(dev), 0), 1)
        lazy(xl).backward(ltorch.dynamic(ltorch.dynamic(g.to(dev), 0), 1))
        compiled += step_compiles(ltorch.mark_step)
        for p, q in zip(lazy.parameters(), model.parameters()):
            assert torch.equal(p.grad.cpu(), q.grad), ((b, t), int((p.grad.cpu() != q.grad).sum()))
    assert compiled == 1


def test_batch_norm_over_padded_images_is_eagers_bits_in_one_program(dev, threads):
    # images of several heights padded to one bucket: each image's plane is a
    # lane_sum row padded at its end, whose valid tail eager fuses into its dot
    # product (the padded row summed fused, the products before the tail
    # rounded first), and the backward divides by the element count passed as
    # a number, not baked: one program (after the step that learns the running
    # statistics' counter is a number) and eager's bits, running statistics too
    model, lazy = affine_pair(torch.nn.BatchNorm2d, 3, dev=dev)
    compiled = 0
    with override(buckets="16"):
        for h in (9, 12, 13, 16, 11):
            x, g = torch.randn(2, 3, h, 7) * 3, torch.randn(2, 3, h, 7)
            xe = x.clone().requires_grad_()
            model.zero_grad()
            model(xe).backward(g)
            xl = ltorch.dynamic(x.to(dev), 2).requires_grad_()
            lazy.zero_grad()
            lazy(xl).backward(ltorch.dynamic(g.to(dev), 2))
            compiled += step_compiles(ltorch.mark_step)
            pairs = [(xl.grad, xe.grad), (lazy.weight.grad, model.weight.grad), (lazy.bias.grad, model.bias.grad),
                     (lazy.running_mean, model.running_mean), (lazy.running_var, model.running_var)]
            for got, want in pairs:
                assert torch.equal(got.cpu(), want), (h, int((got.cpu() != want).sum()))
    assert compiled == 2
