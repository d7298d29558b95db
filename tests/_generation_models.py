"""The tiny GPT-2 and left-padded prompts the generation tests share."""

import pytest
import torch

import lazycore
from _bits import BY_HAND

VOCAB = 128
LENGTHS = (3, 5, 8, 10, 12, 13, 15, 16)  # left-padded to 16
ONE_AND_MANY = [pytest.param((8,), id="1-prompt", marks=BY_HAND), pytest.param(LENGTHS, id="8-prompts")]
"""One prompt and a left-padded batch: CI runs the batch, whose decoding is one prompt's
with a padded mask besides."""


def programs() -> int:
    c = lazycore.metrics.counters()
    return c["compiles"] + c.get("stack_compiles", 0) + c.get("disk_cache_hits", 0)


def gpt2():
    import transformers

    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=VOCAB, n_positions=128, bos_token_id=0)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    model.generation_config.eos_token_id = None  # random weights: an end token would cut calls short
    model.generation_config.pad_token_id = 0
    return model


def prompts(lengths):
    g = torch.Generator().manual_seed(1)
    width = max(lengths)
    ids = torch.zeros(len(lengths), width, dtype=torch.long)
    mask = torch.zeros(len(lengths), width, dtype=torch.long)
    for i, n in enumerate(lengths):
        ids[i, width - n:] = torch.randint(1, VOCAB, (n,), generator=g)
        mask[i, width - n:] = 1
    return ids, mask
