"""The model zoo (issue 39): architectures users train today, from tiny random
configs, trained a few steps on the lazy device against an eager CPU copy with
the same init and data, each with its library's usual optimizer and schedule.

Each model trains once per module (:func:`result`), and the tests read that
run: losses within 1e-4 relative at every step, parameters and buffers within
1e-4 after training (relative where the eager value is over 1: running variances;
for both, where eager float32 itself ends further than that from the float64 answer, as
batch-norm models do on some CPUs, no further from it than eager), tied weights still one Parameter, no fallback, no compile
after the warm-up steps, at most one program per step. Greedy ``generate()``
gives eager's tokens.

CI runs the models marked ``ci`` in tests/zoo/zoo_models.py (GPT-2 and ResNet-18:
Llama and a timm ViT train in CI in other files, as that file says);
``LAZYCORE_TEST_FULL=1`` (the suite's by-hand flag) runs every model, and
``.venv/bin/python tests/zoo/table.py`` prints the table by hand (as the
differential fuzzer's large budget runs by hand)."""

import os
import sys

import pytest
import torch

import zoo_harness
import zoo_models

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _bits import FULL, MODEL_RUN, cpu_has_avx512, cpu_vendor  # noqa: E402

NAMES = [s.name for s in zoo_models.SPECS if FULL or s.ci]
GENERATE = [s.name for s in zoo_models.SPECS if s.generate]

KNOWN: dict = {}
"""(model, test) -> reason: the failures known today, strict xfails (fixing
one fails its entry until it is removed)."""

if cpu_vendor() == "AuthenticAMD" and cpu_has_avx512():
    KNOWN[("resnet18", "parameters")] = (
        "on an AMD EPYC with AVX-512 (2026-12-02) lazycore's ResNet-18 ends 4.4e-4 from the float64 run at "
        "conv1.weight after training while eager ends 2.1e-6 from it (an Intel CPU: within 1e-4 of eager; an AMD "
        "Zen 3, AVX2: eager itself 5e-3 from float64, lazycore closer); the same at d435edb, so not a change of that "
        "day; cause not found (a single convolution alone is as close to float64 as eager here)")

_RESULTS: dict = {}


def result(name):
    if name not in _RESULTS:
        try:
            _RESULTS[name] = zoo_harness.train(zoo_models.BY_NAME[name])
        except Exception as e:  # every test of the model reports it
            _RESULTS[name] = e
    r = _RESULTS[name]
    if isinstance(r, Exception):
        raise r
    return r


def _params(test):
    out = []
    for name in NAMES:
        reason = KNOWN.get((name, test))
        marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
        out.append(pytest.param(name, marks=marks, id=name))
    return out


@pytest.mark.parametrize("name", _params("losses"))
def test_losses_match_eager(name):
    result(name).check_losses(zoo_models.BY_NAME[name])


@pytest.mark.parametrize("name", _params("parameters"))
def test_parameters_and_buffers_match_eager_after_training(name):
    result(name).check_parameters(zoo_models.BY_NAME[name])


@pytest.mark.parametrize("name", _params("tied"))
def test_tied_weights_stay_one_parameter(name):
    r = result(name)
    assert all(lazy and eager for lazy, eager in r.tied.values()), r.tied


@pytest.mark.parametrize("name", _params("fallbacks"))
def test_no_fallback(name):
    r = result(name)
    assert r.fallbacks == 0, r.fallback_ops


@pytest.mark.parametrize("name", _params("compiles"))
def test_no_compile_after_the_warm_up(name):
    r = result(name)
    assert r.compiles_after_warmup == 0, r.compiles


@pytest.mark.parametrize("name", _params("programs"))
def test_at_most_one_program_per_step_after_the_warm_up(name):
    r = result(name)
    assert r.programs_after_warmup <= 1, r.programs


# CI: test_generation.py::test_greedy_one_prompt_eager_tokens_few_programs (GPT-2), test_encoder_decoder[static] (T5)
@MODEL_RUN
@pytest.mark.parametrize("name", GENERATE)
def test_greedy_generate_gives_eagers_tokens(name):
    got, want = zoo_harness.generate(zoo_models.BY_NAME[name])
    encoder_decoder = zoo_models.BY_NAME[name].batch is zoo_models._seq2seq
    made = want.shape[1] - (0 if encoder_decoder else 6)  # a decoder-only model returns the prompt too
    assert made >= 4, want
    assert torch.equal(got, want), (got, want)
