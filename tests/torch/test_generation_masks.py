"""transformers' ``fast_all(padding_mask)`` during generate() on the lazy
device (lazycore.frontends.torch.generation): a mask known to hold a zero
answers False with no program; anything else is read, so every answer is
eager's. The state generate()'s wrapper keeps is set up by hand here, with
the masks generate() makes: the prompts' mask uploaded, grown by torch.cat
with ones, converted to bool."""

import pytest
import torch

import lazycore

generation = pytest.importorskip("lazycore.frontends.torch.generation")
transformers = pytest.importorskip("transformers")
from transformers import masking_utils  # noqa: E402

pytestmark = pytest.mark.usefixtures("clean_runtime")


@pytest.fixture
def generating():
    g = generation._GENERATING
    g.depth, g.zeros, g.mask = g.depth + 1, {}, None
    generation._patch_masks()
    yield
    g.depth, g.zeros, g.mask = g.depth - 1, None, None


def _programs() -> int:
    """Reads of values: programs compiled and run, and reads answered from an
    upload's host copy (lazycore.runtime.hostreads: the uploaded mask's)."""
    c = lazycore.metrics.counters()
    return c["compiles"] + c["executions"] + c["host_reads"]


def _grown(mask, n):
    """The bool padding masks of ``n`` decoding steps, as generate() and transformers' mask code make them."""
    out = []
    for _ in range(n):
        mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=-1)
        generation._learn_zeros(mask)  # _update_model_kwargs_for_generation's
        lazycore.torch.mark_step()  # the stopping criteria's read runs the step
        generation._learn_zeros(mask)  # prepare_inputs_for_generation's
        out.append(mask.to(dtype=torch.bool))
    return out


def test_a_padded_batch_reads_nothing(dev, generating):
    host = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])
    mask = host.to(dev)
    generation._learn_zeros(mask)
    masks = _grown(mask, 3)
    before = _programs()
    answers = [masking_utils.fast_all(m) for m in masks]
    assert _programs() == before
    want = [masking_utils.fast_all(torch.cat([host, torch.ones(2, k + 1, dtype=torch.long)], -1).bool())
            for k in range(3)]
    assert [bool(a) for a in answers] == [bool(w) for w in want] == [False] * 3


def test_a_mask_of_ones_is_read(dev, generating):
    mask = torch.ones(2, 4, dtype=torch.long).to(dev)
    generation._learn_zeros(mask)
    masks = _grown(mask, 2)
    assert [bool(masking_utils.fast_all(m)) for m in masks] == [True, True]


def test_a_mask_written_in_place_is_read(dev, generating):
    mask = torch.tensor([[0, 1, 1], [1, 1, 1]]).to(dev)
    generation._learn_zeros(mask)
    grown = torch.cat([mask, mask.new_ones((2, 1))], dim=-1)
    generation._learn_zeros(grown)
    grown.fill_(1)  # no zero left: what was learned of it no longer holds
    grown2 = torch.cat([grown, grown.new_ones((2, 1))], dim=-1)
    generation._learn_zeros(grown2)
    assert bool(masking_utils.fast_all(grown2.to(dtype=torch.bool))) is True


def test_a_slice_is_read(dev, generating):
    mask = torch.tensor([[0, 1, 1], [1, 1, 1]]).to(dev)
    generation._learn_zeros(mask)
    # the zero is outside the slice: nothing is claimed of a view
    assert bool(masking_utils.fast_all(mask.to(dtype=torch.bool)[:, 1:])) is True
    assert bool(masking_utils.fast_all(mask.to(dtype=torch.bool))) is False


def test_outside_generate_nothing_changes(dev):
    generation._patch_masks()
    mask = torch.tensor([[0, 1]]).to(dev)
    before = _programs()
    assert bool(masking_utils.fast_all(mask.to(dtype=torch.bool))) is False
    assert _programs() > before  # read, as always


def test_a_padded_mask_cut_back_reads_nothing(dev, generating):
    # a static cache's prompt: the mask padded to the cache's length, then its first positions
    mask = torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]]).to(dev)
    generation._learn_zeros(mask)
    padded = torch.nn.functional.pad(mask.to(dtype=torch.bool), (0, 3))  # pending, as in the mask code
    before = _programs()
    assert masking_utils.fast_all(padded[:, :4]) is False
    assert masking_utils.fast_all(padded[:, :5]) is False
    assert _programs() == before
    # the padding alone, or a cut that drops the zero: read
    assert bool(masking_utils.fast_all(~padded[:, 4:])) is True
    assert bool(masking_utils.fast_all(padded[:, 1:4])) is True  # column 0, the zero, cut away
    assert _programs() > before
