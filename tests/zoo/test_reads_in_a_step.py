"""Reads inside a transformers step (issue 39): with an ``attention_mask``,
transformers' SDPA mask path reads the mask (does it pad?) to pick SDPA's
``is_causal``, a data-dependent read: the mask's own small graph runs as a
program of its own (it cuts nothing), and LAZYCORE_DEBUG names the read's
line and function; the documented ways
around it (no mask for unpadded batches, ``attn_implementation="eager"``
for padded decoder batches) trace a whole training step with no program."""

import pytest
import torch

import lazycore.torch as ltorch
from lazycore.ir.config import override
from lazycore.observe import debug, metrics

import zoo_models


def _llama(attn="sdpa"):
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=32, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                      num_key_value_heads=1, intermediate_size=64, attn_implementation=attn)
    return transformers.LlamaForCausalLM(config)


def _batch(dev, mask: bool):
    g = torch.Generator().manual_seed(0)
    b = zoo_models._padded(g)
    b = {k: v.clamp(max=31) for k, v in b.items()}  # a vocabulary of 32
    if not mask:
        b.pop("attention_mask")
        b["labels"] = b["input_ids"]
    return {k: v.to(dev) for k, v in b.items()}


def _programs_in_forward_and_backward(model, batch) -> int:
    ltorch.mark_step(wait=True)
    before = metrics.counters().get("executions", 0)
    loss = model(**batch).loss
    loss.backward()
    ran = metrics.counters().get("executions", 0) - before
    del loss
    model.zero_grad(set_to_none=True)
    return ran


def test_the_debug_line_names_transformers_read_of_the_mask(dev, capsys):
    # the mask is uploaded data: its read is computed from the upload's host
    # copy (lazycore.runtime.hostreads), not by a barrier, so the step's
    # pending work is not cut; the line names it
    model = _llama().to(dev)
    batch = _batch(dev, mask=True)
    ltorch.mark_step(wait=True)
    debug.reset()
    capsys.readouterr()
    with override(debug=1):
        loss = model(**batch).loss
    debug.reset()
    del loss
    err = capsys.readouterr().err.splitlines()
    assert not [ln for ln in err if ": implicit barrier: " in ln], err
    lines = [ln for ln in err if "read on the host: " in ln]
    assert lines, "the padded mask is read"
    assert all("masking_utils.py:" in ln and " in _ignore_causal_mask_sdpa " in ln for ln in lines), lines


@pytest.mark.parametrize("attn,mask", [("sdpa", False), ("eager", True)], ids=["sdpa-no-mask", "eager-padded"])
def test_the_ways_around_it_read_nothing(dev, attn, mask):
    model = _llama(attn).to(dev)
    assert _programs_in_forward_and_backward(model, _batch(dev, mask)) == 0


def test_sdpa_with_a_padded_mask_reads(dev):
    # the read the ways around avoid costs no program any more: the uploaded
    # mask's padding check is answered from its host copy (it was a program
    # of its own: tests/torch/test_upload_host_copies.py)
    model = _llama().to(dev)
    assert _programs_in_forward_and_backward(model, _batch(dev, True)) == 0
