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
"""

import os
import sys

os.environ.setdefault("LAZYCORE_CACHE_DIR", "off")
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


if __name__ == "__main__":
    by_name = {**zm.BY_NAME, **{s.name: s for s in zm.ILL_CONDITIONED + MORE}}
    for name in sys.argv[1:] or list(by_name):
        table(by_name[name])
