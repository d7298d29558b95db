"""A differential fuzzer of whole training programs in the suite (tests/fuzz_training.py):
seeded random small models from torch.nn layers, random torch.optim optimizers with
boundary hyperparameters (lr 0, weight decay 0, betas 0 and near 1, eps tiny or 0), schedules,
clipping, zero/NaN/Inf gradients, parameters without gradients and sparse Embeddings, several
steps traced or captured, compared with eager torch on the CPU after every step.

CI runs a small budget (each program compiles a few XLA programs: a few seconds each);
``python -m tests.fuzz_training 200`` runs a large one by hand, as does
``LAZYCORE_FUZZ_TRAINING=200`` here. Programs known to differ are listed with the reason; they
are strict xfails, so fixing one fails its entry until it is removed."""

import os
import warnings

import pytest

import fuzz_training

BUDGET = int(os.environ.get("LAZYCORE_FUZZ_TRAINING", "0"))
CI_SEEDS = (0, 4, 5, 7, 30)
"""Without a budget: five programs (about 25 s of CPU), traced and captured: Adamax with eps 0
and a gradient zeroed then -Inf, NAdam at lr 0 captured under a warm-up from lr 0, Rprop
captured with poisoned gradients, BatchNorm, LayerNorm, Conv1d, residuals, Embedding, a
sparse Embedding (its COO gradient arrives dense, a counted fallback, and trains as eager's), and seed 30: Adam at lr 0 with eps 0 and betas (0, 0),
which found the capturable-Adam NaN (parameters NaN after the first step, eager's finite) on
the optimizer code before commit 2cb4ee3."""

KNOWN: dict[int, str] = {}
"""Seeds known to differ, with the reason (none: the sparse Embeddings, refused until 0ae6e05,
train as eager's; seeds 4, 6, 8, 13, 27, 31, 35 and 42 checked by hand)."""


def _cases():
    for seed in range(BUDGET) if BUDGET else CI_SEEDS:
        reason = KNOWN.get(seed)
        marks = [pytest.mark.xfail(reason=reason, strict=True, raises=fuzz_training.Mismatch)] if reason else []
        yield pytest.param(seed, marks=marks, id=f"seed-{seed}")


def test_the_generator_reaches_the_boundaries():
    """The draws cover what the fuzzer is for: both modes, sparse Embeddings, every optimizer,
    lr 0, eps 0 and 1e-30, betas 0 and 0.9999, poisoned gradients (a draw, not a run)."""
    cases = [fuzz_training.Case(s) for s in range(300)]
    assert {c.mode for c in cases} == {"traced", "captured"}
    assert any(c.sparse for c in cases)
    assert {c.optimizer for c in cases} == set(fuzz_training.OPTIMIZERS)
    assert any(c.hyper.get("lr") == 0.0 for c in cases)
    assert any(c.hyper.get("eps") == 0.0 for c in cases) and any(c.hyper.get("eps") == 1e-30 for c in cases)
    assert any(c.hyper.get("betas", (1, 1))[0] == 0.0 for c in cases)
    assert any(c.hyper.get("betas", (0, 0))[0] == 0.9999 for c in cases)
    assert {k for c in cases for _, k in c.poison} == {"zero", "nan", "inf", "neg_inf"}
    assert {c.schedule for c in cases} == set(fuzz_training.SCHEDULES)
    assert {k for c in cases for k, *_ in c.blocks} == {"linear", "layernorm", "batchnorm", "dropout", "act",
                                                         "conv", "residual"}


@pytest.mark.parametrize("seed", list(_cases()))
def test_a_random_training_program_behaves_as_eager(seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fuzz_training.run(seed)
