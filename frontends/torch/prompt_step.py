"""The prompt's forward in transformers' ``generate()``, replayed per prompt shape.

Every generate() call on the lazy device ran the prompt's forward op by op
through transformers' modules, to make a graph whose program the barrier then
found compiled already: the first token of a warm call cost 2.3x eager's (a
tiny GPT-2's warm ``generate(max_new_tokens=1)``: 167 op dispatches; 30 with
the prompt replayed, transformers' setup and the first token's argmax). The decoding steps were
captured already (:class:`~lazycore.frontends.torch.generation._DecodingStep`);
this does the same for the prompt, per prompt shape.

With a static cache (what generate() on the lazy device decodes with where
the default cache is asked for and nobody sees it), the prompt's forward
(``GenerationMixin._prefill``: ``prepare_inputs_for_generation``, then the
model's call) is a function of the ids, the mask, the position ids and the
cache's keys and values (zeros, then written at the prompt's positions), so
it is captured (:class:`~lazycore.frontends.torch.capture.Captured`): its
arguments are the model's tensor inputs, the filled length (0, a device
value the step grows to the prompt's length, as the decoding steps take it)
and the cache's tensors, updated in place. Two things make that possible:

- The cache's tensors exist before the forward. transformers makes a new
  static cache every call, and its layers make their zeros at their first
  update, inside the forward (tensors a captured call would keep outside its
  results). They are made first here, as transformers does itself for a
  chunked prefill (``StaticCache.early_initialization`` with the model's
  ``_get_static_cache_init_shape()``): the same zeros, the same values.
- The step reads nothing. transformers' SDPA mask code (in
  ``prepare_inputs_for_generation`` for a static cache) asks whether it may
  skip the mask (``_ignore_causal_mask_sdpa``: ``fast_all`` of the padding
  mask, ``q_offset == 0`` of the static cache's length), reads of values a
  replay would bake. Inside the recorded step it is answered False, as
  transformers answers it under ``torch.compile`` (``is_tracing``): the
  mask is made and applied, the same attention (its masked scores are
  exactly zero after the softmax either way).

A recording is trusted once two traced calls agree (:mod:`.capture`): the
first call's forward is traced for its result, then once more on fresh
zeros for a cache and a fresh length (:func:`_confirm`), whose results are
dropped: nothing of it reaches a program. So the second generate() call
with the same prompt shape replays the prompt (no op dispatched for the
forward), with the same program. A call the capture refuses (a read in
another model's forward) is traced as a captured function's refused calls
are (the same work, op by op); a prompt the step does not take (a CPU
tensor or unhashable input, a layer other than ``StaticLayer``, a cache
transformers cannot initialize early, chunked prefill, an encoder-decoder
model) runs transformers' own ``_prefill``, as before; :data:`PROMPT_REPLAY`
False turns it off.
"""

from __future__ import annotations

import functools
import sys
import threading
import weakref

import torch

from lazycore.ir import events
from lazycore.ir.config import settings

from . import generation
from .capture import Captured
from .tensor import Tensor

PROMPT_REPLAY = True
"""Replay a captured prompt forward per prompt shape (False: traced op by op, as before)."""

_MASKS = "transformers.masking_utils"


class _Recording(threading.local):
    depth = 0
    """Prompt forwards being traced under capture on this thread."""


_RECORDING = _Recording()


class _PromptStep:
    """A model's prompt forward with a static cache, as a captured call."""

    def __init__(self, model):
        self._model = weakref.ref(model)
        self.captured = Captured(self._forward)
        # the model's parameters are known before the first call (a captured
        # call's first trace finds them, and a trace that found parameters is
        # compared with the next by its nodes only): the first call's two
        # traces compare as any two later ones do (:func:`_confirm`)
        for p in model.parameters():
            if p.requires_grad:
                self.captured._known[id(p)] = p
        self._out = None  # (the output's type, the names holding the cache), as the last traced call made it
        self.confirmed: set = set()
        """Prompt shapes whose first recording :func:`_confirm` traced again."""

    def _forward(self, cache_name, names, tensors, length, stored, static):
        """The prompt's inputs as ``prepare_inputs_for_generation`` makes them
        (positions, transformers' 4-D mask), then the model's call; the
        filled length ``length`` (0) grown to the prompt's length in place."""
        g = generation._GENERATING
        cache, g.length = g.cache, length
        kwargs = {**dict(zip(names, tensors)), cache_name: cache, **dict(static)}
        ids = kwargs.pop("input_ids")
        model = self._model()
        _RECORDING.depth += 1
        g.preparing = True  # (the prepare wrapper's per-call work is done outside: _prefill)
        try:
            inputs = model.prepare_inputs_for_generation(ids, next_sequence_length=ids.shape[1],
                                                         is_first_iteration=True, **kwargs)
        finally:
            g.preparing = False
        try:
            out = model(**inputs, return_dict=True)
        finally:
            _RECORDING.depth -= 1
            g.length = None
        length.add_(ids.shape[1])  # (the layers updated copies of it)
        # the cache goes back as the one given (a replay would give the recorded call's)
        holding = tuple(k for k, v in out.items() if v is cache)
        self._out = (type(out), holding)
        return {k: v for k, v in out.items() if k not in holding}


_STEPS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
"""Model -> its :class:`_PromptStep` (its recordings kept with it across generate() calls)."""


def prompt_steps(model) -> tuple[int, int]:
    """``(traced, replayed)``: how many of ``model``'s prompt forwards were
    traced (the confirming traces of :func:`_confirm` included) and how many
    replayed a captured call so far."""
    step = _STEPS.get(model)
    return (0, 0) if step is None else (step.captured.traces, step.captured.replays)


def wrap_prefill(prefill):
    """``GenerationMixin._prefill``, the prompt's forward replayed where it can be (:func:`_prefill`)."""

    @functools.wraps(prefill)
    def wrapped(self, input_ids, generation_config, model_kwargs, is_first_iteration=True, **kwargs):
        if not kwargs:
            out = _prefill(self, input_ids, generation_config, model_kwargs, is_first_iteration)
            if out is not None:
                return out
        return prefill(self, input_ids, generation_config, model_kwargs, is_first_iteration=is_first_iteration,
                       **kwargs)

    wrapped.__lazycore_generation__ = True
    return wrapped


def wrap_ignore_causal_mask(ignore):
    """transformers' ``_ignore_causal_mask_sdpa``: False inside a recorded prompt forward (see the module's text)."""

    @functools.wraps(ignore)
    def wrapped(*args, **kwargs):
        if _RECORDING.depth:
            return False
        return ignore(*args, **kwargs)

    wrapped.__lazycore_generation__ = True
    return wrapped


def _patch_masks() -> None:
    generation.wrap_once(sys.modules.get(_MASKS), "_ignore_causal_mask_sdpa", wrap_ignore_causal_mask)


def _prefill(model, input_ids, config, model_kwargs, first: bool):
    """The prompt's forward as ``_prefill`` makes it (the unchunked path),
    replayed or recorded; None (nothing done) where it is not taken."""
    g = generation._GENERATING
    if not (PROMPT_REPLAY and settings.generation_replay and g.depth and first) \
            or getattr(config, "prefill_chunk_size", None) is not None \
            or getattr(model.config, "is_encoder_decoder", False):
        return None
    if not isinstance(input_ids, Tensor) or input_ids.dim() != 2 or model_kwargs.get("inputs_embeds") is not None:
        return None
    cache_name = generation._cache_name(model_kwargs)
    layers = _empty_static_layers(model_kwargs.get(cache_name))
    # _prefill's slicing: a mask as long as the ids, so the whole prompt is new
    mask = model_kwargs.get("attention_mask")
    if layers is None or (mask is not None and (not isinstance(mask, Tensor) or mask.shape != input_ids.shape)):
        return None
    cache = model_kwargs[cache_name]
    plan = _plan(input_ids, model_kwargs, cache_name, cache)
    if plan is None or not _initialized(model, cache, layers, input_ids):
        return None
    names, tensors, static = plan
    _patch_masks()
    step = _STEPS.get(model)
    if step is None:
        step = _STEPS[model] = _PromptStep(model)
    # what the prepare wrapper does per call (outside the recording: Python work a replay would not redo)
    events.bump("generated_tokens")
    generation._learn_zeros(model_kwargs.get("attention_mask"))
    stored = tuple(t for layer in layers for t in (layer.keys, layer.values))
    length = generation._parameter(torch.tensor(0), input_ids.device)
    traces = step.captured.traces
    fields = _call(step, cache, (cache_name, names, tensors, length, stored, static))
    shape = tuple((name, tuple(t.shape)) for name, t in zip(names, tensors))
    if step.captured.traces > traces and step.captured.why is None and shape not in step.confirmed:
        step.confirmed.add(shape)
        _confirm(step, cache, layers, (cache_name, names, tensors, None, stored, static))
    n = input_ids.shape[1]
    for layer in layers:
        layer.cumulative_length.add_(n)
    # the filled length on the device, which the first decoding step takes on (no upload)
    layers[0]._lazycore_length = (length, n)
    kind, holding = step._out
    return kind(**fields, **{name: cache for name in holding})


def _call(step: _PromptStep, cache, args):
    g = generation._GENERATING
    g.cache = cache
    try:
        return step.captured(*args)
    finally:
        g.cache = None


def _confirm(step: _PromptStep, cache, layers, args) -> None:
    """Trace the prompt's forward once more, on fresh zeros for the cache's
    tensors and a fresh length, so that the recording of the call just made
    is confirmed (two traced calls agree) and the next call with this prompt
    shape replays it. Its results are dropped: no program computes them."""
    cache_name, names, tensors, _, stored, static = args
    scratch = tuple(torch.zeros_like(t) for t in stored)
    kept = [(layer.keys, layer.values) for layer in layers]
    for k, layer in enumerate(layers):
        layer.keys, layer.values = scratch[2 * k], scratch[2 * k + 1]
    try:
        length = generation._parameter(torch.tensor(0), tensors[0].device)
        _call(step, cache, (cache_name, names, tensors, length, scratch, static))
    finally:
        for layer, (keys, values) in zip(layers, kept):
            layer.keys, layer.values = keys, values


def _empty_static_layers(cache):
    """The layers of a static ``cache`` none of which holds a position yet
    (each a ``StaticLayer`` whose filled length is a CPU tensor at 0), else None."""
    layers = list(getattr(cache, "layers", None) or ())
    if not layers:
        return None
    for layer in layers:
        length = getattr(layer, "cumulative_length", None)
        if type(layer).__name__ != "StaticLayer" or not isinstance(length, torch.Tensor) \
                or isinstance(length, Tensor) or length.dim() != 0 or int(length) != 0:
            return None
    return layers


def _initialized(model, cache, layers, input_ids) -> bool:
    """Whether ``cache``'s layers hold their keys and values, made here where
    none does yet (``StaticCache.early_initialization``, as transformers
    makes them for a chunked prefill: the zeros the first update would make);
    the layers' filled lengths stay the CPU tensors they were."""
    if not all(getattr(layer, "is_initialized", False) for layer in layers):
        if any(getattr(layer, "is_initialized", False) for layer in layers):
            return False
        param = next(model.parameters(), None)
        shape = model._get_static_cache_init_shape() if hasattr(model, "_get_static_cache_init_shape") else None
        if shape is None or not isinstance(param, Tensor) or not hasattr(cache, "early_initialization"):
            return False
        lengths = [layer.cumulative_length for layer in layers]
        try:
            cache.early_initialization(batch_size=input_ids.shape[0], num_heads=shape[0], head_dim=shape[1],
                                       dtype=model.dtype, device=input_ids.device)
        finally:
            for layer, length in zip(layers, lengths):
                layer.cumulative_length = length
    return all(getattr(layer, "is_initialized", False) and type(layer.keys) is Tensor
               and type(layer.values) is Tensor and not layer.keys._steps and not layer.values._steps
               for layer in layers)


def _plan(input_ids, model_kwargs: dict, cache_name: str, cache):
    """``(tensor keywords, their tensors, other keywords and values)`` of the
    prompt's ids and ``_prefill``'s model keywords, the cache and None values
    left out; None where one is a CPU tensor or an unhashable value (traced
    op by op)."""
    return generation.split_keywords({"input_ids": input_ids, **model_kwargs}, cache_name, keep_none=False)


def patch(mixin) -> None:
    """Wrap ``GenerationMixin._prefill`` (called from the generation module's patch of transformers)."""
    generation.wrap_once(mixin, "_prefill", wrap_prefill)
