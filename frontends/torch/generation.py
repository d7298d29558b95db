"""transformers' ``generate()`` on the lazy device: the growing sequence in buckets.

Greedy decoding grows three things by one position per token: the generated
ids (``torch.cat([input_ids, next_tokens[:, None]], -1)``), the attention mask,
and the default key-value cache (``DynamicLayer.update``: ``torch.cat`` along
dim -2). Each is a new input shape for the next token's program, so every
token compiled a program of its own.

When ``transformers.generation.utils`` is imported (before or after lazycore),
:func:`install` wraps ``GenerationMixin.prepare_inputs_for_generation``, which
every decoding step calls with the ids, the mask and the cache: for a decoding
step (one new position) whose tensors are on a lazy device, it marks their
sequence dimension dynamic (:func:`lazycore.torch.dynamic`). The barrier then
pads them to a bucket (:mod:`lazycore.runtime.buckets`): the append becomes a
``dynamic_update_slice`` at the valid length, ``input_ids[:, -1:]`` a
``dynamic_slice`` before it, attention's reductions are masked past it
(:mod:`lazycore.runtime.padding`), and the results stay padded into the next
token's program. Tokens within one bucket share a program. Nothing changes for
CPU or CUDA tensors, for the prefill, or where the padding rules refuse a
graph (it compiles at its own sizes, as before; ``LAZYCORE_DEBUG`` names the
op). ``LAZYCORE_BUCKETS=off`` turns it off with the other marks.

Three more wrappers keep one decoding program for every token, for lazy
tensors only: ``MaxLengthCriteria`` answers from the length as a program
parameter (its Python bool folded the last token's graph into another);
``StaticLayer.update`` and ``get_seq_length`` take the filled length, a CPU
tensor, as a parameter from the first token on (the scalar policy baked the
first token's); and ``_prepare_static_cache`` makes the static cache one
position longer, never filled and always masked (a cache of ``max_length - 1``
is as long as the last token's attention mask, which transformers then
leaves unpadded: a graph of its own).

Left-padded prompts: transformers' mask code asks ``fast_all(padding_mask)``
(all True?) in the prompt and at every decoding step, a read, so a program
of its own, cutting each token's work in two. The answer is known without
one: the prompts' mask (data the user uploaded) is read once as a copy, and
``_update_model_kwargs_for_generation`` grows it by ``torch.cat`` with ones,
which keeps its zeros. While ``generate()`` runs, ``fast_all`` of a mask
whose nodes show it made from one holding a zero (a convert, ``!= 0``, a
concatenation, a pad, a slice keeping all of it: the static cache's prompt
asks of its mask padded to the cache's length, cut back to the prompt's) is
False without a read; anything else is read as before.

Per-token time: traced per op, every decoding step ran the whole model's
Python (one op call per op per token) to make a graph the barrier found
compiled already, 8-17x eager's time per token. With a static cache the
step's shapes repeat, so the model's forward is handed to transformers as
its compiled decoding call (``_valid_auto_compile_criteria`` and
``get_compiled_call``, where it would ``torch.compile`` it) and captured
(:class:`_DecodingStep`): recorded at the first tokens, replayed after, in
later generate() calls too (the cache's tensors and filled length are its
arguments). Its inputs, made by transformers from the growing ids and mask,
are made early (:func:`_prepare_early`, between the new token and the
stopping criteria's read), so that read's program computes them and the
step reads device data whose nodes are the same every token. Of those,
only the new position of the ids and of the position ids are made there
(:func:`_prepare_deferred`); the 4-D attention mask is made in the replayed
call, from a 2-D mask padded to the cache's length that the step grows in
place (per-op mask code was 16% of a replayed token). The default
cache grows every token: no step of it repeats a shape, so none replays; a
call asking for it where nobody sees the cache (not passed in, not
returned) decodes with a static cache instead (:func:`_static_for_default`;
``settings.generation_static_cache``), with the same tokens.

Per-token bookkeeping: around the replayed step, transformers' ``_sample``
grew the mask, the positions and the ids by ``torch.cat``, took the argmax,
ran the stopping criteria and read ``unfinished_sequences.max() == 0``,
op by op (about twenty dispatches and a read per token, on growing shapes
the barrier padded to buckets: with the barrier, 1.25x eager's time per
token for a tiny GPT-2). Greedy decoding whose only criteria are max-length
ones and an end token, with no logits processor or streamer
(:func:`_greedy_fits`), makes every later token in one replay
(:func:`_greedy`, :attr:`_DecodingStep.greedy`; ``_GREEDY_LOOP``):
the step, its argmax written into the ids (made once as long as the
cache), the next step's inputs; one barrier per token, started without a
wait, no read. With an end token the step pads finished rows and flags
them as ``_sample`` does, the flags are read every ``_STOP_EVERY`` tokens
(``_sample`` read them every token), and the tokens made past the one
where ``_sample`` stops are cut on the host. In ``_sample`` itself a stop
check of max-length criteria alone is answered on the host (:func:`_wrap_stop_check`).

Beam search and beam sampling (``num_beams`` > 1) with the same criteria
and no logits processor but sampling's score-only warpers (:func:`_beams_fit`,
:data:`_SCORES_ONLY`) decode in :func:`_beams`: the prompt and the first
token as transformers' ``_beam_search`` makes them, then every later token
one replay of :attr:`_DecodingStep.beams` (the model's step, transformers'
beam bookkeeping with the token's place a device value, the cache reordered
in place). transformers read whether beam search had stopped every token (a
barrier with a wait); here it is a device flag that freezes the beams' state
once set, read every ``_STOP_EVERY`` tokens where an end token can set it
before ``max_length``. Beam sampling's draws are made in the step from the
lazy device's generator (its state a live input the capture reads and
updates): the draws transformers' loop makes on the lazy device (not
eager's: the lazy stream is its own). Encoder-decoder models (T5, BART)
decode the same way, the encoder's states and mask step arguments and the
cross-attention cache read as the first token filled it. Beam search that
does not fit stays in transformers' loop, its continuations written at the
length as a parameter (:func:`_wrap_top_k`).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.abc
import importlib.util
import sys
import threading
import weakref

import torch

from lazycore.runtime import buckets as _buckets
from lazycore.ir import events
from lazycore.ir.graph import Data
from lazycore.ir.config import settings

from lazycore.trace import core

from . import dtypes
from .capture import Captured
from .ops.random import GENERATORS
from .tensor import Tensor, from_host, lc_device, read, wrap

_TARGET = "transformers.generation.utils"
_CRITERIA = "transformers.generation.stopping_criteria"
_CACHES = "transformers.cache_utils"
_MASKS = "transformers.masking_utils"
_MODELS = "transformers.modeling_utils"
_installed = False
_BUCKET_TO_MAX_LENGTH = True
"""Pad the growing sequence to generate()'s ``max_length``, or to the longer
one a static cache transformers reuses was made for (:func:`_bucket_to_cache`):
one bucket for the whole generation, as a static cache; False: the usual buckets."""
_DEFER_INPUTS = True
"""A captured decoding step makes its attention mask in its call
(:func:`_prepare_deferred`); False: the step's inputs are made op by op
before it (same tokens and programs; for measuring one against the other)."""
_GREEDY_LOOP = True
"""Greedy decoding with a captured step makes each token in one replay
(:func:`_greedy`); False: transformers' ``_sample`` (0.4-0.6x eager's
thread time per token for the tiny GPT-2 on, 1.25x off)."""
_GROWING = ("attention_mask", "decoder_attention_mask", "position_ids", "decoder_position_ids", "token_type_ids",
            "mm_token_type_ids")


def _mark(t, dim: int) -> None:
    """Mark ``t``'s dimension ``dim`` dynamic where ``t`` is device data on a
    lazy device (a pending value or a view is left as it is: a padded
    result is marked already)."""
    if not isinstance(t, Tensor) or t._steps or t.dim() == 0:
        return
    node = read(t)._value.node
    d = dim % t.dim()
    if type(node) is Data and t.shape[d] >= 2:
        _buckets.mark(node, d)


_GROWN_LAYERS = ("DynamicLayer", "LinearAttentionAndFullAttentionLayer")
"""Cache layers whose keys and values grow by ``torch.cat`` each token
(``DynamicLayer.update``): the default's, and a hybrid model's attention
beside its Mamba or linear-attention state (Zamba2, Falcon-H1), whose
fixed-size states are left as they are. A static layer has a fixed size; a
sliding window drops its front."""


def _mark_cache(cache) -> None:
    for layer in getattr(cache, "layers", ()) or ():
        if type(layer).__name__ not in _GROWN_LAYERS:
            continue
        for name in ("keys", "values"):
            _mark(getattr(layer, name, None), -2)
    inner = getattr(cache, "self_attention_cache", None)  # an EncoderDecoderCache's decoder half
    if inner is not None:
        _mark_cache(inner)


def _wrap(prepare):
    @functools.wraps(prepare)
    def prepare_inputs_for_generation(self, input_ids, *args, next_sequence_length=None, **kwargs):
        g = _GENERATING
        early, g.early = g.early, None
        if isinstance(input_ids, Tensor) and not g.preparing:
            events.bump("generated_tokens")  # one model call, one new token
            if _GENERATING.depth:
                _learn_zeros(kwargs.get("attention_mask"))
        if next_sequence_length == 1 and isinstance(input_ids, Tensor) and not g.greedy:
            # (in _greedy's steps nothing grows: a mark would pad the recorded
            # steps' mask, not the replayed ones', two programs for one step)
            _mark(input_ids, -1)
            for key in _GROWING:  # grown with the ids by _update_model_kwargs_for_generation
                _mark(kwargs.get(key), -1)
            for key in ("past_key_values", "cache"):
                if kwargs.get(key) is not None:
                    _mark_cache(kwargs[key])
        if early is not None and _same_call(early, input_ids, args, next_sequence_length, kwargs):
            return dict(early[4])  # made by _prepare_early, run by the read since
        if next_sequence_length == 1 and isinstance(input_ids, Tensor) and input_ids._steps:
            input_ids = _last_of_view(input_ids)
        return prepare(self, input_ids, *args, next_sequence_length=next_sequence_length, **kwargs)

    prepare_inputs_for_generation.__lazycore_generation__ = True
    return prepare_inputs_for_generation


def _last_of_view(ids: Tensor) -> Tensor:
    """``ids[:, -1:]`` (all a decoding step's preparation reads of them) where
    ``ids`` is the first columns of a row-major base (beam search hands the
    model ``running_sequences[:, :, :cur_len]`` flattened), picked from the
    whole base at the length as a program parameter; else ``ids``. The
    view's slice baked the growing length into every token's graph (its
    limit, then the ``[:, -1:]`` start): a program per token."""
    if ids.dim() != 2 or ids.storage_offset() != 0 or ids.stride(1) != 1:
        return ids
    storage = ids._storage
    handle = storage.handle
    rows, width = ids.shape[0], ids.stride(0)
    if tuple(storage.strides) != _contiguous(handle.shape) or int(_numel(handle.shape)) != rows * width \
            or not 1 <= ids.shape[1] <= width:
        return ids
    full = wrap(handle).reshape(rows, width)
    place = _parameter(torch.tensor(ids.shape[1] - 1), ids.device).reshape(1)
    return torch.index_select(full, 1, place)


def _column_of_view(index):
    """``index`` where it is one column of a row-major base (beam search's
    ``running_beam_indices[..., cur_len - prompt]`` flattened), picked from
    the whole base at the column as a program parameter; else ``index``.
    The view's slice start, the growing length, is a number the scalar
    policy bakes until it has varied: a few programs of its own."""
    if not isinstance(index, Tensor) or not index._steps or index.dim() != 1:
        return index
    storage = index._storage
    handle = storage.handle
    rows, width, column = index.shape[0], index.stride(0), index.storage_offset()
    if tuple(storage.strides) != _contiguous(handle.shape) or int(_numel(handle.shape)) != rows * width \
            or not 0 <= column < width or width < 2:
        return index
    full = wrap(handle).reshape(rows, width)
    place = _parameter(torch.tensor(column), index.device).reshape(1)
    return torch.index_select(full, 1, place).reshape(rows)


def _contiguous(shape) -> tuple:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


class _Generating(threading.local):
    depth = 0
    """generate() calls in progress on this thread."""
    zeros = None
    """Nodes whose value is known to hold a zero without a read (a dict used
    as an identity set, kept for the call: the prompt's mask read once as
    data, then the masks made from it)."""
    mask = None
    """The last attention mask :func:`_learn_zeros` saw, its version and whether it holds a zero."""
    decoder = None
    """The :class:`_DecodingStep` ``_valid_auto_compile_criteria`` chose, for ``get_compiled_call`` to hand out."""
    length = None
    """While a captured decoding step runs: the filled length of the static cache, its argument."""
    cache = None
    """While a captured decoding step runs: its cache (not an argument: a new one every generate() call)."""
    active = None
    """The :class:`_DecodingStep` of the generate() call in progress, if it has one."""
    kwargs = None
    """The model keywords ``_update_model_kwargs_for_generation`` returned last (for :func:`_prepare_early`)."""
    early = None
    """``(ids, args, next_sequence_length, keywords, inputs)``: the next step's inputs, made early."""
    criteria = None
    """``(tensor, length)``: the ids' length on the device, as the max-length criterion last made it."""
    stop = None
    """``(length, done)``: the stopping criteria's answer for ids of that
    length, known on the host (only max-length criteria): :func:`_wrap_stop_check`'s answer."""
    preparing = False
    """:func:`_prepare_early` is calling ``prepare_inputs_for_generation``."""
    fixed = None
    """``[padding mask, mask]``: the attention mask ``mask`` (transformers'
    2-D one, grown by a position every token) padded with zeros to the
    static cache's length, which a deferred decoding step reads and grows
    in place (:func:`_prepare_deferred`); None when there is none."""
    greedy = False
    """:func:`_greedy_replayed` is making tokens."""
    processors = None
    """While :func:`_beams` runs: its logits processors (:data:`_SCORES_ONLY`,
    keyed in its steps' spec), None for none."""
    beams = False
    """:func:`_beams` is asking for its decoding call (an encoder-decoder
    model's is captured for beam search only: its greedy and sampled
    decoding run transformers' ``_sample``)."""
    deferred = None
    """``(ids, padding mask)`` of the next decoding step's inputs when
    :func:`_prepare_deferred` made them: the step makes the rest in its call."""


_GENERATING = _Generating()


def _learn_zeros(mask) -> None:
    """Note whether generate()'s attention mask ``mask`` holds a zero (a
    padded position), so that transformers' ``fast_all`` checks of the masks
    made from it need no read (:func:`_wrap_fast_all`).

    The prompt's mask, device data the user uploaded, is read once (a copy,
    no program). A later step's mask is ``torch.cat([mask, ones])`` of the
    step before's, whose node the barrier between them replaced: the one seen
    then, unchanged since (its version), holds a zero now if it did then."""
    g = _GENERATING
    if g.zeros is None or not isinstance(mask, Tensor) or mask._steps:
        return
    last = g.mask
    if last is not None and last[2] and last[0]._version == last[1] and not last[0]._steps:
        g.zeros[read(last[0])._value.node] = True
    handle = read(mask)
    node = handle._value.node
    zero = _has_zero(node, g.zeros, 4)
    if not zero and last is None and type(node) is Data and not handle.pending:
        zero = bool((handle.numpy() == 0).any())
    if zero:
        g.zeros[node] = True
    g.mask = (mask, mask._version, zero)


def _all_zero(node) -> bool:
    """Whether ``node`` is a constant of zeros (or one broadcast)."""
    if node.op == "broadcast_in_dim":
        node = node.operands[0][0]
    if node.op != "constant":
        return False
    value = node.attrs.get("value")
    return value is not None and not value.any()


def _has_zero(node, zeros: dict, depth: int) -> bool:
    """Whether the value of ``node`` holds a zero (False) by the nodes that
    made it alone: a known node, a convert of one (0 stays 0), its compare
    ``!= 0`` (``.to(torch.bool)``: 0 is False), a concatenation with one, a
    pad of one, a slice that keeps all of one."""
    if node in zeros:
        return True
    if depth == 0:
        return False
    op = node.op
    if op == "convert":
        return _has_zero(node.operands[0][0], zeros, depth - 1)
    if op == "compare":
        return (node.attrs.get("direction") == "NE" and _all_zero(node.operands[1][0])
                and _has_zero(node.operands[0][0], zeros, depth - 1))
    if op == "concatenate":
        group = node.operands[0] if len(node.operands) == 1 and type(node.operands[0]) is tuple else node.operands
        return any(_has_zero(v[0], zeros, depth - 1) for v in group)
    if op == "pad":
        inner = _padded(node)
        return inner is not None and _has_zero(inner, zeros, depth - 1)
    if op == "slice":
        return _slice_keeps(node, zeros, depth - 1)
    return False


def _padded(node):
    """The operand of ``pad`` node ``node`` where every element of it is in
    the result (no negative edge crops it), else None."""
    a = node.attrs
    if all(x >= 0 for x in a["low"]) and all(x >= 0 for x in a["high"]) and not any(a["interior"]):
        return node.operands[0][0]
    return None


def _slice_keeps(node, zeros: dict, depth: int) -> bool:
    """Whether slice ``node`` holds a zero its operand holds: it covers the
    whole operand, or all of a padded operand's own elements
    (``prepare_padding_mask``'s pad to a static cache's length, then its
    first ``q_length`` positions: the prompts' mask again)."""
    a = node.attrs
    if any(x != 1 for x in a["strides"]):
        return False
    source = node.operands[0][0]
    low, shape = (0,) * len(a["start"]), source.types[0].shape
    inner = _padded(source) if source.op == "pad" else None
    if inner is not None:
        if not _has_zero(inner, zeros, depth - 1):
            return False
        low, shape = source.attrs["low"], inner.types[0].shape
    elif not _has_zero(source, zeros, depth):
        return False
    return all(s <= lo and lim >= lo + n for s, lim, lo, n in zip(a["start"], a["limit"], low, shape))


def _wrap_update_kwargs(update):
    @functools.wraps(update)
    def wrapped(self, *args, **kwargs):
        given = args[1] if len(args) > 1 else kwargs.get("model_kwargs")
        before = given.get("attention_mask") if isinstance(given, dict) else None
        model_kwargs = update(self, *args, **kwargs)
        g = _GENERATING
        if g.depth and isinstance(model_kwargs, dict):
            # the grown mask while it is still its torch.cat (the stopping
            # criteria's read runs it before the next step's inputs are made)
            mask = model_kwargs.get("attention_mask")
            _learn_zeros(mask)
            if g.active is not None:
                g.kwargs = model_kwargs
            fixed = g.fixed
            if fixed is not None:
                # the padding mask stands for the grown mask too: a deferred
                # step sets its one new position (transformers' torch.cat of ones)
                if before is not None and fixed[1] is before and isinstance(mask, Tensor) \
                        and mask.shape[:-1] == before.shape[:-1] and mask.shape[-1] == before.shape[-1] + 1:
                    fixed[1] = mask
                else:
                    g.fixed = None
        return model_kwargs

    wrapped.__lazycore_generation__ = True
    return wrapped


def _wrap_fast_all(fast_all):
    @functools.wraps(fast_all)
    def wrapped(tensor):
        zeros = _GENERATING.zeros
        if zeros and isinstance(tensor, Tensor) and _has_zero(read(tensor)._value.node, zeros, 5):
            # ``tensor.sum() == tensor.numel()`` of a mask with a False in it:
            # False, as its read would say, with no program for the read
            # (transformers asks every decoding step whether the padded
            # prompts' mask is all True)
            return False
        return fast_all(tensor)

    wrapped.__lazycore_generation__ = True
    return wrapped


def wrap_once(owner, name: str, wrap) -> None:
    """``owner.name`` replaced by ``wrap(owner.name)`` unless it is absent or
    one of these wrappers already (each says so: ``__lazycore_generation__``)."""
    original = getattr(owner, name, None)
    if original is not None and not getattr(original, "__lazycore_generation__", False):
        setattr(owner, name, wrap(original))


def _wrap_ignore_bidirectional(ignore):
    @functools.wraps(ignore)
    def wrapped(*args, **kwargs):
        if _GENERATING.length is not None:
            # in a captured decoding step (an encoder-decoder model's mask of
            # its encoder's positions): no mask is skipped, as transformers
            # answers under torch.compile (``is_tracing``). Its answer was
            # ``padding_mask.all()``, a read, so a barrier in every step; the
            # mask kept is all True where it would have been skipped, which
            # masks nothing (eager's tokens)
            return False
        return ignore(*args, **kwargs)

    wrapped.__lazycore_generation__ = True
    return wrapped


def _patch_masks() -> None:
    masks = sys.modules.get(_MASKS)
    wrap_once(masks, "fast_all", _wrap_fast_all)
    wrap_once(masks, "_ignore_bidirectional_mask_sdpa", _wrap_ignore_bidirectional)


def _static_for_default(model, inputs, kwargs) -> bool:
    """Whether generate() of ``model`` on a lazy device, asked for the
    default cache, decodes with a static one instead (``settings.generation_static_cache``).

    The default cache grows every token: its decoding step's shapes never
    repeat, so it cannot replay a captured step (a recording's graph has its
    call's shapes; the buckets pad at the barrier, after it), and traced per
    op a token cost 8-9x eager's. A static cache gives eager's tokens with
    steps that replay. Only where nobody sees the cache: not passed in, not
    returned (``return_dict_in_generate``), greedy, sampled or beam search
    decoding of a model transformers compiles with a static cache (beam
    search reorders a static layer's keys and values by ``index_select``
    as eager's; the default cache's grew every token: a program per token). An encoder-decoder
    model's (T5, Whisper) decoder cache: its first token's cache holds one
    position, which no bucket pads (a program of its own), and Whisper's
    second, of two, met a batch or head count of 2 (another): a tiny
    Whisper's 6 tokens compiled 6 programs with the default cache, 4 with
    this one."""
    if not (settings.generation_static_cache and settings.generation_replay) \
            or not getattr(type(model), "_can_compile_fullgraph", False):
        return False
    config = kwargs.get("generation_config") or getattr(model, "generation_config", None)
    if config is None:
        return False
    encoder_decoder = getattr(model.config, "is_encoder_decoder", False)

    def asked(name, default=None):
        return kwargs[name] if name in kwargs else getattr(config, name, default)

    if asked("cache_implementation") is not None or not asked("use_cache", True) or asked("return_dict_in_generate"):
        return False
    if asked("assistant_model") is not None or asked("prompt_lookup_num_tokens"):
        return False
    if any(kwargs.get(k) is not None for k in ("past_key_values", "cache", "inputs_embeds", "streamer")):
        return False
    ids = inputs if inputs is not None else kwargs.get("inputs", kwargs.get("input_ids"))
    if encoder_decoder and ids is None:
        ids = kwargs.get("input_features", kwargs.get("input_values"))  # (an audio encoder's)
    return isinstance(ids, Tensor) and (encoder_decoder or ids.dim() == 2) \
        and isinstance(next(model.parameters(), None), Tensor)


def _greedy_fits(model, input_ids, logits_processor, stopping_criteria, generation_config, synced_gpus,
                 streamer, model_kwargs, beams=False) -> bool:
    """Whether ``_sample`` of ``model`` decodes by :func:`_greedy`: greedy,
    on a lazy device, a static cache a captured decoding step takes, nothing
    but max-length criteria and at most one end-token criterion (with a pad
    token, as ``_sample`` needs), no logits processors, streamer or extra
    outputs, and no model input but the ids, their mask and positions (what
    :func:`_prepare_deferred` makes). ``beams``: asked for :func:`_beams`,
    which also takes sampling and encoder-decoder models (their encoder's
    states and mask, the same every token)."""
    config = generation_config
    if not (settings.generation_replay and _GENERATING.depth and _GREEDY_LOOP) or synced_gpus \
            or streamer is not None or config is None:
        return False
    if (config.do_sample and not beams) or config.return_dict_in_generate or getattr(config, "is_assistant", False) \
            or getattr(config, "prefill_chunk_size", None) is not None or getattr(config, "disable_compile", False) \
            or (getattr(model.config, "is_encoder_decoder", False) and not beams):
        return False
    if not isinstance(input_ids, Tensor) or input_ids.dim() != 2 or logits_processor is None \
            or (len(logits_processor) and not beams) or not stopping_criteria:
        return False
    length = getattr(sys.modules.get(_CRITERIA), "MaxLengthCriteria", None)
    end = getattr(sys.modules.get(_CRITERIA), "EosTokenCriteria", None)
    lengths = [c for c in stopping_criteria if type(c) is length]
    ends = [c for c in stopping_criteria if type(c) is end]
    if not lengths or len(lengths) + len(ends) != len(stopping_criteria) or len(ends) > 1 \
            or not all(isinstance(c.max_length, int) for c in lengths):
        return False
    if ends and (not isinstance(ends[0].eos_token_id, torch.Tensor) or ends[0].eos_token_id.dim() > 1
                 or not isinstance(getattr(config, "_pad_token_tensor", None), torch.Tensor)):
        return False
    if ends and getattr(model_kwargs.get(_cache_name(model_kwargs)), "_is_user_defined", False):
        return False  # (the tokens made past an end are in the cache: one the caller sees holds eager's alone)
    if not _decodable(model, model_kwargs, beams) or type(model).prepare_inputs_for_generation \
            is not getattr(sys.modules.get(_TARGET), "GenerationMixin", None).prepare_inputs_for_generation:
        return False  # (a model's own preparation may make other inputs)
    cache_name = _cache_name(model_kwargs)
    for name, value in model_kwargs.items():
        if name == cache_name or value is None:
            continue
        if name in ("attention_mask", "position_ids"):
            if not isinstance(value, Tensor) or value.dim() != 2:
                return False
        elif isinstance(value, torch.Tensor) or name in _NOT_GREEDY:
            return False
    return True


_NOT_GREEDY = ("inputs_embeds", "token_type_ids", "tokenizer", "assistant_tokenizer", "assistant_model")
"""Keywords of ``_sample`` that :func:`_greedy` leaves to it."""


def _greedy(model, input_ids, stopping_criteria, generation_config, model_kwargs):
    """``_sample`` for greedy decoding that :func:`_greedy_fits`: its tokens,
    the prompt's forward and the first token as ``_sample`` makes them, then
    every later token one call of the captured decoding step
    (:attr:`_DecodingStep.greedy`), and one barrier started per token.

    ``_sample`` ran, per token, the step, then transformers' bookkeeping op
    by op (the mask and positions grown by ``torch.cat``, the logits' argmax,
    the ids grown, the stopping criteria, ``unfinished_sequences.max() == 0``
    read): a hundred ops' dispatch and a read per token, with growing shapes
    the barrier padded to buckets. Here the step's replay makes the token,
    writes it in the ids (made once at their final length: the max-length
    criteria stop every sequence there) and makes the next step's inputs;
    the host knows when to stop. With an end token (:func:`_ending`) the
    step also pads finished rows and updates their flags as ``_sample``
    does; the flags are read every ``_STOP_EVERY`` tokens, not every token,
    and the ids are cut on the host where ``_sample`` would have stopped.
    Where the step cannot be captured (a decoding step
    :func:`_prepare_deferred` refuses), the tokens are made op by op as
    ``_sample`` makes them, the flags read every token."""
    g = _GENERATING
    length = getattr(sys.modules.get(_CRITERIA), "MaxLengthCriteria", None)
    lengths = [c for c in stopping_criteria if type(c) is length]  # (and an end token's: _greedy_fits)
    max_length = min(c.max_length for c in lengths)
    ending = _ending(stopping_criteria, generation_config, input_ids)
    most = [c.max_position_embeddings for c in lengths if c.max_position_embeddings is not None]
    if most and max(input_ids.shape[1], min(most)) + 1 < max_length:
        # the criteria's warning of ids longer than the model's positions, as
        # _sample's call at that length gives it (on a stand-in: no lazy op)
        lengths[0](torch.empty((input_ids.shape[0], max(input_ids.shape[1], min(most)) + 1),
                               dtype=input_ids.dtype, device="meta"), None)
    model_forward = (model.get_compiled_call(generation_config.compile_config)
                     if model._valid_auto_compile_criteria(model_kwargs, generation_config) else model.__call__)
    outputs = model._prefill(input_ids, generation_config, model_kwargs, is_first_iteration=True)
    with model._optimize_model_for_decode():
        while True:
            model_kwargs = model._update_model_kwargs_for_generation(outputs, model_kwargs, is_encoder_decoder=False)
            logits = outputs.logits[:, -1].to(copy=True, dtype=torch.float32, device=input_ids.device)
            del outputs
            new = torch.argmax(logits, dim=-1, keepdim=True)
            del logits
            if ending is not None:
                new, unfinished = _pad_finished(new, *ending)
                ending = (unfinished, *ending[1:])
            input_ids = torch.cat([input_ids, new], dim=-1)
            del new
            step = g.active
            # (the first step's inputs are made even where no step follows:
            # the prompt's program is the same for a call of one new token)
            if step is not None and model_forward is step and model_kwargs.get("use_cache", True) \
                    and _DEFER_INPUTS and _prepare_deferred(input_ids, model_kwargs):
                tokens = _greedy_replayed(step, input_ids, max_length, ending)
                if tokens is not None:
                    return tokens
            if input_ids.shape[1] >= max_length or (ending is not None and not bool(ending[0].max() != 0)):
                # its work started while generate()'s tensors are alive, as
                # _sample's stop check started it: the same program every call
                # (a read of the ids alone was a program of its own)
                core.mark_step(False)
                return input_ids
            if model_forward is not step or _static_layers(model_kwargs.get(_cache_name(model_kwargs))) is None:
                # a token's work, as _sample's stop check ran it (a captured
                # step runs it itself). A step that cannot be captured (a
                # sliding-window layer: Mistral's every layer) runs the model
                # op by op: unmarked, a whole call's tokens were one program
                # (12 tokens of a tiny Mistral: 4,894 nodes)
                core.mark_step(False)
            inputs = model.prepare_inputs_for_generation(input_ids, next_sequence_length=1, **model_kwargs)
            outputs = model_forward(**inputs, return_dict=True)


def _greedy_replayed(step, input_ids, max_length: int, ending=None):
    """:func:`_greedy`'s tokens after the one :func:`_prepare_deferred` made
    the step's inputs for: each the step's replay (its first calls record
    it); None (nothing done) where the step cannot be captured.

    With an end token (``ending``: :func:`_ending`'s flags, end tokens and
    pad token, the flags as the first token left them), the step pads and
    flags as ``_sample`` does, and the flags are read every ``_STOP_EVERY``
    tokens (``_sample`` read them every token: a wait for each token's
    program). The tokens made past the one where every row had finished are
    cut off on the host (:func:`_stopped_at`): eager's ids, eager's length."""
    g = _GENERATING
    inputs = dict(g.early[4])
    plan = step._plan(inputs)
    if plan is None:
        return None  # (the inputs made early serve _greedy's next step)
    g.early = None
    n = input_ids.shape[1]  # (max_length already: no step, the ids as they are)
    # the ids as long as the cache, each later token written at its place:
    # one shape for every call that shares the cache (transformers keeps it
    # for shorter calls), so one recording and one program for all of them
    size = plan[2][0].keys.shape[-2]
    # (the plan holds the first step's inputs: kept, their buffers would
    # stay alive through the second step's barrier, which then donated two
    # inputs fewer than every later one's, a program of its own)
    del plan
    tokens = torch.cat([input_ids, input_ids.new_zeros((input_ids.shape[0], size - n))], dim=-1)
    g.greedy = True
    made = n
    try:
        for _ in range(max_length - n):
            events.bump("generated_tokens")  # one model call, one new token
            g.deferred = (inputs["input_ids"], inputs.get("attention_mask"))
            inputs.update(step(tokens=tokens, ending=ending, **inputs, return_dict=True))
            made += 1
            if ending is not None and (made - n) % _STOP_EVERY == 0 and made < max_length:
                # the token's work started as every token's is (the same
                # program), then its flags read: all finished, no more tokens
                core.mark_step(False)
                if not bool(ending[0].cpu().any()):
                    break
    finally:
        g.greedy = False
    # the last token's work started as every token's was (while the inputs are alive, the same program)
    core.mark_step(False)
    del inputs
    # the call's ids cut from them on the host (a slice on the device: a
    # program per call length), back on the device as the call's result:
    # uploaded as data (``.to(device)`` made an empty tensor first, whose
    # constant the first call alone makes: a node in the next barrier's
    # step log that no later call's has, so that barrier walked again)
    host = tokens.cpu()
    if ending is not None:
        made = _stopped_at(host, ending[1].cpu(), n - 1, made)
    return from_host(host[:, :made].contiguous(), input_ids.device)


_STOP_EVERY = 8
"""With an end token, :func:`_greedy_replayed` reads the rows' finished
flags after every this many tokens (at most this many - 1 tokens made past
the last row's end, cut off on the host)."""


def _ending(stopping_criteria, generation_config, input_ids):
    """``(flags, end tokens, pad token)`` on the device of ``input_ids``
    where ``stopping_criteria`` hold an end-token criterion (``_sample``
    then pads the finished rows' new tokens and flags them: the flags
    start as ones, one per row), else None (:func:`_greedy_fits` checked
    the pad token)."""
    end = getattr(sys.modules.get(_CRITERIA), "EosTokenCriteria", None)
    ends = [c for c in stopping_criteria if type(c) is end]
    if not ends:
        return None
    dev = input_ids.device
    unfinished = torch.ones(input_ids.shape[0], dtype=torch.long, device=dev)
    return unfinished, ends[0].eos_token_id.to(dev), generation_config._pad_token_tensor.to(dev)


def _pad_finished(new: torch.Tensor, unfinished: torch.Tensor, end: torch.Tensor,
                  pad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``_sample``'s end-token step on one token per row: ``new`` (a column)
    with the pad token in rows already finished, and the rows' flags after
    it (a row whose new token is an end token is finished)."""
    flags = unfinished[:, None]
    new = new * flags + pad * (1 - flags)
    return new, unfinished & ~torch.isin(new, end).any(dim=-1)


def _stopped_at(host: torch.Tensor, end: torch.Tensor, start: int, made: int) -> int:
    """The ids' length where ``_sample`` stops (``host``: the ids on the
    host, ``made`` of them made, the new ones from ``start``): one past the
    position where the last row to end first made an end token, or
    ``made`` where a row made none."""
    ended = torch.isin(host[:, start:made], end.reshape(-1))
    if not bool(ended.any(dim=-1).all()):
        return made
    return start + int(ended.to(torch.int8).argmax(dim=-1).max()) + 1


def _put_at(t: Tensor, place, value: torch.Tensor) -> Tensor:
    """``t`` with ``t[..., place] = value`` (eager's setitem: ``value`` cast
    to ``t``'s type), the place a program parameter (or a device value
    already): a select by position, not a slice at an offset baked into the
    token's graph."""
    if not isinstance(place, Tensor):
        place = _parameter(torch.tensor(place), t.device)
    where = torch.arange(t.shape[-1], device=t.device) == place
    return torch.where(where, value.to(t.dtype)[..., None], t)


def _at(t: Tensor, place: Tensor) -> Tensor:
    """``t[..., place]`` for a device value ``place``: the one element of
    each row a select by position keeps, summed with zeros (exact: a sum of
    one value and zeros), not a slice at an offset baked into the graph."""
    where = torch.arange(t.shape[-1], device=t.device) == place
    return torch.where(where, t, torch.zeros((), dtype=t.dtype, device=t.device)).sum(-1, dtype=t.dtype)


def _continuations(log_probs: torch.Tensor, keep: int, sample: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``_get_top_k_continuations``' choice of ``keep`` continuations from
    the beams' accumulated ``log_probs`` (one row per batch item): their
    log-probabilities and indices, the best first; sampled without
    replacement from their softmax where ``sample``."""
    if not sample:
        return torch.topk(log_probs, k=keep)
    topk_indices = torch.multinomial(torch.nn.functional.softmax(log_probs, dim=-1), num_samples=keep)
    topk_log_probs = torch.gather(input=log_probs, dim=1, index=topk_indices)
    topk_log_probs, order = topk_log_probs.sort(dim=-1, descending=True)
    return topk_log_probs, topk_indices.gather(dim=-1, index=order)


@contextlib.contextmanager
def _draws_kept_when(flag: Tensor):
    """A block whose draws from the lazy device's generator leave its state
    as it was where the 0-d bool ``flag`` (a device value) is set: beam
    sampling's steps after transformers' loop would have stopped draw
    nothing a later draw sees (the state a select on the flag)."""
    generator = GENERATORS.of(lc_device(flag.device))
    handle = generator.handle()
    before = core.LazyTensor(handle._value, handle.device)
    yield
    handle = generator.state
    if handle is not None:
        kept = core.broadcast_to(read(flag), handle.shape)
        handle.assign(core.apply("select", kept, before, core.LazyTensor(handle._value, handle.device)))


def _wrap_top_k(top_k):
    @functools.wraps(top_k)
    def wrapped(self, *args, **kwargs):
        running = kwargs.get("running_sequences")
        if args or not _GENERATING.depth or not isinstance(running, Tensor) \
                or not isinstance(kwargs.get("cur_len"), int) or not isinstance(kwargs.get("decoder_prompt_len"), int):
            return top_k(self, *args, **kwargs)
        # beam search's top-k continuations as transformers makes them, but
        # the new token and its beam written at the length as a parameter:
        # ``topk_running_sequences[:, :, cur_len] = topk_ids`` baked the
        # length into each token's graph (a program per token; beam
        # sampling's too, which drew its continuations the same way)
        log_probs, num_beams, cur_len = kwargs["accumulated_log_probs"], kwargs["num_beams"], kwargs["cur_len"]
        topk_log_probs, topk_indices = _continuations(log_probs, kwargs["beams_to_keep"], bool(kwargs.get("do_sample")))
        vocab_size = log_probs.shape[-1] // num_beams
        topk_current_beam_indices = topk_indices // vocab_size
        topk_running_beam_indices = self._gather_beams(kwargs["running_beam_indices"], topk_current_beam_indices)
        topk_running_sequences = self._gather_beams(running, topk_current_beam_indices)
        topk_ids = topk_indices % vocab_size
        topk_running_sequences = _put_at(topk_running_sequences, cur_len, topk_ids)
        batch_offset = torch.arange(kwargs["batch_size"], device=topk_ids.device).view(-1, 1) * num_beams
        topk_running_beam_indices = _put_at(topk_running_beam_indices, cur_len - kwargs["decoder_prompt_len"],
                                            topk_current_beam_indices + batch_offset)
        return topk_log_probs, topk_running_sequences, topk_running_beam_indices

    wrapped.__lazycore_generation__ = True
    return wrapped


_BEAM_LOOP = True
"""Beam search that :func:`_beams_fit` decodes in :func:`_beams`; False:
transformers' ``_beam_search`` (a read every token, the beams' bookkeeping
traced op by op)."""


def _beams_fit(model, input_ids, logits_processor, stopping_criteria, generation_config, synced_gpus,
               model_kwargs) -> bool:
    """Whether ``_beam_search`` of ``model`` decodes by :func:`_beams`: beam
    search or beam sampling with what :func:`_greedy_fits` asks of greedy
    decoding (a static cache a captured step takes, max-length criteria
    and at most one end token, no extra outputs) but logits processors of
    :data:`_SCORES_ONLY`, a cache nobody else sees, and no model reordering
    its cache itself."""
    config = generation_config
    if not _BEAM_LOOP or config is None or getattr(config, "low_memory", False):
        return False
    beams, returned = config.num_beams, config.num_return_sequences or 1
    if not isinstance(beams, int) or beams < 2 or not isinstance(returned, int) or not 1 <= returned <= beams:
        return False
    if hasattr(model, "_reorder_cache") or getattr(model_kwargs.get(_cache_name(model_kwargs)), "_is_user_defined",
                                                   False):
        return False  # (tokens are made past the stop: a cache the caller sees would hold them)
    if isinstance(input_ids, Tensor) and input_ids.dim() == 2 and input_ids.shape[0] % beams:
        return False
    if logits_processor is not None and _processors_key(logits_processor) is None:
        return False
    return _greedy_fits(model, input_ids, logits_processor, stopping_criteria, generation_config, synced_gpus,
                        None, model_kwargs, beams=True)


_SCORES_ONLY = ("TemperatureLogitsWarper", "TopKLogitsWarper", "TopPLogitsWarper", "MinPLogitsWarper")
"""The logits processors :func:`_beams` runs in its captured step: they read
the scores alone (not the ids, whose length grows) and Python numbers of
their own, which :func:`_processors_key` puts in the step's key (the
warpers sampling adds: ``do_sample`` with the default ``top_k`` of 50 runs
``TopKLogitsWarper``)."""


def _processors_key(processors):
    """The types and attributes of ``processors`` (a ``LogitsProcessorList``)
    where each is one of transformers' :data:`_SCORES_ONLY`, with hashable
    attributes; else None."""
    module = sys.modules.get("transformers.generation.logits_process")
    kinds = {getattr(module, name, None) for name in _SCORES_ONLY} - {None}
    key = []
    for p in processors:
        if type(p) not in kinds:
            return None
        attrs = tuple(sorted(vars(p).items()))
        try:
            hash(attrs)
        except TypeError:
            return None
        key.append((type(p).__name__, attrs))
    return tuple(key)


def _beams(model, input_ids, stopping_criteria, generation_config, model_kwargs, logits_processor=None):
    """``_beam_search`` for beam search that :func:`_beams_fit`: its tokens,
    the prompt's forward and the first token as transformers makes them
    (its bookkeeping by :func:`_beam_update`), then every later token one
    call of the captured decoding step (:attr:`_DecodingStep.beams`): the
    model's step, the beams' bookkeeping, the cache's reorder and the next
    step's ids, with the length a device value. One barrier is started per
    token, none waited for.

    transformers' loop read ``_beam_search_has_unfinished_sequences`` every
    token (a wait for the token's program and a copy) and traced the
    model's step and the bookkeeping op by op. Here whether beam search has
    stopped is a flag on the device, and a token made after it changes
    nothing of the beams' state (each update a select on the flag); the
    flag is read every ``_STOP_EVERY`` tokens, and the host knows the stop
    at ``max_length``. The result is cut on the host as transformers cuts
    it (the beams' generated length), eager's ids.

    Beam sampling (``do_sample``) draws its continuations in the step from
    the lazy device's generator, whose state the captured step reads and
    updates as a live tensor (:mod:`lazycore.trace.capture`): the draws
    transformers' loop makes on the lazy device, in the same order, and
    none once the flag is set (the state kept as it was), so the generator
    is left where that loop leaves it. An encoder-decoder model (T5, BART)
    decodes the same way: its encoder's states and mask are arguments of
    the step, the cross-attention cache the first token filled is read
    and reordered as transformers reorders it."""
    g = _GENERATING
    config = generation_config
    dev = input_ids.device
    length_crit = getattr(sys.modules.get(_CRITERIA), "MaxLengthCriteria", None)
    lengths = [c for c in stopping_criteria if type(c) is length_crit]  # (and an end token's: _greedy_fits)
    max_length = min(c.max_length for c in lengths)
    if config.max_length != max_length:
        return None  # (transformers sizes the beams' state by the config's)
    most = [c.max_position_embeddings for c in lengths if c.max_position_embeddings is not None]
    num_beams, returned = config.num_beams, config.num_return_sequences or 1
    batch, prompt = input_ids.shape[0] // num_beams, input_ids.shape[1]
    if most and max(prompt, min(most)) + 1 < max_length:
        # the criteria's warning of ids longer than the model's positions (on a stand-in: no lazy op)
        lengths[0](torch.empty((input_ids.shape[0], max(prompt, min(most)) + 1), dtype=input_ids.dtype,
                               device="meta"), None)
    ending = _ending(stopping_criteria, config, input_ids)
    eos = ending[1].reshape(-1) if ending is not None else None
    keep = max(2, 1 + (eos.shape[0] if eos is not None else 0)) * num_beams
    if eos is None:
        fill = -1
    else:  # (transformers' ``pad_token_id or eos_token_id[0]``: a pad token 0 is falsy)
        pad = config._pad_token_tensor
        fill = int(pad.cpu()) if pad is not None and int(pad.cpu()) else int(eos[0].cpu())
    penalty, early = config.length_penalty, config.early_stopping
    # (cur + 1 - prompt) ** length_penalty for each place cur of a new token,
    # as transformers computes it in Python (eager divides by it as float32)
    table = [float((c + 1 - prompt) ** penalty) if c >= prompt else 1.0 for c in range(max_length)]
    state = _beam_state(model, input_ids, batch, num_beams, keep, max_length, fill, eos,
                        from_host(torch.tensor(table, dtype=torch.float32), dev))
    # (the processors' numbers in the spec: a recording bakes them)
    spec = (batch, num_beams, keep, prompt, max_length, early, penalty, bool(config.do_sample),
            _processors_key(logits_processor or ()))
    g.processors = logits_processor if logits_processor else None
    g.beams = True  # (an encoder-decoder model's step is captured too)
    try:
        compiled = model._valid_auto_compile_criteria(model_kwargs, config)
    finally:
        g.beams = False
    model_forward = model.get_compiled_call(config.compile_config) if compiled else model.__call__
    outputs = model._prefill(input_ids, config, model_kwargs, is_first_iteration=not config.is_assistant)
    cache_name = _cache_name(model_kwargs)
    encoder_decoder = bool(getattr(model.config, "is_encoder_decoder", False))
    cur_len = prompt
    inputs = step = None
    try:
        with model._optimize_model_for_decode():
            while True:
                if outputs is not None:
                    model_kwargs = model._update_model_kwargs_for_generation(outputs, model_kwargs,
                                                                             is_encoder_decoder=encoder_decoder)
                    logits = outputs.logits[:, -1, :].to(copy=True, dtype=torch.float32, device=dev)
                    del outputs
                    log_probs = torch.nn.functional.log_softmax(logits, dim=-1)
                    del logits
                    beam_idx, _ = _beam_update(model, state, log_probs, _parameter(torch.tensor(cur_len), dev), spec,
                                               g.processors)
                    model_kwargs[cache_name].reorder_cache(beam_idx)
                    del beam_idx, log_probs
                else:
                    events.bump("generated_tokens")  # one model call, one new token
                    g.deferred = (inputs["input_ids"], inputs.get("attention_mask"))
                    inputs.update(step(beams=(spec, state), **inputs, return_dict=True))
                cur_len += 1
                if cur_len >= max_length:
                    break
                if ending is not None and (cur_len - prompt) % _STOP_EVERY == 0:
                    # the token's work started as every token's is, then the flag read
                    core.mark_step(False)
                    if bool(state[-1].cpu()):
                        break
                if step is not None:
                    continue
                # the next token's inputs: transformers' ids are the running beams' first cur_len columns
                flat = model._flatten_beam_dim(state[0][:, :, :cur_len])
                if g.active is not None and model_forward is g.active and model_kwargs.get("use_cache", True) \
                        and _DEFER_INPUTS and _prepare_deferred(flat, model_kwargs):
                    made = dict(g.early[4])
                    if g.active._plan(made) is not None:
                        g.early = None
                        inputs, step, outputs = made, g.active, None
                        g.greedy = True  # (nothing grows in the step: no buckets)
                        continue
                g.early = None
                # op by op, as transformers' loop (its read every token: the flag's every _STOP_EVERY)
                core.mark_step(False)
                model_inputs = model.prepare_inputs_for_generation(flat, next_sequence_length=1, **model_kwargs)
                outputs = model_forward(**model_inputs, return_dict=True)
                del model_inputs
    finally:
        g.greedy = False
        g.processors = None
    del inputs
    core.mark_step(False)
    # transformers' cut of the best beams to the generated length, on the host
    host, where = state[3].cpu(), state[5].cpu()
    sequences = model._flatten_beam_dim(host[:, :returned, :])
    beam_indices = model._flatten_beam_dim(where[:, :returned, :])
    generated = int(((beam_indices + 1).bool()).sum(dim=1).max())
    return from_host(sequences[:, :prompt + generated].contiguous(), dev)


def _beam_state(model, input_ids, batch, num_beams, keep, max_length, fill, eos, table):
    """The beams' state as ``_beam_search`` makes it, for :func:`_beam_update`
    (each tensor updated in place): running sequences, their scores and
    beam indices, the finished ones', their flags, the early-stop
    heuristic's flags, the stop flag (transformers' ``this_peer_finished``,
    on the device), the top beams' mask, the end tokens and the length
    penalties."""
    dev = input_ids.device
    prompt = input_ids.shape[1]
    running = torch.full((batch, num_beams, max_length), fill_value=fill, dtype=torch.int64, device=dev)
    running[:, :, :prompt] = model._unflatten_beam_dim(input_ids, batch, num_beams)
    sequences = running.detach().clone()
    running_scores = torch.zeros((batch, num_beams), dtype=torch.float, device=dev)
    running_scores[:, 1:] = -1e9
    scores = torch.full((batch, num_beams), fill_value=-1e9, dtype=torch.float, device=dev)
    finished = torch.zeros((batch, num_beams), dtype=torch.bool, device=dev)
    unsatisfied = torch.ones((batch, 1), dtype=torch.bool, device=dev)
    running_indices = torch.full((batch, num_beams, max_length - prompt), fill_value=-1, dtype=torch.int32,
                                 device=dev)
    indices = running_indices.detach().clone()
    top = from_host(torch.cat((torch.ones((num_beams), dtype=torch.bool),
                               torch.zeros((keep - num_beams), dtype=torch.bool)), dim=0), dev)
    done = torch.zeros((), dtype=torch.bool, device=dev)
    return (running, running_scores, running_indices, sequences, scores, indices, finished, unsatisfied, top, eos,
            table, done)


def _beam_update(model, state, log_probs, cur_len, spec, processors=None):
    """One token of transformers' beam search after the model (``_beam_search``'s
    steps b to g), on the beams' ``state`` (:func:`_beam_state`) in place,
    with the token's place ``cur_len`` a device value: transformers' own
    functions where they take no length (``_gather_beams``,
    ``_get_running_beams_for_next_iteration``), its steps with the length
    as written there otherwise (the writes at the length selects, the
    length penalty looked up in the state's table). Where the stop flag is
    set, nothing changes. ``processors``: the logits processors
    (:data:`_SCORES_ONLY`), on the log-probabilities first. Returns the
    cache's reorder index (the beams' batch x beam index, flattened) and
    the next step's ids (the running beams' new tokens, a column)."""
    batch, num_beams, keep, prompt, max_length, early, penalty, sample, _ = spec
    (running, running_scores, running_indices, sequences, scores, indices, finished, unsatisfied, top, eos,
     table, done) = state
    if processors is not None:  # (b. as transformers' loop calls them: they read no ids)
        log_probs = processors(None, log_probs)
    log_probs = model._unflatten_beam_dim(log_probs, batch, num_beams)
    log_probs = log_probs + running_scores[:, :, None]
    log_probs = torch.reshape(log_probs, (batch, -1))
    # c. top-k continuations (_get_top_k_continuations)
    if sample:
        with _draws_kept_when(done):
            topk_log_probs, topk_indices = _continuations(log_probs, keep, True)
    else:
        topk_log_probs, topk_indices = _continuations(log_probs, keep, False)
    vocab_size = log_probs.shape[-1] // num_beams
    topk_current = topk_indices // vocab_size
    topk_running_indices = model._gather_beams(running_indices, topk_current)
    topk_running = model._gather_beams(running, topk_current)
    topk_ids = topk_indices % vocab_size
    topk_running = _put_at(topk_running, cur_len, topk_ids)
    offset = torch.arange(batch, device=topk_ids.device).view(-1, 1) * num_beams
    topk_running_indices = _put_at(topk_running_indices, cur_len - prompt, topk_current + offset)
    # d. the stopping criteria on ids of cur_len + 1 (StoppingCriteriaList's or of its criteria)
    hits = torch.full((batch * keep,), False, device=topk_ids.device, dtype=torch.bool)
    hits = hits | (cur_len + 1 >= max_length).expand(batch * keep)
    if eos is not None:
        hits = hits | torch.isin(topk_ids.reshape(-1, 1), eos).any(dim=-1)
    hits = model._unflatten_beam_dim(hits, batch, keep)
    # e. the running beams for the next token
    new_running, new_running_scores, new_running_indices = model._get_running_beams_for_next_iteration(
        topk_log_probs=topk_log_probs, topk_running_sequences=topk_running,
        topk_running_beam_indices=topk_running_indices, next_token_hits_stopping_criteria=hits,
        num_beams=num_beams)
    # f. the finished beams (_update_finished_beams, its length penalty from the table)
    just_finished = hits & top[None, :]
    topk_log_probs = topk_log_probs / _at(table, cur_len)
    full = torch.all(finished, axis=-1, keepdims=True) & (early is True)
    topk_log_probs += full.to(torch.float32) * -1.0e9
    topk_log_probs += (~unsatisfied).to(torch.float32) * -1.0e9
    topk_log_probs += (~just_finished) * -1.0e9
    merged_sequences = torch.cat((sequences, topk_running), dim=1)
    merged_scores = torch.cat((scores, topk_log_probs), dim=1)
    merged_indices = torch.cat((indices, topk_running_indices), dim=1)
    merged_finished = torch.cat((finished, just_finished), dim=1)
    topk_merged = torch.topk(merged_scores, k=num_beams)[1]
    new_sequences = model._gather_beams(merged_sequences, topk_merged)
    new_scores = model._gather_beams(merged_scores, topk_merged)
    new_indices = model._gather_beams(merged_indices, topk_merged)
    new_finished = model._gather_beams(merged_finished, topk_merged)
    # g. the cache's reorder index, then the early-stop heuristic at cur_len + 1
    beam_idx = model._flatten_beam_dim(_at(new_running_indices, cur_len - prompt))
    if early == "never" and penalty > 0.0:
        best = new_running_scores[:, :1] / ((max_length - prompt) ** penalty)
    else:
        best = new_running_scores[:, :1] / _at(table, cur_len)
    worst = torch.where(new_finished, torch.min(new_scores, dim=1, keepdim=True)[0], -1.0e9)
    new_unsatisfied = unsatisfied & torch.any(best > worst, dim=-1, keepdim=True)
    unfinished = torch.any(new_unsatisfied) & ~(torch.all(new_finished) & (early is True)) & ~torch.all(hits)
    # (a copy: a view would keep the step's tensor it views alive, unseen by a capture)
    ids = model._flatten_beam_dim(_at(new_running, cur_len))[:, None].clone()
    for old, new in ((running, new_running), (running_scores, new_running_scores),
                     (running_indices, new_running_indices), (sequences, new_sequences), (scores, new_scores),
                     (indices, new_indices), (finished, new_finished), (unsatisfied, new_unsatisfied)):
        old.copy_(torch.where(done, old, new))
    done.copy_(done | ~unfinished)
    return beam_idx, ids


def _wrap_beam_search(beam_search):
    @functools.wraps(beam_search)
    def wrapped(self, input_ids, logits_processor=None, stopping_criteria=None, generation_config=None,
                synced_gpus=False, **model_kwargs):
        # beam sampling's draws: the device's stream, which the captured step replays (eager's,
        # drawn on the host, would be an upload no replay makes again); in transformers' loop
        # too, so both ways draw the same tokens
        with GENERATORS.device_draws():
            if _beams_fit(self, input_ids, logits_processor, stopping_criteria, generation_config, synced_gpus,
                          model_kwargs):
                out = _beams(self, input_ids, stopping_criteria, generation_config, model_kwargs, logits_processor)
                if out is not None:
                    return out
            return beam_search(self, input_ids, logits_processor, stopping_criteria, generation_config,
                               synced_gpus=synced_gpus, **model_kwargs)

    wrapped.__lazycore_generation__ = True
    return wrapped


def _wrap_sample(sample):
    @functools.wraps(sample)
    def wrapped(self, input_ids, logits_processor=None, stopping_criteria=None, generation_config=None,
                synced_gpus=False, streamer=None, **model_kwargs):
        if _greedy_fits(self, input_ids, logits_processor, stopping_criteria, generation_config, synced_gpus,
                        streamer, model_kwargs):
            return _greedy(self, input_ids, stopping_criteria, generation_config, model_kwargs)
        return sample(self, input_ids, logits_processor, stopping_criteria, generation_config,
                      synced_gpus=synced_gpus, streamer=streamer, **model_kwargs)

    wrapped.__lazycore_generation__ = True
    return wrapped


def _wrap_generate(generate):
    @functools.wraps(generate)
    def wrapped(self, *args, **kwargs):
        before = _buckets.fix(_buckets.fix(None))  # the ceiling outside this call
        g = _GENERATING
        if not g.depth:
            g.zeros, g.mask, g.criteria, g.stop = {}, None, None, None
            _patch_masks()
            _patch_compiled_call()
        g.depth += 1
        try:
            _draw_state_first(self, kwargs)
            if len(args) <= 1 and _static_for_default(self, args[0] if args else None, kwargs):
                kwargs = dict(kwargs, cache_implementation="static")
            return _host_copied(generate(self, *args, **kwargs))
        finally:
            g.depth -= 1
            _buckets.fix(before)
            if not g.depth:
                g.zeros, g.mask, g.decoder = None, None, None
                g.active = g.kwargs = g.early = g.criteria = g.fixed = g.deferred = g.stop = g.processors = None

    wrapped.__lazycore_generation__ = True
    return wrapped


_HOST_COPIED_BYTES = 64 * 1024
"""The largest generated ids given a host copy (:func:`_host_copied`; the
runtime keeps one for integer uploads up to this size)."""


def _host_copied(out):
    """generate()'s result with its ids (``out`` or its ``sequences``) as
    device data with a host copy, where they are integers on a lazy device
    of at most :data:`_HOST_COPIED_BYTES`: one transfer, after which the
    caller's reads of them (Whisper's post-processing asks each row's last
    token, its pad count and ``tolist()``, a program each) are answered on
    the host (:mod:`lazycore.runtime.hostreads`). The values are the ones
    computed: eager's tokens."""
    ids = out if isinstance(out, Tensor) else getattr(out, "sequences", None)
    if not isinstance(ids, Tensor) or ids.dtype not in (torch.int64, torch.int32) \
            or ids.numel() * ids.element_size() > _HOST_COPIED_BYTES:
        return out
    copied = from_host(ids.cpu(), ids.device)
    if out is ids:
        return copied
    out.sequences = copied
    return out


def _draw_state_first(model, kwargs) -> None:
    """Make the lazy device's random state before anything of a sampling
    generate() call (``do_sample``), where a draw would make it later.

    The state is a handle the first draw after seeding uploads, then a
    program's result that each draw updates. Made at the first token's
    draw, its handle came after the call's own tensors in the barrier's
    outputs; in a later call it is older than all of them, so the
    parameters came in another order, and that call's prompt and
    decoding programs compiled again (2 programs). Made here, it comes
    first in every call."""
    config = kwargs.get("generation_config") or getattr(model, "generation_config", None)
    param = next(model.parameters(), None)
    if kwargs.get("do_sample", getattr(config, "do_sample", False)) and isinstance(param, Tensor):
        GENERATORS.of(lc_device(param.device)).handle()


def _wrap_length(prepare_length):
    @functools.wraps(prepare_length)
    def wrapped(self, *args, **kwargs):
        config = prepare_length(self, *args, **kwargs)
        length = getattr(config, "max_length", None)
        if _GENERATING.depth and isinstance(length, int) and length >= 2 and _BUCKET_TO_MAX_LENGTH:
            _buckets.fix(length)  # the growing sequence never crosses a bucket
        return config

    wrapped.__lazycore_generation__ = True
    return wrapped


def _wrap_max_length(call):
    @functools.wraps(call)
    def __call__(self, input_ids, scores, **kwargs):
        if not isinstance(input_ids, Tensor) or not isinstance(self.max_length, int):
            return call(self, input_ids, scores, **kwargs)
        # transformers' own answer (a lazy torch.full every token) is not
        # the one returned: it runs on a stand-in of the ids' shape on the
        # meta device for its warning, where it would give one (its only
        # other work is that answer: a meta call every token was 6% of a token)
        n = input_ids.shape[1]
        most = getattr(self, "max_position_embeddings", None)
        if most is not None and n < self.max_length and n > most:
            call(self, torch.empty(input_ids.shape, dtype=input_ids.dtype, device="meta"), scores, **kwargs)
        # the criterion's answer is a Python bool baked into the graph: False
        # every token but the last, whose graph folds `unfinished & ~True`
        # and compiles a program of its own. The length as a program input
        # (never folded) gives every token one graph.
        length = _generated_length(input_ids)
        _prepare_early(input_ids)
        return (length >= self.max_length).expand(input_ids.shape[0])

    __call__.__lazycore_generation__ = True
    return __call__


def _wrap_criteria_list(call):
    @functools.wraps(call)
    def __call__(self, input_ids, scores, **kwargs):
        done = call(self, input_ids, scores, **kwargs)
        g = _GENERATING
        if g.depth and isinstance(input_ids, Tensor):
            g.stop = None
            length = getattr(sys.modules.get(_CRITERIA), "MaxLengthCriteria", None)
            n = input_ids.shape[1]
            if self and all(type(c) is length and isinstance(c.max_length, int) for c in self):
                # every sequence is done when the ids are that long, none before
                g.stop = (n, any(n >= c.max_length for c in self))
        return done

    __call__.__lazycore_generation__ = True
    return __call__


def _wrap_stop_check(call):
    @functools.wraps(call)
    def __call__(self, unfinished_sequences, tokens, length, *args, **kwargs):
        g = _GENERATING
        stop, g.stop = g.stop, None
        if stop is None or stop[0] != length or g.active is None or getattr(self, "streamer", None) is not None \
                or type(self).__call__ is not __call__ or not isinstance(unfinished_sequences, Tensor):
            return call(self, unfinished_sequences, tokens, length, *args, **kwargs)
        # transformers reads ``unfinished_sequences.max() == 0`` every token:
        # a read, so a wait for the token's program and a copy to the host.
        # With only max-length criteria (no end token: has_eos_stopping_criteria
        # is False, and the sequences start unfinished) they are all finished
        # exactly when the ids reach the length: the host knows the answer.
        # The token's work still runs here, as the read ran it (the same graph
        # every token, while generate()'s tensors are alive), without waiting
        # for it: the host makes the next token's inputs meanwhile.
        core.mark_step(False)
        return stop[1]

    __call__.__lazycore_generation__ = True
    return __call__


def _generated_length(input_ids) -> Tensor:
    """The ids' length on the device. Within generate(), one more than the
    last call's: that tensor grown in place (a program's result from the
    second token on, no upload per token); its first value is made by an
    add too, so every later token's graph is the same."""
    g = _GENERATING
    n = input_ids.shape[1]
    held = g.criteria
    if g.depth and held is not None and held[1] + 1 == n and held[0].device == input_ids.device:
        length = held[0]
        length.add_(1)
    else:
        length = _parameter(torch.tensor(n - 1), input_ids.device) + 1
    if g.depth:
        g.criteria = (length, n)
    return length


def _parameter(number: torch.Tensor, tdev) -> Tensor:
    """A rank-0 CPU tensor's value on the lazy device ``tdev`` as a program
    parameter from its first value on (the scalar policy would bake the
    first value, then take a parameter from the second: two programs for a
    number that changes every token)."""
    return wrap(core.scalar(number.item(), dtypes.lazy_dtype(number.dtype), device=lc_device(tdev), fold=False))


def _static_layer_on_lazy(layer) -> bool:
    length = getattr(layer, "cumulative_length", None)
    return (isinstance(getattr(layer, "keys", None), Tensor) and isinstance(length, torch.Tensor)
            and not isinstance(length, Tensor) and length.dim() == 0)


def _wrap_seq_length(get_seq_length):
    @functools.wraps(get_seq_length)
    def wrapped(self, *args, **kwargs):
        length = get_seq_length(self, *args, **kwargs)
        if length is not self.cumulative_length or not _static_layer_on_lazy(self):
            return length
        if _GENERATING.length is not None:
            return _GENERATING.length  # a captured decoding step's argument
        # the filled length, a CPU tensor, read by the mask and position ids of every token
        return _parameter(length, self.keys.device)

    wrapped.__lazycore_generation__ = True
    return wrapped


def _wrap_static_update(update):
    @functools.wraps(update)
    def wrapped(self, key_states, *args, **kwargs):
        length = getattr(self, "cumulative_length", None)
        if not isinstance(key_states, Tensor) or not isinstance(length, torch.Tensor) \
                or isinstance(length, Tensor) or length.dim() != 0:
            return update(self, key_states, *args, **kwargs)
        # the filled length is a CPU tensor, which a lazy op takes as a Python
        # number: baked into the first token's program, a parameter from the
        # second on (another program). A parameter from the first; the CPU
        # tensor stays the layer's and grows as update grows it.
        given = _GENERATING.length
        # (in a captured decoding step, the step's argument: a copy per layer,
        # which update's add_ may change; _DecodingStep grows the CPU tensor)
        on_device = _parameter(length, key_states.device) if given is None else given.clone()
        self.cumulative_length = on_device
        try:
            out = update(self, key_states, *args, **kwargs)
        finally:
            self.cumulative_length = length
        if given is None:
            length.add_(key_states.shape[-2])
            # update grew it in place: the filled length on the device, which
            # a captured decoding step takes on from here (no upload per token)
            self._lazycore_length = (on_device, int(length))
        return out

    wrapped.__lazycore_generation__ = True
    return wrapped


def _wrap_static_reorder(reorder):
    @functools.wraps(reorder)
    def wrapped(self, beam_idx):
        if not _static_layer_on_lazy(self):
            return reorder(self, beam_idx)
        # beam search's reorder asks ``get_seq_length() > 0`` every token: a
        # lazy parameter (_wrap_seq_length), so a read, a barrier cutting the
        # token's work in two programs. The filled length is this CPU tensor.
        if int(self.cumulative_length) > 0:
            beam_idx = _column_of_view(beam_idx)
            self.keys = self.keys.index_select(0, beam_idx.to(self.keys.device))
            self.values = self.values.index_select(0, beam_idx.to(self.values.device))

    wrapped.__lazycore_generation__ = True
    return wrapped


def _wrap_static_cache(prepare):
    @functools.wraps(prepare)
    def wrapped(self, *args, **kwargs):
        length = kwargs.get("max_cache_len")
        if _GENERATING.depth and isinstance(length, int) and isinstance(next(self.parameters(), None), Tensor):
            # the attention mask is padded to the cache's length while it is
            # shorter (masking_utils.prepare_padding_mask), and the last
            # token's mask is as long as a cache of max_length - 1: no pad in
            # its graph, a program of its own. One more position, never
            # filled and always masked, keeps the pad in every token's graph.
            # A captured decoding step's last token makes the inputs of one
            # more (_prepare_early), its mask as long as max_length: two more.
            replaying = settings.generation_replay and not self.config.is_encoder_decoder
            extra = 2 if replaying else 1
            kwargs["max_cache_len"] = length + extra
            cache = prepare(self, *args, **kwargs)
            _bucket_to_cache(cache, extra)
            return cache
        return prepare(self, *args, **kwargs)

    wrapped.__lazycore_generation__ = True
    return wrapped


def _bucket_to_cache(cache, extra: int) -> None:
    """Pad the growing sequence to the longest ``max_length`` the static
    ``cache`` was made for (its length less the ``extra`` positions
    :func:`_wrap_static_cache` adds), where that is longer than this call's.

    transformers keeps a static cache as long as the longest call's before
    it (``_previous_max_cache_length``: no recompile for a shorter call).
    Padded to each call's own ``max_length``, a prompt of another length was
    another bucket: its decoding program compiled again, and no barrier of it
    recalled a step plan, although its cache, and so its replayed step, was
    the same. Padded to the cache's, every call that shares the cache shares
    the decoding program, and a token at a sequence length an earlier call
    reached recalls that call's plan (tiny GPT-2, 16 tokens, prompts of 9 to
    11 after 12 and 8: 13 of 18 barriers recalled, none before)."""
    ceiling = _buckets.fix(None)
    _buckets.fix(ceiling)
    if ceiling is None or not _BUCKET_TO_MAX_LENGTH:
        return
    layers = getattr(getattr(cache, "self_attention_cache", cache), "layers", None) or ()
    lengths = {getattr(layer, "max_cache_len", None) if type(layer).__name__ == "StaticLayer" else None
               for layer in layers}
    if len(lengths) == 1:
        (length,) = lengths
        if isinstance(length, int) and length - extra > ceiling:
            _buckets.fix(length - extra)


def _prepare_early(input_ids) -> None:
    """Make the next decoding step's inputs now, before the stopping
    criteria's read, for a captured decoding step (:class:`_DecodingStep`).

    transformers makes them after that read, from the grown ids and mask:
    nodes whose shapes grow every token, so a captured step reading them
    would never see two calls agree, and running them first is a barrier
    and a program of their own per token. Made here, between the grown ids
    and the read, the read's program computes them too, and the step reads
    device data. The call transformers makes next, with the same ids and
    keywords, gets them (the prepare wrapper, :func:`_same_call`); any
    other call makes its own."""
    g = _GENERATING
    step, kwargs = g.active, g.kwargs
    g.early = g.deferred = None
    if step is None or kwargs is None or g.preparing:
        return
    model = step._model()
    if model is None or not kwargs.get("use_cache", True):
        return
    if _DEFER_INPUTS and _prepare_deferred(input_ids, kwargs):
        return
    g.preparing = True
    try:
        inputs = model.prepare_inputs_for_generation(input_ids, next_sequence_length=1, **kwargs)
    finally:
        g.preparing = False
    # a view's key moves with its offset every token: a copy, run with the read
    inputs = {k: v.clone() if isinstance(v, Tensor) and v._steps else v for k, v in inputs.items()}
    g.early = (input_ids, (), 1, dict(kwargs), inputs)


_SLICED = ("input_ids", "position_ids", "token_type_ids")
"""The growing inputs ``prepare_inputs_for_generation`` cuts to the new
position (``[..., -1:]``) for a decoding step."""


def _dropped_after_prefill() -> tuple:
    """The keywords transformers' ``prepare_inputs_for_generation`` hands the
    model only in the prefill, with a cache (a vision-language model's
    ``mm_encoder_outputs``, its pixels): not a decoding step's inputs."""
    utils = sys.modules.get("transformers.generation.utils")
    return tuple(getattr(utils, "MULTIMODAL_INPUTS_TO_DROP_OUTSIDE_PREFILL", ()))


def _prepare_deferred(input_ids, kwargs) -> bool:
    """Make only the next decoding step's inputs that grow with the ids, for
    a decoding step that makes the rest in its replayed call; False (nothing
    made) where the keywords hold anything else.

    The next step's inputs are the new position of the ids and of the
    position ids (device data once the read's program has run), and
    transformers' 4-D attention mask, made op by op from the 2-D mask, the
    filled length and the cache's length: 16% of a replayed token's time
    when made here. The 2-D mask grows every token, so a step taking it
    would never replay; what the mask code reads of it is the same mask
    padded with zeros to the cache's length (``prepare_padding_mask``).
    That padded mask (made here once per generate() call, from the mask as
    it is then) is the step's argument instead: the step sets its new
    position, as transformers' ``torch.cat`` of ones does to the 2-D one
    (:func:`_wrap_update_kwargs` checks that it did), and calls
    ``prepare_inputs_for_generation`` inside, so the replay makes the 4-D
    mask (:meth:`_DecodingStep._forward`).

    An encoder-decoder model's ``attention_mask`` is its encoder's, the
    same every token, taken as it is, as are its encoder's states (the
    first of ``encoder_outputs``, :func:`_encoder_states`); its decoder's
    mask is made from the cache in the step (no ``decoder_attention_mask``)."""
    g = _GENERATING
    cache_name = _cache_name(kwargs)
    cache = kwargs.get(cache_name)
    layers = _static_layers(cache)
    if layers is None or not isinstance(input_ids, Tensor) or input_ids.dim() != 2:
        return False
    encoder = None
    if getattr(cache, "cross_attention_cache", None) is not None:
        encoder = _encoder_states(kwargs.get("encoder_outputs"))
        if encoder is None:
            return False
    mask = kwargs.get("attention_mask") if encoder is None else None
    dropped = _dropped_after_prefill()
    kwargs = {k: v for k, v in kwargs.items() if k not in dropped}
    for name, value in kwargs.items():
        if name in ("attention_mask", cache_name) or name in _SLICED:
            if name == "attention_mask" and value is not None and (not isinstance(value, Tensor) or value.dim() != 2):
                return False
            continue
        if isinstance(value, torch.Tensor):
            return False  # (another input that grows or changes: transformers' own preparation)
    filled = int(layers[0].cumulative_length)
    if mask is not None and mask.shape[-1] != filled + 1:
        return False
    sliced = {name: input_ids if name == "input_ids" else kwargs.get(name) for name in _SLICED}
    sliced = {name: value for name, value in sliced.items() if value is not None}
    if any(not isinstance(value, Tensor) or value.shape[-1] != filled + 1 for value in sliced.values()):
        return False
    inputs = {k: v for k, v in kwargs.items() if k not in _SLICED}
    for name, value in sliced.items():
        inputs[name] = _last_position(value)
    if encoder is not None:
        inputs["encoder_outputs"] = encoder  # (:func:`_prepared` hands the model its tuple form)
    if mask is not None:
        fixed = g.fixed
        if fixed is None or fixed[1] is not mask:
            size = layers[0].keys.shape[-2]
            fixed = g.fixed = [torch.nn.functional.pad(mask, (0, size - mask.shape[-1])), mask]
        inputs["attention_mask"] = fixed[0]
    g.deferred = (inputs["input_ids"], inputs.get("attention_mask"))
    g.early = (input_ids, (), 1, dict(kwargs), inputs)
    return True


def _encoder_states(outputs):
    """The encoder's states in an encoder-decoder model's ``encoder_outputs``
    (its first entry, all a decoding step reads of it: the cross-attention
    keys and values are in the cache), a lazy tensor; else None."""
    try:
        states = outputs[0]
    except (TypeError, KeyError, IndexError):
        return None
    return states if isinstance(states, Tensor) and states.dim() == 3 else None


def _last_position(t: Tensor) -> Tensor:
    """``t[..., -1:]`` as a tensor of its own (a view's capture key moves
    with its offset every token). The ids and position ids grow by
    ``torch.cat([t, new], -1)`` every token: where ``t``'s value is that
    concatenation and its last operand is the one new position, that value
    itself, with no op; else a copy of the slice (two ops per input per
    token, and a slice of the grown sequence's size in every token's graph)."""
    if not t._steps and t.dim() >= 1:
        handle = read(t)
        node = handle._value.node
        if node.op == "concatenate" and node.attrs.get("dim") == t.dim() - 1:
            group = node.operands[0] if len(node.operands) == 1 and type(node.operands[0]) is tuple \
                else node.operands
            last = group[-1]
            if last[0].types[last[1]].shape == (*t.shape[:-1], 1):
                return wrap(core.LazyTensor(last, handle.device), owned=True)
    return t[..., -1:].clone(memory_format=torch.contiguous_format)


def _cache_name(kwargs) -> str:
    """The keyword a decoding step's cache comes under (models take ``cache`` or ``past_key_values``)."""
    return "cache" if kwargs.get("cache") is not None else "past_key_values"


def _static_layers(cache):
    """The layers of ``cache`` when it is a static cache whose layers a
    captured decoding step can take (:meth:`_DecodingStep._plan`), else None;
    for an encoder-decoder model's cache, its decoder's self-attention
    layers where :func:`_cross_layers` takes its cross-attention ones."""
    if _cross_layers(cache) is None:
        return None
    layers = list(getattr(getattr(cache, "self_attention_cache", cache), "layers", None) or ())
    if not layers or not all(_takes(layer) for layer in layers):
        return None
    if len({int(layer.cumulative_length) for layer in layers}) != 1:
        return None
    return layers


def _cross_layers(cache):
    """An encoder-decoder ``cache``'s cross-attention layers where each is a
    static layer the first token filled (``is_updated``: every later step
    reads its keys and values as they are, and beam search reorders them),
    ``()`` for a cache of a decoder alone, else None."""
    cross = getattr(cache, "cross_attention_cache", None)
    if cross is None:
        return ()
    layers = list(getattr(cross, "layers", None) or ())
    updated = getattr(cache, "is_updated", None) or {}
    if not layers or not all(updated.get(i) for i in range(len(layers))) or not all(_takes(l) for l in layers):
        return None
    return layers


def _takes(layer) -> bool:
    """Whether a captured decoding step can take cache ``layer``'s tensors as arguments."""
    return (type(layer).__name__ == "StaticLayer" and getattr(layer, "is_initialized", False)
            and _static_layer_on_lazy(layer) and type(layer.values) is Tensor
            and not layer.keys._steps and not layer.values._steps)


def _same_call(early, input_ids, args, next_sequence_length, kwargs) -> bool:
    ids, args0, length, kwargs0, _ = early
    return (ids is input_ids and args == args0 and length == next_sequence_length and kwargs.keys() == kwargs0.keys()
            and all(kwargs[k] is v for k, v in kwargs0.items()))


def split_keywords(kwargs: dict, cache_name: str, keep_none: bool = True):
    """A captured step's model keywords, the cache's left out: ``(tensor
    keywords, their tensors, other keywords and values)``, or None where one
    is a CPU tensor or an unhashable value (traced op by op). A tensor that
    is a view is copied (its key would hold its offset, which moves every
    token). ``keep_none``: whether None values are keywords of the step."""
    names, tensors, static = [], [], []
    for name, value in kwargs.items():
        if name == cache_name or (value is None and not keep_none):
            continue
        if isinstance(value, Tensor):
            names.append(name)
            tensors.append(value.clone() if value._steps else value)
        elif isinstance(value, torch.Tensor):
            return None
        else:
            try:
                hash(value)
            except TypeError:
                return None
            static.append((name, value))
    return tuple(names), tuple(tensors), tuple(static)


class _DecodingStep:
    """A model's decoding step with a static cache, replayed as a captured
    call (:class:`~lazycore.frontends.torch.capture.Captured`).

    Traced per op, every token ran the whole model's Python (transformers'
    modules, every op's dispatch) to make the graph the barrier then found
    compiled already: 8-17x eager's time per token. With a static cache a
    decoding step's inputs keep their shapes, so the forward is captured:
    recorded at two tokens, then replayed (one ``call`` node, no module
    run) on the new ids, positions, mask and filled length. The cache's
    tensors are arguments, updated in place, so a new generate() call's
    cache replays the same recording; the filled length, a CPU tensor in
    each layer, is one device argument (:func:`_wrap_static_update` reads
    it) and grown on the CPU here, after the call, whether it ran or was
    replayed. Returns what the model returns, its cache the one given.

    transformers hands the decoding steps to ``get_compiled_call`` where it
    would compile them (:func:`_wrap_auto_compile`); any call whose inputs
    do not fit (not one new position, a value that is not a lazy tensor or
    a hashable Python value, a layer other than ``StaticLayer``) runs the
    model as before."""

    def __init__(self, model):
        self._model = weakref.ref(model)
        self.captured = Captured(self._forward)
        self.greedy = Captured(self._greedy_forward)
        """The whole greedy token (:func:`_greedy`): the step, its next token written in the ids."""
        self.beams = Captured(self._beam_forward)
        """The whole beam search token (:func:`_beams`): the step, the beams' bookkeeping, the cache's reorder."""
        self._out = None  # (the output's type, the names holding the cache) as the last traced call made it
        # (the cache of the call in progress is _GENERATING.cache: a generate() per thread)

    def __call__(self, tokens=None, ending=None, beams=None, **kwargs):
        model = self._model()
        g = _GENERATING
        deferred, g.deferred = g.deferred, None
        # inputs _prepare_deferred made: the step makes the rest (the 4-D mask) itself
        prepare = (deferred is not None and kwargs.get("input_ids") is deferred[0]
                   and kwargs.get("attention_mask") is deferred[1])
        plan = self._plan(kwargs)
        if plan is None:
            if prepare:  # (traced per op, as those inputs would have been)
                cache_name = _cache_name(kwargs)
                cache = kwargs[cache_name]
                length = int(getattr(cache, "self_attention_cache", cache).layers[0].cumulative_length)
                return model(**_prepared(model, kwargs, cache_name, length))
            return model(**kwargs)
        cache, cache_name, layers, names, tensors, static = plan
        # the filled length as the device holds it (the prompt's update grew it,
        # every step since grows it in place); else a parameter, uploaded
        now = int(layers[0].cumulative_length)
        held = getattr(layers[0], "_lazycore_length", None)
        length = held[0] if held is not None and held[1] == now else _parameter(layers[0].cumulative_length,
                                                                              tensors[0].device)
        # (an encoder-decoder model's cross-attention keys and values too: read, and reordered by beam search)
        stored = tuple(t for layer in (*layers, *_cross_layers(cache)) for t in (layer.keys, layer.values))
        # the inputs are made from the growing ids and mask, so the nodes that
        # make them differ at every token and no two traced calls agree: the
        # step reads device data. _prepare_early had them made by the last
        # read's program; else they run first (a program of their own)
        if not all(type(read(t)._value.node) is Data for t in tensors):
            core.mark_step(False)
        g.cache = cache
        try:
            if beams is not None:  # (_beams: made by _prepare_deferred or the step before)
                fields = self.beams(cache_name, names, tensors, length, stored, static, beams)
            elif tokens is not None:  # (_greedy: made by _prepare_deferred or the step before)
                fields = self.greedy(cache_name, names, tensors, length, stored, static, tokens, ending)
            else:
                fields = self.captured(cache_name, names, tensors, length, stored, static, prepare)
        finally:
            g.cache = None
        for layer in layers:
            layer.cumulative_length.add_(1)
        layers[0]._lazycore_length = (length, now + 1)
        if tokens is not None or beams is not None:
            return fields
        kind, holding = self._out
        return kind(**fields, **{name: cache for name in holding})

    def _model_step(self, cache_name, names, tensors, length, static, prepare=True):
        """The model's call on the step's inputs (``prepare``: through
        :func:`_prepared`), the static cache's filled length ``length`` then
        grown by one in place (the layers read copies of it: the new token's
        place); ``(out, given, cache)``."""
        g = _GENERATING
        cache, g.length = g.cache, length
        try:
            model = self._model()
            given = {**dict(zip(names, tensors)), cache_name: cache, **dict(static)}
            out = model(**(_prepared(model, given, cache_name, length) if prepare else given))
        finally:
            g.length = None
        length.add_(1)
        return out, given, cache

    def _forward(self, cache_name, names, tensors, length, stored, static, prepare=False):
        out, _, cache = self._model_step(cache_name, names, tensors, length, static, prepare)
        # the cache goes back as the one given (a replay would give the recorded call's)
        holding = tuple(k for k, v in out.items() if v is cache)
        self._out = (type(out), holding)
        return {k: v for k, v in out.items() if k not in holding}

    def _greedy_forward(self, cache_name, names, tensors, length, stored, static, tokens, ending=None):
        """A greedy token after the first (:func:`_greedy`): the decoding
        step on inputs :func:`_prepare_deferred` made, its next token as
        transformers' ``_sample`` picks it (the last position's logits as
        float32, their argmax; with an end token, ``ending``, the pad token
        in finished rows, and the rows' flags updated in place) written into
        the ids ``tokens`` at its place (the filled length), and the next
        step's new ids and position ids."""
        out, given, _ = self._model_step(cache_name, names, tensors, length, static)
        logits = out.logits[:, -1].to(copy=True, dtype=torch.float32, device=tokens.device)
        new = torch.argmax(logits, dim=-1, keepdim=True)  # (a view of it would keep its base alive, unseen)
        if ending is not None:
            new, unfinished = _pad_finished(new, *ending)
            ending[0].copy_(unfinished)
        # (an index_copy_ keeps its index for the index check: a tensor the replay would not make)
        place = torch.arange(tokens.shape[-1], device=tokens.device) == length
        tokens.copy_(torch.where(place, new, tokens))
        nxt = {"input_ids": new}
        position = given.get("position_ids")
        if position is not None:  # (_update_model_kwargs_for_generation's next position)
            nxt["position_ids"] = position + 1  # (its arange(1) + position[..., -1:] + 1: the same values)
        return nxt

    def _beam_forward(self, cache_name, names, tensors, length, stored, static, beams):
        """A beam search token after the first (:func:`_beams`): the decoding
        step on inputs :func:`_prepare_deferred` made, the beams'
        bookkeeping on its log-probabilities as ``_beam_search`` does it
        (:func:`_beam_update`, the token's place the filled length), the
        cache's keys and values reordered in place by the beams' index
        (``reorder_cache``'s ``index_select``), and the next step's ids and
        position ids."""
        out, given, _ = self._model_step(cache_name, names, tensors, length, static)
        spec, state = beams
        logits = out.logits[:, -1, :].to(copy=True, dtype=torch.float32, device=state[0].device)
        del out
        log_probs = torch.nn.functional.log_softmax(logits, dim=-1)
        beam_idx, ids = _beam_update(self._model(), state, log_probs, length, spec, _GENERATING.processors)
        for t in stored:
            t.copy_(t.index_select(0, beam_idx.to(t.device)))
        nxt = {"input_ids": ids}
        position = given.get("position_ids")
        if position is not None:  # (_update_model_kwargs_for_generation's next position: beams share their row's)
            nxt["position_ids"] = position + 1
        return nxt

    def _plan(self, kwargs):
        """``(cache, its keyword, its layers, tensor keywords, tensors, other
        keywords and values)`` for a decoding step that can be captured, else None."""
        cache_name = _cache_name(kwargs)
        cache = kwargs.get(cache_name)
        layers = _static_layers(cache)
        ids = kwargs.get("input_ids")
        if layers is None or not isinstance(ids, Tensor) or ids.dim() != 2 or ids.shape[1] != 1:
            return None
        split = split_keywords(kwargs, cache_name)
        return None if split is None else (cache, cache_name, layers) + split


def _prepared(model, given: dict, cache_name: str, length) -> dict:
    """The model's inputs for a decoding step whose inputs
    :func:`_prepare_deferred` made (``given``, with the cache and the
    forward's keywords), as ``prepare_inputs_for_generation`` makes them:
    the padded attention mask's new position set (the filled length
    ``length``: a device value in a captured step), then transformers' 4-D
    mask from it."""
    g = _GENERATING
    given = dict(given)
    ids = given.pop("input_ids")
    fixed = given.get("attention_mask")
    if getattr(model.config, "is_encoder_decoder", False):
        fixed = None  # (the encoder's mask, as it is)
        if isinstance(given.get("encoder_outputs"), Tensor):
            # the encoder's states as _prepare_deferred keeps them: the
            # model's tuple form of its encoder's output (a step argument)
            given["encoder_outputs"] = (given["encoder_outputs"],)
    if fixed is not None:
        positions = torch.arange(fixed.shape[-1], device=fixed.device)
        fixed.masked_fill_(positions == length, 1)
        if g.zeros is not None:
            # its last position is never filled (_wrap_static_cache): the
            # mask code's fast_all checks are False without a read
            g.zeros[read(fixed)._value.node] = True
    g.preparing = True
    try:
        return model.prepare_inputs_for_generation(ids, next_sequence_length=1, **given)
    finally:
        g.preparing = False


_DECODERS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
"""Model -> its :class:`_DecodingStep` (its recordings kept with it across generate() calls)."""


def decoding_steps(model) -> tuple[int, int]:
    """``(traced, replayed)``: how many of ``model``'s decoding steps were
    traced and how many replayed a captured call so far (:class:`_DecodingStep`)."""
    step = _DECODERS.get(model)
    if step is None:
        return (0, 0)
    calls = (step.captured, step.greedy, step.beams)  # (greedy decoding's and beam search's whole tokens)
    return sum(c.traces for c in calls), sum(c.replays for c in calls)


def _decodable(model, model_kwargs, encoder_decoder: bool = False) -> bool:
    """Whether ``model``'s decoding steps with the cache in ``model_kwargs``
    can be a :class:`_DecodingStep`: a static cache on a lazy device; for an
    encoder-decoder model (``encoder_decoder``: asked by :func:`_beams`) an
    ``EncoderDecoderCache`` of two static ones."""
    cache = model_kwargs.get("cache")
    if cache is None:
        cache = model_kwargs.get("past_key_values")
    if getattr(model.config, "is_encoder_decoder", False):
        if not encoder_decoder or type(cache).__name__ != "EncoderDecoderCache" \
                or type(cache.cross_attention_cache).__name__ != "StaticCache":
            return False
        cache = cache.self_attention_cache
    return type(cache).__name__ == "StaticCache" and isinstance(next(model.parameters(), None), Tensor)


def _wrap_auto_compile(valid):
    @functools.wraps(valid)
    def wrapped(self, model_kwargs, generation_config):
        answer = valid(self, model_kwargs, generation_config)
        if not answer and settings.generation_replay and _GENERATING.depth \
                and _decodable(self, model_kwargs, _GENERATING.beams) \
                and not getattr(generation_config, "disable_compile", False):  # (asked for the plain forward)
            # the decoding loop asks get_compiled_call for the step next (_wrap_compiled_call)
            step = _DECODERS.get(self)
            if step is None:
                step = _DECODERS[self] = _DecodingStep(self)
            _GENERATING.decoder = _GENERATING.active = step
            ceiling = _buckets.fix(None)
            # the last token's _prepare_early grows the ids and mask to
            # max_length: a bucket that size would leave them unpadded, a
            # graph (and a program) of their own
            _buckets.fix(ceiling + 1 if ceiling is not None else None)
            return True
        return answer

    wrapped.__lazycore_generation__ = True
    return wrapped


def _wrap_compiled_call(get_compiled_call):
    @functools.wraps(get_compiled_call)
    def wrapped(self, *args, **kwargs):
        step = _GENERATING.decoder
        if step is not None and step._model() is self:
            _GENERATING.decoder = None
            return step
        return get_compiled_call(self, *args, **kwargs)

    wrapped.__lazycore_generation__ = True
    return wrapped


def _patch_compiled_call() -> None:
    wrap_once(getattr(sys.modules.get(_MODELS), "PreTrainedModel", None), "get_compiled_call", _wrap_compiled_call)


def _patch(module, also=()) -> None:
    mixin = getattr(module, "GenerationMixin", None)
    for name, wrap in (("prepare_inputs_for_generation", _wrap), ("generate", _wrap_generate),
                       ("_prepare_generated_length", _wrap_length), ("_prepare_static_cache", _wrap_static_cache),
                       ("_update_model_kwargs_for_generation", _wrap_update_kwargs),
                       ("_valid_auto_compile_criteria", _wrap_auto_compile), ("_sample", _wrap_sample),
                       ("_get_top_k_continuations", _wrap_top_k), ("_beam_search", _wrap_beam_search)):
        wrap_once(mixin, name, wrap)
    static = getattr(sys.modules.get(_CACHES), "StaticLayer", None)
    for name, wrap_method in (("update", _wrap_static_update), ("get_seq_length", _wrap_seq_length),
                              ("reorder_cache", _wrap_static_reorder)):
        wrap_once(static, name, wrap_method)
    crit = sys.modules.get(_CRITERIA)
    check = getattr(module, "StopCheck", None)
    for cls, wrap_call in ((getattr(crit, "MaxLengthCriteria", None), _wrap_max_length),
                           (getattr(crit, "StoppingCriteriaList", None), _wrap_criteria_list),
                           (check, _wrap_stop_check)):
        wrap_once(cls, "__call__", wrap_call)
    for patch in also:  # (frontends/torch/prompt_step.py: the prompt's forward, replayed per prompt shape)
        patch(mixin)


class _Finder(importlib.abc.MetaPathFinder):
    """Patches ``transformers.generation.utils`` once it is imported."""

    def __init__(self, also=()):
        self.also = also

    def find_spec(self, name, path, target=None):
        if name != _TARGET:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        exec_module = loader.exec_module

        def patched(module):
            exec_module(module)
            _patch(module, self.also)

        loader.exec_module = patched
        return spec


def install(also=()) -> None:
    """Wrap transformers' ``prepare_inputs_for_generation`` now or when it is imported;
    ``also``: more patches of ``GenerationMixin``, each called with it."""
    global _installed
    if _installed:
        return
    _installed = True
    module = sys.modules.get(_TARGET)
    if module is not None:
        _patch(module, also)
    else:
        sys.meta_path.insert(0, _Finder(also))
