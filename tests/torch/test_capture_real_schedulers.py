"""Real models' training steps captured whole with a scheduler stepped inside
(issue 40 item 2): ``loss = model(**batch).loss`` (or cross entropy), backward,
``clip_grad_norm_``, AdamW's step, the scheduler's step, ``zero_grad``, each
call ended by ``mark_step(wait=True)``. Every scheduler's new rate (and
OneCycleLR's and CyclicLR's ``betas[0]``) is an input of the recording: the
step traces twice (at most three times) and replays the rest, its losses and parameters
are the per-op traced step's bit for bit (the replay compiles nothing of its
own) and eager's to the zoo's tolerance. Tiny configurations, random
initialisation; ``LAZYCORE_TEST_FULL=1`` only (a model's compile takes
seconds). ``ReduceLROnPlateau.step(loss)`` inside the step is a barrier, as
in eager; stepped after it, it replays (tests/torch/test_capture.py,
tests/torch/test_optim_schedulers_replay.py)."""

import copy

import pytest
import torch
import torch.nn.functional as F

import lazycore.torch as ltorch
from _bits import FULL  # (tests/ is on the path)

pytestmark = pytest.mark.skipif(not FULL, reason="real models: full mode only")

S = torch.optim.lr_scheduler
CALLS = 10
TOL = 1e-4
"""Eager's losses and parameters, relative to max(1, |eager's|) (tests/zoo/test_zoo_capture.py's)."""


def _gpt2():
    transformers = pytest.importorskip("transformers")
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_layer=2, n_embd=64, n_head=4, vocab_size=128, n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0, bos_token_id=0, eos_token_id=0))
    g = torch.Generator().manual_seed(1)
    ids = [torch.randint(0, 128, (2, 16), generator=g) for _ in range(2)]
    return model, [{"input_ids": i, "labels": i} for i in ids], lambda m, b: m(**b).loss


def _resnet18():
    # (4 images of 64x64, as benchmark 15's tiny row: batch norm's last stage sees 16 numbers a
    # channel; 2 images of 32x32 leave 2, whose normalised values are +-1 and whose gradients
    # turn rounding into differences of order 1 from eager's, the traced step's as much)
    torchvision = pytest.importorskip("torchvision")
    g = torch.Generator().manual_seed(1)
    batches = [{"x": torch.randn(4, 3, 64, 64, generator=g), "y": torch.randint(0, 10, (4,), generator=g)}
               for _ in range(2)]
    return (torchvision.models.resnet18(weights=None, num_classes=10), batches,
            lambda m, b: F.cross_entropy(m(b["x"]), b["y"]))


def _vit_tiny():
    timm = pytest.importorskip("timm")
    g = torch.Generator().manual_seed(1)
    batches = [{"x": torch.randn(2, 3, 32, 32, generator=g), "y": torch.randint(0, 10, (2,), generator=g)}
               for _ in range(2)]
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=10, img_size=32, patch_size=8)
    return model, batches, lambda m, b: F.cross_entropy(m(b["x"]), b["y"])


MODELS = {"gpt2": _gpt2, "resnet18": _resnet18, "vit_tiny": _vit_tiny}
CHAOTIC = ("resnet18",)
"""Models whose training drifts from eager's over 10 steps by more than rounding, traced per op as
much as captured (ResNet-18 at 4x64x64 with OneCycleLR's peak rate: parameters 0.26 apart after 10
calls, losses 4e-4; benchmark 15's ResNet rows disagree likewise): the captured step is held to the
traced step's values bit for bit, and to eager's first 3 losses."""


def _transformers(name, **kwargs):
    def make(opt):
        return getattr(pytest.importorskip("transformers"), name)(opt, **kwargs)

    return make


SCHEDULERS = {
    "linear_with_warmup": _transformers("get_linear_schedule_with_warmup", num_warmup_steps=2,
                                        num_training_steps=CALLS),
    "cosine_with_warmup": _transformers("get_cosine_schedule_with_warmup", num_warmup_steps=2,
                                        num_training_steps=CALLS),
    "OneCycleLR": lambda opt: S.OneCycleLR(opt, max_lr=1e-3, total_steps=CALLS + 1),  # (cycles betas[0])
    "CosineAnnealingWarmRestarts": lambda opt: S.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2),
    "LambdaLR": lambda opt: S.LambdaLR(opt, lambda s: 0.9 ** s),
    "SequentialLR": lambda opt: S.SequentialLR(opt, [S.LinearLR(opt, start_factor=0.1, total_iters=3),
                                                     S.ExponentialLR(opt, gamma=0.9)], milestones=[3]),
    "CyclicLR": lambda opt: S.CyclicLR(opt, base_lr=1e-4, max_lr=1e-3, step_size_up=2),  # (cycles betas[0])
}


def _train(proto, batches, loss_of, scheduler, dev, captured):
    model = copy.deepcopy(proto).train().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    sched = SCHEDULERS[scheduler](opt)
    params = [p for p in model.parameters() if p.requires_grad]
    on_device = [{k: v.to(dev) for k, v in b.items()} for b in batches]

    def step(batch):
        loss = loss_of(model, batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        return loss.detach()

    fn = ltorch.capture(step) if captured else step
    losses = []
    for i in range(CALLS):
        loss = fn(on_device[i % len(on_device)])
        if dev.type == "lazy":
            ltorch.mark_step(wait=True)
        losses.append(float(loss.cpu()))
    state = {k: v.detach().cpu() for k, v in model.state_dict().items() if v.is_floating_point()}
    return losses, state, fn


@pytest.mark.parametrize("scheduler", sorted(SCHEDULERS))
@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_real_training_step_with_a_scheduler_inside_replays_with_the_traced_steps_values(name, scheduler):
    torch.manual_seed(0)
    proto, batches, loss_of = MODELS[name]()
    dev = ltorch.device()
    eager = _train(proto, batches, loss_of, scheduler, torch.device("cpu"), False)
    traced = _train(proto, batches, loss_of, scheduler, dev, False)
    got = _train(proto, batches, loss_of, scheduler, dev, True)
    # (a third trace where a scalar the first two calls baked became a program parameter on its
    # second value: the first model of a process; test_optim_schedulers_replay.py allows it too)
    assert got[2].traces <= 3 and got[2].replays == CALLS - got[2].traces and got[2].why is None, got[2].why
    assert got[0] == traced[0]
    for k, v in got[1].items():
        assert torch.equal(v, traced[1][k]), k
    if name in CHAOTIC:
        # (the traced step drifts from eager's as much: the first calls are compared)
        assert all(abs(a - b) <= TOL * max(1.0, abs(b)) for a, b in zip(got[0][:3], eager[0][:3])), (got[0], eager[0])
        return
    for a, b in zip(got[0], eager[0]):
        assert abs(a - b) <= TOL * max(1.0, abs(b)), (got[0], eager[0])
    for k, v in eager[1].items():
        assert float(((got[1][k] - v).abs() / v.abs().clamp(min=1.0)).max()) <= TOL, k
