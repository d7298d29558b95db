"""Per step, how far eager float32 and lazycore float32 end from the float64
answer (issue 39), by hand:

    .venv/bin/python tests/zoo/float64_table.py [name ...]

Each model (a zoo spec, or one of ``zoo_models.ILL_CONDITIONED``) trains three
times from one seeded init on the same batches with its library's optimizer
and schedule: eager float32, eager float64 and lazycore float32. After every
step the table gives the largest parameter/buffer difference of each pair
(``zoo_harness._state_diff``: relative where the reference is over 1) and
where it is, and the losses' relative differences. Where eager float32 is
itself far from float64 (batch norm over few numbers: a nearly constant
channel's rounding divided by ``sqrt(eps)``), lazycore is judged by its own
distance from float64 (the zoo's parameter test), not by eager's answer.

Besides the zoo's models, :data:`MORE` holds torchvision's EfficientNet-B0
and DeepLabV3 (MobileNetV3-large backbone, its ASPP), dropout and stochastic
depth off: their draws are the device's own, not eager's, so with them on the
table would measure the draws, not the rounding.

Models whose batches and losses are not a zoo spec's (torchvision's Faster
R-CNN: lists of images and target dicts, a dict of losses; DeepLabV3's
per-pixel logits) are :class:`Case` s, trained by :func:`run_case` with SGD
(momentum 0.9) and the global generator seeded the same before each run (Faster
R-CNN's samplers draw ``randperm`` from it); :func:`case_table` gives their
table and :func:`case_distances` the figures tests/consumers/test_vision_float64.py
holds lazycore to.
"""

import dataclasses
import os
import sys
from typing import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import zoo_harness as zh  # noqa: E402
import zoo_models as zm  # noqa: E402


def _no_dropout(model):
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    return model


class _Segmentation(torch.nn.Module):
    """A segmentation model's ``["out"]`` (per-pixel logits), so the zoo's
    cross-entropy step trains it on per-pixel labels."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def _efficientnet_b0():
    import torchvision

    return torchvision.models.efficientnet_b0(weights=None, num_classes=zm.CLASSES, dropout=0.0,
                                              stochastic_depth_prob=0.0)


def _deeplabv3():
    from torchvision.models.segmentation import deeplabv3_mobilenet_v3_large

    return _Segmentation(_no_dropout(deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None,
                                                                  num_classes=3)))


def _pixels(g):
    """4 images of 64x64 (the zoo's batch for batch norm) with per-pixel labels of 3 classes."""
    return {"pixel_values": torch.randn(4, 3, 64, 64, generator=g),
            "labels": torch.randint(0, 3, (4, 64, 64), generator=g)}


MORE = [
    zm.Spec("efficientnet_b0", "torchvision", _efficientnet_b0, zm._images_for_bn),
    zm.Spec("deeplabv3_mobilenet_v3_large", "torchvision", _deeplabv3, _pixels),
]


def run(spec, batches, mode: str):
    """Losses and the state dict after each step: ``mode`` eager, f64 or lazy."""
    torch.manual_seed(0)
    model = spec.build().train()
    if mode == "f64":
        model = model.double()
        batches = [{k: v.double() if v.is_floating_point() else v for k, v in b.items()} for b in batches]
    if mode == "lazy":
        import lazycore.torch as ltorch

        model = model.to(ltorch.device())
        batches = [{k: v.to(ltorch.device()) for k, v in b.items()} for b in batches]
    opt, sched, clip = zh._optimizer(spec, model, len(batches))
    losses, states = [], []
    for b in batches:
        loss = zh._step(spec, model, opt, sched, clip, b)
        if mode == "lazy":
            ltorch.mark_step(wait=True)
        losses.append(float(loss.cpu()))
        states.append({k: v.detach().cpu().clone() for k, v in model.state_dict().items()})
    return losses, states


def table(spec, steps: int = 4) -> None:
    g = torch.Generator().manual_seed(1)
    batches = [spec.batch(g) for _ in range(steps)]
    (e, es), (f, fs), (lz, ls) = (run(spec, batches, m) for m in ("eager", "f64", "lazy"))
    print(f"## {spec.name}")
    print("| step | eager32 - f64 | lazy32 - f64 | lazy32 - eager32 | loss: eager32/f64, lazy32/f64, lazy32/eager32 |")
    print("|---|---|---|---|---|")
    for i in range(steps):
        cells = [zh._state_diff(a, b) for a, b in ((es[i], fs[i]), (ls[i], fs[i]), (ls[i], es[i]))]
        losses = (zh._rel(e[i], f[i]), zh._rel(lz[i], f[i]), zh._rel(lz[i], e[i]))
        print(f"| {i + 1} | " + " | ".join(f"{d:.2e} ({w})" for d, w in cells) + " | "
              + ", ".join(f"{x:.1e}" for x in losses) + " |", flush=True)


@dataclasses.dataclass
class Case:
    name: str
    build: Callable[[], torch.nn.Module]
    batch: Callable[[int], object]  # step -> its batch: tensors in lists, tuples and dicts
    loss: Callable[[torch.nn.Module, object], torch.Tensor]
    lr: float
    steps: int = 4


def _convert(x, f):
    if isinstance(x, torch.Tensor):
        return f(x)
    if isinstance(x, dict):
        return {k: _convert(v, f) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_convert(v, f) for v in x)
    return x


def run_case(case, mode: str):
    """``(losses, state dicts, counts)`` after each step of ``case`` trained
    ``mode`` (eager, f64 or lazy); ``counts``, per lazy step (empty for the
    others): ``(compiles, programs run, fallbacks)``."""
    torch.manual_seed(0)
    model = case.build().train()
    batches = [case.batch(i) for i in range(case.steps)]
    if mode == "f64":
        model = model.double()
        batches = _convert(batches, lambda t: t.double() if t.is_floating_point() else t)
    if mode == "lazy":
        import lazycore.torch as ltorch
        from lazycore.observe import metrics

        model = model.to(ltorch.device())
        batches = _convert(batches, lambda t: t.to(ltorch.device()))
        ltorch.mark_step(wait=True)
    torch.manual_seed(1)  # the same draws in every run
    opt = torch.optim.SGD(model.parameters(), lr=case.lr, momentum=0.9)
    losses, states, counts = [], [], []

    def count():
        c = metrics.counters()
        return c.get("compiles", 0), c.get("executions", 0), c.get("fallbacks", 0)

    for b in batches:
        if mode == "lazy":
            c0 = count()
        loss = case.loss(model, b)
        loss.backward()
        opt.step()
        opt.zero_grad()
        if mode == "lazy":
            ltorch.mark_step(wait=True)
            counts.append(tuple(y - x for x, y in zip(c0, count())))
        losses.append(float(loss.detach().cpu()))
        states.append({k: v.detach().cpu().clone() for k, v in model.state_dict().items()})
    return losses, states, counts


def case_distances(case) -> dict:
    """Per step, each pair's distance: ``{"eager-f64": [(loss, state, where)], "lazy-f64": ...,
    "lazy-eager": ...}`` (loss: relative; state: :func:`zoo_harness._state_diff`), and the lazy
    run's ``"counts"`` per step (:func:`run_case`)."""
    runs = {m: run_case(case, m) for m in ("eager", "f64", "lazy")}
    out = {"counts": runs["lazy"][2]}
    for a, b in (("eager", "f64"), ("lazy", "f64"), ("lazy", "eager")):
        out[f"{a}-{b}"] = [(zh._rel(la, lb),) + zh._state_diff(sa, sb)
                           for la, lb, sa, sb in zip(runs[a][0], runs[b][0], runs[a][1], runs[b][1])]
    return out


def case_table(case) -> dict:
    d = case_distances(case)
    print(f"## {case.name} (per lazy step (compiles, programs, fallbacks): {d['counts']})")
    print("| step | state: eager32 - f64 | lazy32 - f64 | lazy32 - eager32 "
          "| loss: eager32 - f64, lazy32 - f64, lazy32 - eager32 |")
    print("|---|---|---|---|---|")
    pairs = ("eager-f64", "lazy-f64", "lazy-eager")
    for i in range(case.steps):
        print(f"| {i + 1} | " + " | ".join(f"{d[p][i][1]:.2e} ({d[p][i][2]})" for p in pairs) + " | "
              + ", ".join(f"{d[p][i][0]:.1e}" for p in pairs) + " |", flush=True)
    return d


def _detection_batch(i):
    """2 images of 64x64, 2 boxes each (Faster R-CNN's training input)."""
    g = torch.Generator().manual_seed(i)
    ims = [torch.rand(3, 64, 64, generator=g) for _ in range(2)]
    targets = []
    for _ in range(2):
        xy = torch.rand(2, 2, generator=g) * 30
        wh = torch.rand(2, 2, generator=g) * 25 + 8
        targets.append({"boxes": torch.cat([xy, xy + wh], 1), "labels": torch.randint(1, 3, (2,), generator=g)})
    return ims, targets


def _fasterrcnn():
    from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_fpn

    return fasterrcnn_mobilenet_v3_large_fpn(weights=None, weights_backbone=None, num_classes=3, min_size=64,
                                             max_size=64)


def _detection_loss(model, b):
    d = model(*b)
    return sum(d[k] for k in sorted(d))


def _segmentation_batch(i):
    g = torch.Generator().manual_seed(i)
    return torch.randn(2, 3, 64, 64, generator=g), torch.randint(0, 3, (2, 64, 64), generator=g)


def _segmentation_loss(model, b):
    return torch.nn.functional.cross_entropy(model(b[0])["out"], b[1])


def _deeplabv3_aux_off():
    from torchvision.models.segmentation import deeplabv3_mobilenet_v3_large

    return _no_dropout(deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=3,
                                                    aux_loss=False))


CASES = [
    Case("fasterrcnn_mobilenet_v3_large_fpn", _fasterrcnn, _detection_batch, _detection_loss, lr=0.005),
    Case("deeplabv3_mobilenet_v3_large-sgd", _deeplabv3_aux_off, _segmentation_batch, _segmentation_loss,
         lr=0.01),
]


if __name__ == "__main__":
    os.environ.setdefault("LAZYCORE_CACHE_DIR", "off")  # (read when lazycore is first imported, in a run)
    by_name = {**zm.BY_NAME, **{s.name: s for s in zm.ILL_CONDITIONED + MORE}}
    cases = {c.name: c for c in CASES}
    for name in sys.argv[1:] or list(by_name) + list(cases):
        if name in cases:
            case_table(cases[name])
        else:
            table(by_name[name])
