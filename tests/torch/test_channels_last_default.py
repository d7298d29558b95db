"""Channels-last programs by default on the CPU (issue 40), and batch norm's forward the
same bits in them as in the N, C, H, W ones.

A barrier on a CPU device compiles with ``lazy-channels-last``
(``passes.pipeline.default_for``) unless ``lazycore.config`` names a pipeline;
``configure(pipeline=DEFAULT_PIPELINE)`` turns it off.

Batch norm's statistics are float64 sums on the CPU (``moments.accumulator``), one
rounding of a nearly exact sum in whatever order XLA adds. With float32 sums the
channels-last program's batch norm moved whole channels by an ulp against the N, C, H, W
one's (1459 of 147456 outputs below), which tests/zoo's resnet18 grew to 4.3e-4 between
the two trainings (2.0e-6 with float64 sums).
"""

import pytest
import torch
import torch.nn.functional as F

import lazycore
from lazycore import config
from lazycore.frontends.torch.ops import moments
from lazycore.observe import testing
from lazycore.passes import pipeline as pipelines
from lazycore.passes.pipeline import CHANNELS_LAST_PIPELINE, DEFAULT_PIPELINE


def _conv_bn(dev, pipeline):
    """conv, batch norm in training, ReLU: the output, saved statistics and running ones."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 16, 24, 24, generator=g)
    w = torch.randn(32, 16, 3, 3, generator=g) * 0.1
    gamma, beta = torch.rand(32, generator=g) + 0.5, torch.randn(32, generator=g)
    with config.override(pipeline=pipeline):
        rm, rv = torch.zeros(32, device=dev), torch.ones(32, device=dev)
        y = F.conv2d(x.to(dev), w.to(dev), padding=1)
        out, mean, invstd = torch.ops.aten.native_batch_norm(y, gamma.to(dev), beta.to(dev), rm, rv, True, 0.1, 1e-5)
        out = F.relu(out)
        lazycore.mark_step()
    return [t.cpu() for t in (out, mean, invstd, rm, rv)]


def test_batch_norm_after_a_convolution_is_the_same_bits_in_either_layout(dev, clean_runtime):
    plain, last = _conv_bn(dev, DEFAULT_PIPELINE), _conv_bn(dev, CHANNELS_LAST_PIPELINE)
    for name, a, b in zip(("output", "mean", "invstd", "running mean", "running var"), plain, last):
        assert torch.equal(a, b), (name, int((a != b).sum()), a.numel())


def test_float32_statistics_sum_in_float64_on_the_cpu_only():
    assert moments.accumulator("f32", "cpu") == "f64"
    assert moments.accumulator("f32", "gpu") == "f32"  # eager CUDA sums float32 in float32
    assert moments.accumulator("f32", "tpu") == "f32"


def test_a_float32_row_of_huge_values_has_eagers_statistics(dev):
    """Summed in float64, a row of 3e38s no longer overflows: eager's (0, 3e38)."""
    x = torch.full((4, 3), 3e38)
    want = torch.var_mean(x, dim=0)
    got = [t.cpu() for t in torch.var_mean(x.to(dev), dim=0)]
    for g, w in zip(got, want):
        assert torch.equal(g, w), (g, w)


def _transposes(text):
    return sum(1 for line in text.splitlines() if "stablehlo.transpose" in line and "=" in line)


def _conv_conv(dev, fresh=True):
    """Two convolutions and a ReLU: the transposes in its StableHLO (None: not compiled here,
    loaded from the disk cache, which ``fresh`` turns off)."""
    g = torch.Generator().manual_seed(0)
    x, w1, w2 = torch.randn(2, 3, 8, 8, generator=g), torch.randn(4, 3, 3, 3, generator=g), torch.randn(4, 4, 3, 3, generator=g)
    with testing.capture(fresh_cache=fresh) as cap:
        out = F.conv2d(F.relu(F.conv2d(x.to(dev), w1.to(dev), padding=1)), w2.to(dev), padding=1)
        lazycore.mark_step()
    torch.testing.assert_close(out.cpu(), F.conv2d(F.relu(F.conv2d(x, w1, padding=1)), w2, padding=1),
                               rtol=1e-4, atol=1e-5)
    return _transposes(cap.text(stage="stablehlo")) if cap.graphs else None


def test_a_cpu_barrier_runs_its_convolutions_channels_last_by_default(dev, clean_runtime):
    assert config.settings.pipeline is None
    assert pipelines.default_for("cpu") == pipelines.default_for(None) == CHANNELS_LAST_PIPELINE
    assert _conv_conv(dev) == 4  # the input, the two kernels and the result; nothing between


def test_the_default_pipeline_turns_it_off(dev, clean_runtime):
    with config.override(pipeline=DEFAULT_PIPELINE):
        assert _conv_conv(dev) == 0  # XLA transposes around each convolution itself


@pytest.mark.parametrize("platform", ["gpu", "tpu"])
def test_other_platforms_keep_the_plain_pipeline(platform):
    assert pipelines.default_for(platform) == DEFAULT_PIPELINE


def test_a_dump_names_the_pipeline_the_barrier_ran(dev, clean_runtime, tmp_path):
    """info.txt says the platform's default (channels-last on the CPU), not the plain one."""
    import os

    for configured, want in ((None, CHANNELS_LAST_PIPELINE), (DEFAULT_PIPELINE, DEFAULT_PIPELINE)):
        root = tmp_path / str(configured is None)
        with config.override(dump_dir=str(root), pipeline=configured):
            _conv_conv(dev)
        (folder,) = os.listdir(root)
        lines = (root / folder / "info.txt").read_text().splitlines()
        assert f"pipeline: {want}" in lines, lines


def test_a_program_compiled_in_one_layout_is_never_found_for_the_other(dev, clean_runtime, tmp_path):
    """The default pipeline resolves per device (in the key), the configured one is in the key:
    in memory and on disk, the plain and the channels-last program are two programs."""
    from lazycore.observe import metrics

    def run(pipeline):
        lazycore.cache.clear()  # the in-memory cache: only the disk can hold it now
        metrics.reset()
        with config.override(pipeline=pipeline):
            transposes = _conv_conv(dev, fresh=False)
        c = metrics.counters()
        return transposes, c.get("compiles", 0), c.get("disk_cache_hits", 0)

    with config.override(cache_dir=tmp_path, cache_max_bytes=1 << 30):
        assert run(None) == (4, 1, 0)  # channels-last, compiled
        assert run(DEFAULT_PIPELINE) == (0, 1, 0)  # the plain program is compiled, not the other loaded
        assert run(None) == (None, 0, 1)  # each found again on disk
        assert run(DEFAULT_PIPELINE) == (None, 0, 1)
        assert run(CHANNELS_LAST_PIPELINE)[:2] == (4, 1)  # named, it is keyed by its name: compiled once more
