"""The loops of test_hunt30v_torch.py: torchvision and timm vision models
nobody here trained before, run unchanged as a new user would (random init,
nothing downloaded, tiny inputs), in the shape of hunt 27's loops
(``loop(device, each, dtype) -> (losses, state)``, cases_hunt27.py):
classification models with SGD/AdamW and timm's own optimizers and
schedulers, segmentation, video, and torchvision's transforms v2 on lazy
tensors.

Dropout and stochastic depth are turned off (``p = 0``): their masks come
from each device's generator, so no two devices agree on them.

:func:`compare` is hunt 27's comparison (losses, state, fallbacks, compiles
and programs a step, a float64 referee on request) over this module's loops.
``python tests/consumers/cases_hunt30v.py [names]`` prints the table;
``SPREAD=1`` prints :func:`float64_spread` of each instead, ``STRIDES=1``
:func:`float64_strides`; ``ELEMENTS=1`` adds zoo_harness.referee's findings.
"""

from __future__ import annotations

import copy
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "zoo"))

STEPS = 4
WARMUP = 2
CASES: dict = {}


def _state(model, **extra):
    out = dict(model.state_dict())
    out.update(extra)
    return out


def _no_dropout(model):
    """Dropout, stochastic depth and drop path off: each device draws its own
    masks."""
    for m in model.modules():
        if isinstance(m, nn.modules.dropout._DropoutNd) or type(m).__name__ in ("StochasticDepth", "DropPath"):
            m.p = 0.0
            if hasattr(m, "drop_prob"):
                m.drop_prob = 0.0
    return model


class _Nudge:
    """A relative nudge :func:`_classify` gives each initial weight (0: none):
    :func:`float64_spread` sets it for one run."""

    rel = 0.0


def _nudged(model):
    if _Nudge.rel:
        g = torch.Generator().manual_seed(7)
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(1 + _Nudge.rel * torch.randn(p.shape, generator=g, dtype=torch.float64).to(p.dtype))
    return model


def _optimizer(kind, model):
    params = model.parameters()
    if kind == "sgd":
        return torch.optim.SGD(params, lr=0.01, momentum=0.9, weight_decay=1e-4), None
    if kind == "adamw":
        return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.05), None
    # timm's own optimizers and its cosine schedule with a warm-up, as timm's train.py makes them
    from timm.optim import create_optimizer_v2
    from timm.scheduler import create_scheduler_v2

    opt = create_optimizer_v2(model, opt=kind, lr=1e-3 if kind != "lars" else 0.05, weight_decay=0.05)
    sched, _ = create_scheduler_v2(opt, sched="cosine", num_epochs=STEPS + 2, warmup_epochs=1, warmup_lr=1e-4,
                                   step_on_epochs=False, updates_per_epoch=1)
    return opt, sched


def _classify(build, device, each, dtype, opt="sgd", size=64, n=2, classes=10, frames=None, smoothing=0.0,
              finish=None):
    """A classification training loop: cross entropy (with label smoothing if
    asked) of the model's logits; auxiliary and distillation heads' outputs
    (a tuple or torchvision's namedtuples) each add a loss. ``finish(model,
    device, dtype, generator) -> (model, extra state)`` after the last step."""
    torch.manual_seed(0)
    model = _nudged(_no_dropout(build()).to(dtype)).to(device)
    model.train()
    optim, sched = _optimizer(opt, model)
    g = torch.Generator().manual_seed(1)
    losses = []
    for step in range(STEPS):
        shape = (n, 3, size, size) if frames is None else (n, 3, frames, size, size)
        x = torch.randn(*shape, generator=g).to(dtype).to(device)
        y = torch.randint(0, classes, (n,), generator=g).to(device)
        loss = _loss(model(x), y, smoothing)
        optim.zero_grad()
        loss.backward()
        optim.step()
        if sched is not None:
            sched.step_update(step + 1)
        losses.append(loss.detach())
        each()
    extra = {}
    if finish is not None:
        model, extra = finish(model, device, dtype, g)
    return losses, _state(model, **extra)


def _loss(out, y, smoothing=0.0):
    """Cross entropy of the logits; auxiliary and distillation heads' outputs
    (a tuple or torchvision's namedtuples) each add 0.3 of theirs."""
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return sum(F.cross_entropy(o, y, label_smoothing=smoothing) * (1.0 if i == 0 else 0.3)
               for i, o in enumerate(outs) if o is not None)


def _tv(name, **kw):
    def build():
        import torchvision

        return torchvision.models.get_model(name, weights=None, num_classes=10, **kw)

    return build


def _timm(name, **kw):
    def build():
        import timm

        return timm.create_model(name, pretrained=False, num_classes=10, drop_rate=0.0, **kw)

    return build


def _add(name, build, **kw):
    def loop(device, each, dtype=torch.float32):
        return _classify(build, device, each, dtype, **kw)

    loop.__name__ = name
    CASES[name] = loop


# --- torchvision classification ----------------------------------------------------------------------

_add("tv_efficientnet_b0", _tv("efficientnet_b0"))
_add("tv_efficientnet_v2_s", _tv("efficientnet_v2_s"), opt="adamw")
_add("tv_densenet121", _tv("densenet121"))
_add("tv_googlenet", _tv("googlenet", aux_logits=True, init_weights=True))
_add("tv_inception_v3", _tv("inception_v3", aux_logits=True, init_weights=True), size=299, n=2)
_add("tv_squeezenet1_1", _tv("squeezenet1_1"))
_add("tv_vgg11_bn", _tv("vgg11_bn"), size=32)
_add("tv_mnasnet0_5", _tv("mnasnet0_5"))
_add("tv_swin_t", _tv("swin_t"), opt="adamw")
_add("tv_swin_v2_t", _tv("swin_v2_t"), opt="adamw")
_add("tv_maxvit_t", _tv("maxvit_t", input_size=(224, 224)), size=224, n=1, opt="adamw")
_add("tv_convnext_tiny", _tv("convnext_tiny"), opt="adamw", smoothing=0.1)
_add("tv_regnet_x_400mf", _tv("regnet_x_400mf"))

# --- torchvision video (tiny clips) ----------------------------------------------------------------------

_add("tv_s3d", _tv("s3d"), size=224, frames=16, n=1)
_add("tv_mvit_v2_s", _tv("mvit_v2_s"), size=224, frames=16, n=1, opt="adamw")
_add("tv_swin3d_t", _tv("swin3d_t"), size=64, frames=4, n=1, opt="adamw")

# --- timm, with timm's optimizers and scheduler --------------------------------------------------------

_add("timm_efficientnet_b0", _timm("efficientnet_b0"), opt="lamb")
_add("timm_mixnet_s", _timm("mixnet_s"), opt="rmsproptf")
_add("timm_coatnet_nano", _timm("coatnet_nano_rw_224", img_size=64), opt="adamw")
_add("timm_maxvit_nano", _timm("maxvit_nano_rw_256", img_size=64), opt="lion")
_add("timm_swin_tiny", _timm("swin_tiny_patch4_window7_224", img_size=56, window_size=7), size=56, opt="adabelief")
_add("timm_deit_tiny_distilled", _timm("deit_tiny_distilled_patch16_224", img_size=64), opt="nadamw")
_add("timm_beit_base", _timm("beit_base_patch16_224", img_size=32, depth=2, embed_dim=64, num_heads=2),
     size=32, opt="madgrad")
_add("timm_eva02_tiny", _timm("eva02_tiny_patch14_224", img_size=56), size=56, opt="adamw")
_add("timm_levit_128s", _timm("levit_128s", img_size=64), opt="lars")
_add("timm_mobilevit_xxs", _timm("mobilevit_xxs"), opt="adamw")
_add("timm_efficientformer_l1", _timm("efficientformer_l1"), size=224, n=1, opt="adamw")
_add("timm_repvgg_a0", _timm("repvgg_a0"), opt="sgd")
_add("timm_nfnet_l0", _timm("nfnet_l0"), opt="sgd")
_add("timm_cspresnet50", _timm("cspresnet50"), opt="sgd")
_add("timm_dla34", _timm("dla34"), opt="sgd")
_add("timm_hrnet_w18_small", _timm("hrnet_w18_small"), opt="sgd")
_add("timm_resnest14d", _timm("resnest14d"), opt="sgd")
_add("timm_res2net50_14w_8s", _timm("res2net50_14w_8s"), opt="sgd")
_add("timm_selecsls42b", _timm("selecsls42b"), opt="sgd")


def _fold_repvgg(model, device, dtype, g):
    """``timm.utils.reparameterize_model`` on the trained model: each block's
    3x3, 1x1 and identity branches (with their batch norms) fold into one 3x3
    convolution, on the device's tensors; eval logits before and after."""
    from timm.utils import reparameterize_model

    model.eval()
    x = torch.randn(2, 3, 32, 32, generator=g).to(dtype).to(device)
    before = model(x).detach()
    folded = reparameterize_model(model)
    return folded, dict(before=before, after=folded(x).detach())


def timm_repvgg_reparam(device, each, dtype=torch.float32):
    """RepVGG trained a few steps, then folded for inference (RepVGG's point)."""
    return _classify(_timm("repvgg_a0"), device, each, dtype, n=4, finish=_fold_repvgg)


CASES["timm_repvgg_reparam"] = timm_repvgg_reparam


# --- segmentation -------------------------------------------------------------------------------------


def _segment(name, device, each, dtype, size=64, **kw):
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.get_model(name, weights=None, weights_backbone=None, num_classes=5, **kw)
    model = _no_dropout(model).to(dtype).to(device)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        x = torch.randn(2, 3, size, size, generator=g).to(dtype).to(device)
        y = torch.randint(0, 5, (2, size, size), generator=g)
        y[:, :3] = 255  # torchvision's references ignore 255
        y = y.to(device)
        out = model(x)
        loss = F.cross_entropy(out["out"], y, ignore_index=255)
        if "aux" in out:
            loss = loss + 0.5 * F.cross_entropy(out["aux"], y, ignore_index=255)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        each()
    return losses, _state(model)


def seg_fcn_resnet50(device, each, dtype=torch.float32):
    return _segment("fcn_resnet50", device, each, dtype, aux_loss=True)


def seg_deeplabv3_mobilenet(device, each, dtype=torch.float32):
    return _segment("deeplabv3_mobilenet_v3_large", device, each, dtype, aux_loss=True)


def seg_lraspp_mobilenet(device, each, dtype=torch.float32):
    return _segment("lraspp_mobilenet_v3_large", device, each, dtype)


for _f in (seg_fcn_resnet50, seg_deeplabv3_mobilenet, seg_lraspp_mobilenet):
    CASES[_f.__name__] = _f


# --- transforms v2 on lazy tensors -------------------------------------------------------------------------


def transforms_v2_mixup(device, each, dtype=torch.float32):
    """torchvision's transforms v2 as a training script writes them, on a
    batch of lazy images (the random parameters are drawn on the host from
    the seeded global generator, so both devices crop the same boxes), then
    MixUp or CutMix (``RandomChoice``) on the batch and a small network."""
    from torchvision.transforms import v2

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(8, 4)).to(dtype).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    tf = v2.Compose([v2.RandomResizedCrop(16, antialias=True), v2.RandomHorizontalFlip(),
                     v2.ColorJitter(0.4, 0.4, 0.4, 0.1), v2.Normalize([0.5, 0.4, 0.3], [0.2, 0.25, 0.3])])
    mix = v2.RandomChoice([v2.MixUp(num_classes=4), v2.CutMix(num_classes=4)])
    g = torch.Generator().manual_seed(1)
    losses = []
    torch.manual_seed(2)
    for _ in range(STEPS):
        imgs = torch.rand(4, 3, 24, 24, generator=g).to(dtype).to(device)
        y = torch.randint(0, 4, (4,), generator=g).to(device)
        x = torch.stack([tf(v2.functional.to_dtype(i, dtype, scale=True)) for i in imgs])
        x, soft = mix(x, y)
        loss = F.cross_entropy(model(x), soft)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        each()
    return losses, _state(model)


CASES["transforms_v2_mixup"] = transforms_v2_mixup


# --- one step against float64 ---------------------------------------------------------------------


def _first_step(build, device, dtype, size, n, classes, prepare=None):
    """The first step of :func:`_classify` up to ``loss.backward()``: the
    model and the loss. ``prepare(model)`` before the forward."""
    torch.manual_seed(0)
    model = _no_dropout(build()).to(dtype).to(device)
    model.train()
    if prepare is not None:
        prepare(model)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, 3, size, size, generator=g).to(dtype).to(device)
    y = torch.randint(0, classes, (n,), generator=g).to(device)
    loss = _loss(model(x), y)
    loss.backward()
    return model, loss


def first_step_grads(build, device, dtype=torch.float32, size=64, n=2, classes=10):
    """The first step of :func:`_classify` up to the gradients: the loss
    (auxiliary heads' included, as there) and each parameter's gradient
    (float64 CPU tensors). Where a loop's rounding is amplified over its steps
    (DLA34: eager float32 itself ends 0.46 from float64), the first step's
    gradients are what can be held to float64."""
    model, loss = _first_step(build, device, dtype, size, n, classes)
    grads = {k: p.grad.detach() for k, p in model.named_parameters() if p.grad is not None}
    return float(loss.detach().cpu()), {k: v.cpu().double() for k, v in grads.items()}


_LAYERS = (nn.Conv2d, nn.BatchNorm2d, nn.Linear)


def layer_inputs(build, size=64, n=2, classes=10):
    """Eager float32's first step of :func:`first_step_grads`, layer by layer:
    ``(layers, record)``, the model's convolutions, batch norms and linear
    layers as initialised (``name -> module``) and ``name -> (input, output
    gradient)`` as eager's forward and backward handed them to each (a layer
    called more than once is left out). An output's gradient is taken before
    any in-place op after it (a tensor hook's gradient is its value's)."""
    layers: dict = {}
    seen: dict = {}

    def forward(name):
        def hook(module, args, out):
            seen.setdefault(name, []).append([args[0].detach().clone(), None])
            out.register_hook(lambda g: seen[name][-1].__setitem__(1, g.detach().clone()))
        return hook

    def prepare(model):
        for k, m in model.named_modules():
            if isinstance(m, _LAYERS):
                layers[k] = copy.deepcopy(m)
                m.register_forward_hook(forward(k))

    _first_step(build, torch.device("cpu"), torch.float32, size, n, classes, prepare)
    record = {k: tuple(v[0]) for k, v in seen.items() if len(v) == 1 and v[0][1] is not None}
    return {k: m for k, m in layers.items() if k in record}, record


def layer_steps(layers, record, device, dtype=torch.float32):
    """Each layer of :func:`layer_inputs` run alone from eager's input, its
    forward and its backward from eager's output gradient (batch norms in
    training): ``name -> {"out": ..., "input grad": ..., parameter name:
    gradient}`` (float64 CPU tensors). On the lazy device every layer is
    traced before any result is read: one program for all."""
    results = {}
    for name, layer in layers.items():
        m = copy.deepcopy(layer).to(dtype).to(device)
        m.train()
        x, go = (t.to(dtype).to(device) for t in record[name])
        x.requires_grad_()
        params = dict(m.named_parameters())
        y = m(x)
        grads = torch.autograd.grad(y, [x, *params.values()], go)
        results[name] = {"out": y.detach(), "input grad": grads[0], **dict(zip(params, grads[1:]))}
    return {k: {q: t.cpu().double() for q, t in v.items()} for k, v in results.items()}


def float64_spread(name, rel=1e-7):
    """Whether classification loop ``name`` is chaotic: the state distance
    (zoo_harness._state_diff) between its float64 eager run and one whose
    initial weights are each moved by ``rel`` (relative, float32's rounding
    size), with the moved run's losses. Where that is as large as eager
    float32's own distance from float64, four steps amplify any rounding (the
    ReLUs and batch norms of a tiny batch land on other sides) and no float32
    run, eager's or lazycore's, can be held to float64 over the loop."""
    from cases_hunt27 import _cpu_state
    from zoo_harness import _state_diff

    cpu = torch.device("cpu")
    _, ref = CASES[name](cpu, lambda: None, dtype=torch.float64)
    _Nudge.rel = rel
    try:
        losses, moved = CASES[name](cpu, lambda: None, dtype=torch.float64)
    finally:
        _Nudge.rel = 0.0
    return _state_diff(_cpu_state(moved), _cpu_state(ref)), [float(v) for v in losses]


def contiguous_backward():
    """A dispatch mode giving every aten ``*backward*`` kernel contiguous
    tensors (it is active in the autograd engine's CPU thread too), counting
    the calls that had a strided one in ``.strided``: eager's answer where no
    kernel depends on its gradient's strides. It finds the batch norm case of
    tests/torch/test_batch_norm_transposed_gradient.py (its float64 bias
    gradient's first channel -0.198 plain, -0.785 under the mode: the one a
    ``.contiguous()`` hook gives)."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_map

    class ContiguousBackward(TorchDispatchMode):
        strided: dict = {}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if "backward" in func.__name__:
                if any(torch.is_tensor(a) and not a.is_contiguous() for a in args):
                    self.strided[func.__name__] = self.strided.get(func.__name__, 0) + 1
                args = tree_map(lambda a: a.contiguous() if torch.is_tensor(a) else a, args)
            return func(*args, **(kwargs or {}))

    return ContiguousBackward()


def float64_strides(name):
    """Whether eager's float64 referee of loop ``name`` depends on its
    gradients' strides: the state distance between its plain float64 run and
    one under :func:`contiguous_backward`, and the kernels that had strided
    inputs (name -> calls)."""
    from cases_hunt27 import _cpu_state
    from zoo_harness import _state_diff

    cpu = torch.device("cpu")
    _, plain = CASES[name](cpu, lambda: None, dtype=torch.float64)
    mode = contiguous_backward()
    with mode:
        _, contiguous = CASES[name](cpu, lambda: None, dtype=torch.float64)
    return _state_diff(_cpu_state(contiguous), _cpu_state(plain)), dict(mode.strided)


# --- the driver -------------------------------------------------------------------------------


def compare(name, referee=False, elements=False):
    """Run loop ``name`` on eager CPU and on the lazy device as hunt 27's
    ``compare`` does: a cases_hunt27.Outcome, with the two runs' final states
    (CPU tensors) as ``lazy_state`` and ``eager_state``; ``elements``: with
    zoo_harness.referee's findings as ``refereed``."""
    import cases_hunt27

    return cases_hunt27.compare(name, referee, cases=CASES, elements=elements)


if __name__ == "__main__":  # python tests/consumers/cases_hunt30v.py [names...]: a table
    import time
    import traceback

    from cases_hunt27 import Outcome

    referee = os.environ.get("REFEREE") == "1"
    for n in sys.argv[1:] or list(CASES):
        for m in ([n] if n in CASES else [k for k in CASES if n in k]):
            t = time.time()
            if os.environ.get("SPREAD") == "1":
                (d, worst), losses = float64_spread(m)
                print(f"{m:40s} float64 moved by 1e-7 ends {d:.1e} away ({worst}) losses {losses} "
                      f"{time.time() - t:.0f}s", flush=True)
                continue
            if os.environ.get("STRIDES") == "1":
                (d, worst), strided = float64_strides(m)
                print(f"{m:40s} float64 with contiguous backward inputs {d:.1e} from plain ({worst}); strided "
                      f"{strided} {time.time() - t:.0f}s", flush=True)
                continue
            try:
                elements = os.environ.get("ELEMENTS") == "1"
                out = compare(m, referee=referee, elements=elements)
                # the referee's two distances in full: the table's two digits can tie
                f64 = f" ({out.eager_f64!r} / {out.lazy_f64!r})" if referee else ""
                if elements:
                    f64 += f"; elements: {out.refereed.moved()}; rest from eager {out.refereed.state_diff:.1e} " \
                           f"({out.refereed.state_worst}); gradients off {out.refereed.grad_bad}"
                print(out.line(), f"{time.time() - t:.0f}s{f64}", flush=True)
            except Exception as e:  # noqa: BLE001 (a table row)
                print(Outcome(m, [], [], 0, 0, "", 0, {}, [], [], error=f"{type(e).__name__}: {e}"[:300]).line(),
                      flush=True)
                traceback.print_exc(limit=-3)
