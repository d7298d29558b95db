"""``nn.TransformerEncoder``'s padded positions as eager leaves them: zeros, where its fast path runs.

In eval mode, with no gradient to record, given a ``src_key_padding_mask``,
eager's ``TransformerEncoder.forward`` takes its sparsity fast path
(``why_not_sparsity_fast_path`` lists the conditions): the layers run on a
nested tensor of each row's real positions, padded back with zeros
(``to_padded_tensor(0.0)``) before the final norm. The lazy device is not
among the fast path's devices, so torch runs the layers on the padded tensor
with the mask, and the padded positions hold what the layers computed there.
The real positions agree. Here the same layers run, and then the positions
eager's fast path pads with zeros are zeros.

Whether the fast path runs depends on the mask's values too: with
``mask_check`` (the default) only where every row's real positions come
first, which eager reads from the mask. A read would cut the step, so that
condition is a device value and the zeros are selected with it. Where
``mask_check`` is off, eager's nested rows are each row's first ``count``
positions (``count`` its real positions), whichever the mask marks; so are
the layers' real positions here.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.modules import transformer as _transformer

from .tensor import Tensor

_ORIGINAL = torch.nn.TransformerEncoder.forward


def _forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
    if type(src) is not Tensor or src_key_padding_mask is None or mask is not None:
        return _ORIGINAL(self, src, mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=is_causal)
    padding = F._canonical_mask(mask=src_key_padding_mask, mask_name="src_key_padding_mask",
                                other_type=None, other_name="mask", target_type=src.dtype)
    if not _eager_pads(self, src, padding):
        return _ORIGINAL(self, src, mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=is_causal)
    real = padding.logical_not()
    count = real.sum(1, keepdim=True)
    position = torch.arange(real.shape[1], device=real.device)
    beyond = position >= count  # (what to_padded_tensor fills: past each row's count of real positions)
    if getattr(self, "mask_check", True):
        zeros = beyond & (real == (position < count)).all()  # (eager's fast path: left-aligned rows only)
    else:
        zeros = padding = beyond  # (eager's nested rows: each row's first positions, whatever the mask)
    seq_len = _transformer._get_seq_len(src, self.layers[0].self_attn.batch_first)
    is_causal = _transformer._detect_is_causal_mask(None, is_causal, seq_len)
    output = src
    for layer in self.layers:
        output = layer(output, src_mask=None, is_causal=is_causal, src_key_padding_mask=padding)
    output = output.masked_fill(zeros.unsqueeze(-1), 0.0)
    if self.norm is not None:
        output = self.norm(output)
    return output


def _eager_pads(self, src, padding) -> bool:
    """Eager's CPU would take the sparsity fast path for these arguments
    (``TransformerEncoder.forward``'s conditions but the mask's alignment and
    the device), given ``padding``, the canonical key padding mask."""
    if not torch.backends.mha.get_fastpath_enabled() or not getattr(self, "use_nested_tensor", False):
        return False
    first = self.layers[0]
    if first.training or src.dim() != 3 or src.is_nested or torch.is_autocast_enabled():
        return False
    if padding.dim() != 2 or tuple(padding.shape) != tuple(src.shape[:2]) or padding.device != src.device:
        return False  # (eager's alignment check refuses it: torch's forward raises its error)
    if getattr(self, "mask_check", True) and torch.compiler.is_compiling():
        return False
    attn = first.self_attn
    tensors = (src, attn.in_proj_weight, attn.in_proj_bias, attn.out_proj.weight, attn.out_proj.bias,
               first.norm1.weight, first.norm1.bias, first.norm2.weight, first.norm2.bias,
               first.linear1.weight, first.linear1.bias, first.linear2.weight, first.linear2.bias)
    if torch.overrides.has_torch_function(tensors):
        return False
    return not (torch.is_grad_enabled() and any(t.requires_grad for t in tensors))


def install() -> None:
    if torch.nn.TransformerEncoder.forward is not _forward:
        torch.nn.TransformerEncoder.forward = _forward
