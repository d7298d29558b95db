"""``torch.lstm``, ``gru``, ``rnn_tanh`` and ``rnn_relu`` on lazy tensors: one loop per layer.

Off the CPU and CUDA, eager's recurrent layers are C++ composites
(aten/src/ATen/native/RNN.cpp) that call their cell's ops once per time step,
the input's product included. A training step of ``LSTM(16, 16,
num_layers=2)`` over 32 frames (SGD, a linear head) reached the lazy device as
3,816 dispatched ops, and its program held every frame unrolled (6,855 nodes,
23 s of XLA compile; Encodec's, 80-180 s, issue 40).

Here each layer (each direction) is the CPU's ``FullLayer``: the input's
product for every step at once (one GEMM), then one ``scan`` over the time
steps (:mod:`..control`: its backward is a second loop over the steps in
reverse, with the cell's own autograd formulas) whose body is RNN.cpp's cell
given that product, op for op and in its order (the hidden state's
``linear``, the same in-place adds, gates and projection for ``proj_size``).
The layers' stacking, the dropout between layers, the reversed direction
(its steps and outputs reversed, no arithmetic) and ``batch_first`` are
``apply_layer_stack``'s and ``FullBidirectionalLayer``'s. Eager's CPU runs
GRU and plain RNN layers as this same algorithm (its float32 LSTM as oneDNN's
kernel): tests/torch/test_recurrent_loops.py holds the four to eager's CPU
composite, options and gradients included. The cell is a pure scan step
(:func:`..control.pure_step`): its loop bodies are traced at the first call
only. The same step dispatches 348 ops, its first step takes 1.3 s against
24, and it runs traced in 5.0 ms against 73, captured in 1.2 ms against 2.2
(eager: 1.5 ms; load ~1).

Packed sequences (``lstm.data``: a CPU batch size per step) run the same
loops over the batch laid out by steps (:mod:`.packed`): each layer is the
CPU's ``PackedLayer``, the input's product for every packed element at once,
then the loop, in which a sequence that has ended (or, reversed, not begun)
keeps its states; the packed outputs are looked up from the loop's. The
loops run the longest length, or that length's bucket once it varies at the
user's line, so batches of other lengths share their programs.

Anything the loops do not cover runs the composite as before: arguments not
all lazy tensors of one device, an input that is not 3-d (2-d packed) or is
empty, shapes or types the composite would refuse (its error, at the user's
call). Under ``torch.inference_mode`` autograd's keys are skipped, and these
kernels with them: the dispatcher runs them for the ops reached below
autograd (:data:`KERNELS`).
"""

from __future__ import annotations

import functools

import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F
from torch._higher_order_ops.scan import scan_op

from lazycore.ir.memo import Memo

from ..control import pure_step
from ..tensor import Tensor
from . import packed as _packed

aten = torch.ops.aten
_COMPOSITE = torch._C.DispatchKey.CompositeImplicitAutograd


def _lstm_cell(h, c, x, w_hh, b_hh=None, w_hr=None):
    # LSTMCell of RNN.cpp, its input's product pre-computed (``x``) as on the CPU
    gates = F.linear(h, w_hh, b_hh).add_(x)
    i, f, g, o = gates.unsafe_chunk(4, 1)
    i = i.sigmoid_()
    f = f.sigmoid_()
    g = g.tanh_()
    o = o.sigmoid_()
    cy = (f * c).add_(i * g)
    hy = o * cy.tanh()
    if w_hr is not None:
        hy = hy.matmul(w_hr.t())
    return hy, cy


def _gru_cell(h, x, w_hh, b_hh=None):
    # GRUCell of RNN.cpp, pre-computed input
    ig = x.unsafe_chunk(3, 1)
    hg = F.linear(h, w_hh, b_hh).unsafe_chunk(3, 1)
    reset = hg[0].add_(ig[0]).sigmoid_()
    update = hg[1].add_(ig[1]).sigmoid_()
    new = ig[2].add(hg[2].mul_(reset)).tanh_()
    return (h - new).mul_(update).add_(new)


def _simple_cell(nonlinearity, h, x, w_hh, b_hh=None):
    # SimpleCell of RNN.cpp, pre-computed input
    return nonlinearity(F.linear(h, w_hh, b_hh).add_(x))


_STEPS = Memo("torch.recurrent_steps", 16)
"""A cell and its weights' layout -> its scan step: one object per kind, so
that its traced loop bodies serve every call (:func:`..control.pure_step`)."""


def _step(cell, layout: tuple, packed: bool):
    """The scan step of ``cell`` with the weights ``layout`` says are
    present; ``packed``: of a packed batch, whose steps also take which
    sequences are live (the others keep their states)."""
    step = _STEPS.get((cell, layout, packed))
    if step is None:
        if cell is _lstm_cell:
            step = pure_step(functools.partial(_lstm_packed_step if packed else _lstm_step, layout))
        else:
            step = pure_step(functools.partial(_one_state_packed_step if packed else _one_state_step, cell, layout))
        _STEPS.put((cell, layout, packed), step)
    return step


def _lstm_step(layout, h, c, x, *weights):
    hy, cy = _lstm_cell(h, c, x, *_placed(layout, weights))
    return [hy, cy, hy]


def _one_state_step(cell, layout, h, x, *weights):
    hy = cell(h, x, *_placed(layout, weights))
    return [hy, hy]


# A packed batch's step: RNN.cpp's PackedLayer narrows the states to the
# sequences still running and keeps the finished ones' aside; here every
# sequence runs the cell and a finished one (or one not yet started, in the
# reversed direction) keeps its state: the same values on each sequence.

def _lstm_packed_step(layout, h, c, x, live, *weights):
    hy, cy = _lstm_cell(h, c, x, *_placed(layout, weights))
    return [torch.where(live, hy, h), torch.where(live, cy, c), hy]


def _one_state_packed_step(cell, layout, h, x, live, *weights):
    hy = cell(h, x, *_placed(layout, weights))
    return [torch.where(live, hy, h), hy]


def _placed(layout: tuple, weights: tuple) -> list:
    """The cell's weight arguments (``w_hh, b_hh, w_hr``, None where absent)
    from the tensors present."""
    it = iter(weights)
    return [next(it) if present else None for present in layout]


def _layer(step, states: list, x, weights: list, reverse: bool):
    """One layer in one direction: the input's product for every step at
    once (RNN.cpp's ``FullLayer`` on the CPU: one GEMM), then ``step``
    scanned over its first dimension; the outputs in time order and the
    final states."""
    w_ih, w_hh, b_ih, b_hh, w_hr = weights
    x = F.linear(x, w_ih, b_ih)
    weights = [w for w in (w_hh, b_hh, w_hr) if w is not None]
    if reverse:  # (RNN.cpp reverses the steps' list and the outputs' list: no arithmetic)
        x = x.flip(0)
    *final, ys = scan_op(step, states, [x], weights)
    return (ys.flip(0) if reverse else ys), final


def _packed_layer(step, states: list, data, weights: list, reverse: bool, layout: tuple):
    """One layer in one direction over a packed batch: RNN.cpp's
    ``PackedLayer`` (``ReversedPackedLayer``) on the CPU, the input's product
    for every element at once; the loop runs over the batch laid out by
    steps (``layout``: :func:`.packed.unpacking`'s positions and live mask,
    :func:`.packed.packed_rows`), each sequence reversed within its own
    length in the reversed direction. The packed outputs and the final states."""
    index, live, rows = layout
    w_ih, w_hh, b_ih, b_hh, w_hr = weights
    span, batch = live.shape[:2]
    x = _packed.take_rows(F.linear(data, w_ih, b_ih), index).reshape(span, batch, -1)
    weights = [w for w in (w_hh, b_hh, w_hr) if w is not None]
    if reverse:
        x, live = x.flip(0), live.flip(0)
    *final, ys = scan_op(step, states, [x, live], weights)
    if reverse:
        ys = ys.flip(0)
    return _packed.take_rows(ys.reshape(span * batch, -1), rows), final


def _layout(per: int) -> tuple[bool, bool]:
    """Whether a layer's ``per`` parameters (``w_ih, w_hh[, b_ih, b_hh][, w_hr]``)
    hold biases and a projection."""
    return per >= 4, per in (3, 5)


def _covered(input, states: list, params: list, num_layers: int, dirs: int, rank: int) -> int | None:
    """The parameters per layer and direction, when the loops cover this
    call (an input of ``rank`` dimensions); None where the composite runs
    (forward-mode AD included: a loop's autograd has no forward formula)."""
    tensors = [input, *states, *params]
    if not all(isinstance(t, Tensor) for t in tensors) or len({t.device for t in tensors}) != 1:
        return None
    if fwAD._current_level >= 0 and any(fwAD.unpack_dual(t).tangent is not None for t in tensors):
        return None
    if input.dim() != rank or input.numel() == 0 or num_layers < 1 or len(params) % (num_layers * dirs):
        return None
    per = len(params) // (num_layers * dirs)
    return per if 2 <= per <= 5 else None


def _shapes_fit(input, states, params, num_layers, dirs, gates, per, steps, batch) -> bool:
    """Whether every weight and state has the shape the composite expects
    (else the composite runs and raises its own error)."""
    if params[1].dim() != 2 or params[1].shape[0] % gates:
        return False
    hidden = params[1].shape[0] // gates
    biases, proj = _layout(per)
    out = params[per - 1].shape[0] if proj and params[per - 1].dim() == 2 else hidden
    width = input.shape[-1]
    for layer in range(num_layers):
        for d in range(dirs):
            w = params[(layer * dirs + d) * per:(layer * dirs + d + 1) * per]
            want = [(gates * hidden, width), (gates * hidden, out)]
            if biases:
                want += [(gates * hidden,), (gates * hidden,)]
            if proj:
                want.append((out, hidden))
            if [tuple(t.shape) for t in w] != want or any(t.dtype != input.dtype for t in w):
                return False
        width = out * dirs
    sizes = [out] + ([hidden] if len(states) == 2 else [])
    return steps > 0 and all(tuple(s.shape) == (num_layers * dirs, batch, n) and s.dtype == input.dtype
                             for s, n in zip(states, sizes))


def _weights(p) -> list:
    """``w_ih, w_hh, b_ih, b_hh, w_hr`` (None where absent) of one layer's parameters."""
    biases, proj = _layout(len(p))
    return [p[0], p[1], p[2] if biases else None, p[3] if biases else None, p[-1] if proj else None]


def _stack(layer_of, x, states, params, num_layers, dropout, train, dirs, per):
    """RNN.cpp's ``apply_layer_stack`` over layers of loops (``layer_of``:
    :func:`_layer`'s or :func:`_packed_layer`'s): the output and each
    state's finals stacked over layers and directions."""
    per_state = [s.unbind(0) for s in states]
    finals: list[list] = [[] for _ in states]
    for layer in range(num_layers):
        outs = []
        for d in range(dirs):
            k = layer * dirs + d
            ys, final = layer_of([s[k] for s in per_state], x, _weights(params[k * per:(k + 1) * per]), d == 1)
            outs.append(ys)
            for acc, f in zip(finals, final):
                acc.append(f)
        x = outs[0] if dirs == 1 else torch.cat(outs, outs[0].dim() - 1)
        if dropout != 0 and train and layer < num_layers - 1:
            x = torch.dropout(x, dropout, True)
    return x, [torch.stack(f, 0) for f in finals]


def _kernel(op, cell, gates: int, packed: bool):
    """``op``'s kernel above autograd: the loops where :func:`_covered` and
    :func:`_shapes_fit` take the call (an LSTM's two states and projection,
    the other cells' one state), else the composite. ``packed``: the
    ``.data`` form, a packed batch and its CPU ``batch_sizes``."""
    lstm = cell is _lstm_cell

    def run(*args):
        if packed:
            input, batch_sizes, hx, params, has_biases, num_layers, dropout, train, bidirectional = args
            steps = _packed.host_steps(batch_sizes)
            fits = steps is not None and input.dim() >= 1 and input.shape[0] == steps.count
            span, batch = (steps.steps, steps.batch) if fits else (0, 0)  # (else the composite, its error)
        else:
            input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first = args
            span, batch = (input.shape[1], input.shape[0]) if batch_first else input.shape[:2]
        dirs = 2 if bidirectional else 1
        states, weights = (list(hx) if lstm else [hx]), list(params)
        per = None
        if len(states) == (2 if lstm else 1) and span:
            per = _covered(input, states, weights, num_layers, dirs, 2 if packed else 3)
        biases, proj = _layout(per) if per is not None else (None, None)
        if (per is None or biases != bool(has_biases) or (proj and not lstm)
                or not _shapes_fit(input, states, weights, num_layers, dirs, gates, per, span, batch)):
            return op._op_dk(_COMPOSITE, *args)
        step = _step(cell, (True, biases, proj) if lstm else (True, biases), packed)
        if packed:
            dev = input.device
            given = _packed.counted(input)
            layout = (*_packed.unpacking(steps, _packed.span(steps), dev), _packed.packed_rows(steps, dev, given))
            out, finals = _stack(functools.partial(_packed_layer, step, layout=layout), input, states, weights,
                                 num_layers, dropout, train, dirs, per)
        else:
            x = input.transpose(0, 1) if batch_first else input
            out, finals = _stack(functools.partial(_layer, step), x, states, weights, num_layers, dropout, train, dirs,
                                 per)
            out = out.transpose(0, 1) if batch_first else out
        return (out, *finals)

    return run


_CELLS = (("lstm", _lstm_cell, 4), ("gru", _gru_cell, 3), ("rnn_tanh", functools.partial(_simple_cell, torch.tanh), 1),
          ("rnn_relu", functools.partial(_simple_cell, torch.relu), 1))
KERNELS = {op: _kernel(op, cell, gates, form == "data") for name, cell, gates in _CELLS for form in ("input", "data")
           for op in (getattr(getattr(aten, name), form),)}
"""Each op's kernel here (above autograd; the dispatcher's too, for the op
reached below autograd, as under ``torch.inference_mode``)."""

_LIB = torch.library.Library("aten", "IMPL")
for _op, _run in KERNELS.items():
    _LIB.impl(_op._schema.name.split("::")[1] + "." + _op._overloadname, _run, "AutogradLazy")
