"""The step log's key written as nodes are made, against the pass at the barrier it replaced.

    python benchmarks/step_log_key.py [--model Llama] [--rounds 16]
    python benchmarks/step_log_key.py --check before|after [--model Llama]   # 8 steps: losses, sha256, compiles

docs/dev/replay.md ("The step log's key") quotes it. On one of model_zoo.py's tiny
transformers training steps (benchmark 14: transformers, random init, AdamW),
the two ways of keying step plans alternate step by step in one process
(after warm-up, ``thread_time``, medians): *before*, the log numbered each node
as it was made and the barrier encoded it in one pass (``StepLog.encode`` as
of session 31, kept here as it was); *after*, making a node also writes its
operands to the key (``Node.__init__``), and the barrier moves only the old
nodes it used into the log. Reported per step: the tracing (the step's Python
up to the barrier, per node made), the barrier (``mark_step``) and the key
(``stepplans.fingerprint``) itself.

``--check``: one form only, cache off, 8 steps: the losses in hex, a sha256 of
the parameters and the compiles of each step, to compare between the forms.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import os
import pathlib
import statistics
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from lazycore.ir import graph  # noqa: E402
from lazycore.ir.graph import LOG, Node, StepLog, Value  # noqa: E402

# --- before: the log's pass at the barrier (session 31), as it was ---------------
# Compiled as lazycore's own code (its file name): a captured step (the
# optimizer's, frontends/torch/optim_replay.py) watches the attributes user
# code reads, and would take these functions for the user's.
_BEFORE_SOURCE = '''
def _before_init(self, op, operands, attrs, types, digest, loc=None):
    self.op = op
    self.operands = operands
    self.attrs = attrs
    self.types = types
    self.digest = digest
    self.loc = loc
    self.mark = None
    log = LOG
    if log.on and self.log_when_made:
        nodes = log.nodes
        n = len(nodes)
        self.seq = log.start + n
        nodes.append(self)
        if n >= STEP_LOG_LIMIT:
            log.stop()
    else:
        self.seq = -1


def _before_reset(self):
    self.start += len(self.nodes) + 1
    self.nodes = []
    self.on = True


def _before_stop(self):
    _before_reset(self)
    self.on = False


def _before_old(self, node):
    s = node.seq = self.start + len(self.nodes)
    self.nodes.append(node)
    return s


def _before_encode(self, outputs):
    start = self.start
    nodes = self.nodes
    outs = []
    for v in outputs:
        n = v[0]
        s = n.seq
        if s < start:
            s = _before_old(self, n)
        outs.append(s - start)
        outs.append(v[1])
    edges = []
    put = edges.append
    i = 0
    while i < len(nodes):
        for o in nodes[i].operands:
            if type(o) is Value:
                n = o[0]
                s = n.seq
                if s < start:
                    s = _before_old(self, n)
                put(s - start)
                put(o[1])
            else:
                put(-2 - len(o))
                for v in o:
                    n = v[0]
                    s = n.seq
                    if s < start:
                        s = _before_old(self, n)
                    put(s - start)
                    put(v[1])
        put(-1)
        i += 1
    return tuple(outs), tuple(map(_DIGEST, nodes)), tuple(edges)


def _before_put_instead(self, node, other):
    i = node.seq - self.start
    if 0 <= i < len(self.nodes) and self.nodes[i] is node:
        self.nodes[i] = other
        other.seq = node.seq
'''
_before = {"LOG": LOG, "Value": Value, "STEP_LOG_LIMIT": graph.STEP_LOG_LIMIT, "_DIGEST": graph._DIGEST}
exec(compile(_BEFORE_SOURCE, graph.__file__, "exec"), _before)
_before_init, _before_reset, _before_stop, _before_encode, _before_put_instead = (
    _before[k] for k in ("_before_init", "_before_reset", "_before_stop", "_before_encode", "_before_put_instead"))


_AFTER = {"init": Node.__init__, "reset": StepLog.reset, "stop": StepLog.stop, "encode": StepLog.encode,
          "put_instead": StepLog.put_instead}
_BEFORE = {"init": _before_init, "reset": _before_reset, "stop": _before_stop, "encode": _before_encode,
           "put_instead": _before_put_instead}
_mode = ["after"]


def use(mode: str) -> None:
    """Key step plans the ``mode`` way from the next step on (call between
    steps: right after a barrier, whose reset was the last mode's)."""
    if mode == _mode[0]:
        return
    f = _BEFORE if mode == "before" else _AFTER
    Node.__init__ = f["init"]
    StepLog.reset, StepLog.stop, StepLog.encode, StepLog.put_instead = (f["reset"], f["stop"], f["encode"],
                                                                        f["put_instead"])
    if mode == "after":  # room below the start for this step's old nodes
        LOG.start += len(LOG.nodes) + graph._GAP
        LOG.nodes, LOG.olds, LOG.moves = [], [], []
        LOG.edges = []
        LOG.put = LOG.edges.append
    _mode[0] = mode


def _variant(name: str, total: int):
    import torch

    import lazycore.torch as ltorch
    import model_zoo
    import real_models

    work = next(w for w in model_zoo.tiny_transformers() if w.name.lower().startswith(name.lower()))
    torch.manual_seed(0)
    proto = work.build()
    host = work.batches(torch.Generator().manual_seed(1), 4)
    dev = ltorch.device()
    return work, real_models.Variant(work, copy.deepcopy(proto).to(dev),
                                     [{k: v.to(dev) for k, v in b.items()} for b in host], total)


def check(args) -> int:
    import torch

    import lazycore
    import lazycore.torch as ltorch

    torch.set_num_threads(1)
    use(args.check)
    work, lazy = _variant(args.model, 8)
    ltorch.mark_step(wait=True)
    for i in range(8):
        before = lazycore.metrics.counters()["compiles"]
        lazy.one()
        ltorch.mark_step(wait=True)
        print(f"step {i}: loss {float(lazy.last.cpu()).hex()} compiles {lazycore.metrics.counters()['compiles'] - before}")
    h = hashlib.sha256()
    for k, v in lazy.model.state_dict().items():
        h.update(k.encode())
        h.update(v.detach().cpu().contiguous().numpy().tobytes())
    print(f"{work.name} ({args.check}): parameters sha256 {h.hexdigest()}")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="Llama")
    p.add_argument("--rounds", type=int, default=16, help="alternated pairs of steps")
    p.add_argument("--check", choices=("before", "after"))
    args = p.parse_args(argv)
    if args.check:
        return check(args)

    import torch

    import lazycore.torch as ltorch
    from lazycore.runtime import stepplans

    torch.set_num_threads(1)
    work, lazy = _variant(args.model, 8 + 2 * args.rounds)
    ltorch.mark_step(wait=True)
    clock = time.thread_time
    got = {m: {"trace": [], "per node": [], "barrier": [], "key": [], "nodes": []} for m in ("before", "after")}
    fingerprint = stepplans.fingerprint
    keyed = [0.0]

    def timed(pending):
        t = clock()
        fp = fingerprint(pending)
        keyed[0] = clock() - t
        return fp

    stepplans.fingerprint = timed
    try:
        order = ["before", "after"] * 4 + [m for r in range(args.rounds)
                                           for m in (("before", "after") if r % 2 else ("after", "before"))]
        for i, mode in enumerate(order):
            use(mode)
            t = clock()
            lazy.one()
            traced = clock() - t
            made = len(LOG.nodes)
            t = clock()
            ltorch.mark_step(wait=True)
            barrier = clock() - t
            if i >= 8:
                g = got[mode]
                g["trace"].append(traced)
                g["per node"].append(traced / made)
                g["barrier"].append(barrier)
                g["key"].append(keyed[0])
                g["nodes"].append(made)
    finally:
        stepplans.fingerprint = fingerprint
        use("after")
    print(f"{work.name}: {statistics.median(got['after']['nodes']):.0f} nodes made a step, {args.rounds} alternated "
          f"pairs of steps, thread_time medians; load average {os.getloadavg()[0]:.1f}")
    for k, unit, scale in (("trace", "ms", 1e3), ("per node", "us", 1e6), ("barrier", "ms", 1e3), ("key", "ms", 1e3)):
        b, a = statistics.median(got["before"][k]), statistics.median(got["after"][k])
        ratios = sorted(x / y for x, y in zip(got["after"][k], got["before"][k]))
        print(f"{k:9} before {b * scale:8.3f} {unit}  after {a * scale:8.3f} {unit}  after/before {a / b:5.3f} "
              f"(pairwise median {statistics.median(ratios):5.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
