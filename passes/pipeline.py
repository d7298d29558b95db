"""Pipelines: a pipeline string as stages, and running them.

lazycore's passes are Python-defined MLIR passes. MLIR's textual pipeline
parser does not know Python passes, so a pipeline string is split here: each
element naming a lazycore pass becomes that pass, every other element (``cse``,
``canonicalize``, ``func.func(cse)``...) goes to MLIR's own parser. The same
names drive :func:`run_pipeline`, ``lazy-opt`` and the IR dumps.

A pipeline runs one element at a time, so compiling can stop after any stage
and a callback sees the IR after each one. The verifier runs after every pass
(``verify_each``; the runtime's compiles verify once, at the end).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable

from lazycore.dialect.mlir import ir, passmanager

from .catalog import PASSES, PassError, PassInfo, register_pass  # noqa: F401 - the registry's names, here too

DEFAULT_PIPELINE = ("lazy-canonicalize,cse,lazy-update-to-select,lazy-aliasing,lazy-to-stablehlo,canonicalize,"
                    "lazy-keep-roundings")
""":mod:`lazycore.passes.keep_roundings` last: a product a sum takes rounds on
its own, as eager's separate kernels round it (XLA's CPU backend would fuse
the two)."""
CHANNELS_LAST_PIPELINE = DEFAULT_PIPELINE.replace("lazy-to-stablehlo,", "lazy-to-stablehlo,lazy-channels-last,")
""":data:`DEFAULT_PIPELINE` with convolutions kept channels-last (:mod:`lazycore.passes.conv_layout`):
what a CPU device's barriers compile with unless a pipeline is configured (:func:`default_for`)."""
CHANNELS_LAST_PRODUCTS_PIPELINE = CHANNELS_LAST_PIPELINE.replace("lazy-channels-last,",
                                                                 "lazy-channels-last{products=true},")
""":data:`CHANNELS_LAST_PIPELINE` with 1x1 convolutions as matrix products (opt-in:
``lazycore.config.configure(pipeline=CHANNELS_LAST_PRODUCTS_PIPELINE)``; docs/guides/torch.md)."""


def default_for(platform: str | None) -> str:
    """The pipeline a barrier on ``platform`` (None: CPU) compiles with when
    ``lazycore.config`` names none: :data:`CHANNELS_LAST_PIPELINE` on the CPU,
    whose convolution library runs channels-last, :data:`DEFAULT_PIPELINE`
    elsewhere. ``lazycore.config.configure(pipeline=DEFAULT_PIPELINE)`` turns
    the channels-last programs off."""
    return CHANNELS_LAST_PIPELINE if platform in (None, "cpu") else DEFAULT_PIPELINE


def split_elements(pipeline: str) -> list[str]:
    """Top-level elements of a pipeline; unwraps ``builtin.module(...)``."""
    text = pipeline.strip()
    if text.startswith("builtin.module(") and text.endswith(")"):
        text = text[len("builtin.module(") : -1]
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "({":
            depth += 1
        elif ch in ")}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return [e for e in out if e]


def parse_options(text: str) -> dict[str, str]:
    """``key=value key2=a,b`` (MLIR's pass-option syntax) -> dict."""
    opts = {}
    for item in text.split():
        if "=" not in item:
            opts[item] = "true"
            continue
        k, v = item.split("=", 1)
        opts[k.strip()] = v.strip()
    return opts


def with_option(pipeline: str, name: str, key: str, value: str) -> str:
    """``pipeline`` with ``key=value`` on every ``name`` element that does not
    set ``key`` itself (the text's option wins: a user's pipeline says what it means)."""
    out = []
    for element in split_elements(pipeline):
        head, brace, rest = element.partition("{")
        if head.strip() == name and key not in (parse_options(rest.rstrip("}")) if brace else {}):
            inner = rest.rstrip("}").strip() if brace else ""
            element = f"{head.strip()}{{{(inner + ' ') if inner else ''}{key}={value}}}"
        out.append(element)
    return ",".join(out)


@dataclass(frozen=True)
class IRPrinting:
    """``mlir-opt``'s ``--mlir-print-ir-before-all``/``-after-all``: the IR
    around every pass, on stderr, under MLIR's own banner.

    Upstream elements print through their PassManager (one dump per MLIR
    pass, nested ones included, written by MLIR straight to the process's
    stderr); lazycore's passes print the module in the same form.
    """

    before: bool = False
    after: bool = False
    debug_info: bool = False
    generic: bool = False

    def dump(self, when: str, name: str, module_op: ir.Operation) -> None:
        text = module_op.get_asm(enable_debug_info=self.debug_info, print_generic_op_form=self.generic)
        sys.stderr.write(f"// -----// IR Dump {when} {name} //----- //\n{text}\n\n")
        sys.stderr.flush()

    def enable(self, pm) -> None:
        pm.enable_ir_printing(
            print_before_all=self.before,
            print_after_all=self.after,
            enable_debug_info=self.debug_info,
            print_generic_op_form=self.generic,
        )
        # MLIR writes to file descriptor 2 itself: what Python buffered goes first.
        sys.stderr.flush()


@dataclass
class Stage:
    name: str
    run: Callable[..., None]
    """``run(module_op, printing=None, verify=True)``; ``printing`` is an
    :class:`IRPrinting`; ``verify``: verify the module after the stage."""
    native: bool = False
    """An MLIR pass: C++ that assumes its input verifies."""


def make_stage(element: str, overrides: dict[str, dict] | None = None) -> Stage:
    """One pipeline element as a runnable stage.

    ``overrides`` maps a pass name to Python-side options (e.g. the runtime's
    donation plan for ``lazy-aliasing``) that win over the text's options.
    """
    _ensure_passes_loaded()
    name, _, rest = element.partition("{")
    name = name.strip()
    if name in PASSES:
        opts = parse_options(rest.rstrip("}")) if rest else {}
        info = PASSES[name]
        unknown = set(opts) - set(info.options)
        if unknown:
            raise PassError(f"pass '{name}' has no option(s) {', '.join(sorted(unknown))}")
        opts.update((overrides or {}).get(name, {}))
        run = info.factory(**opts)

        def run_python(module_op, printing=None, verify=True, run=run, name=name):
            if printing is not None and printing.before:
                printing.dump("Before", name, module_op)
            run(module_op)
            if verify:
                _verify(module_op, f"'{name}'")
            if printing is not None and printing.after:
                printing.dump("After", name, module_op)

        return Stage(name, run_python)

    def run_mlir(module_op, printing=None, verify=True, element=element):
        pm = passmanager.PassManager.parse(f"builtin.module({element})", context=module_op.context)
        pm.enable_verifier(verify)
        if printing is not None and (printing.before or printing.after):
            printing.enable(pm)
        pm.run(module_op)

    # Parse now, so a bad pipeline fails before anything runs.
    try:
        passmanager.PassManager.parse(f"builtin.module({element})")
    except (ValueError, ir.MLIRError) as e:
        known = ", ".join(sorted(PASSES))
        raise PassError(f"unknown pass or bad pipeline element '{element}' (lazycore passes: {known}): {e}") from None
    return Stage(element, run_mlir, native=True)


def _verify(module_op: ir.Operation, after: str) -> None:
    try:
        module_op.verify()
    except ir.MLIRError as e:
        raise PassError(f"IR does not verify after {after}: {e}") from None


def build_stages(pipeline: str = DEFAULT_PIPELINE, overrides: dict | None = None) -> list[Stage]:
    return [make_stage(e, overrides) for e in split_elements(pipeline)]


def run_pipeline(
    module: ir.Module | ir.Operation,
    pipeline: str = DEFAULT_PIPELINE,
    *,
    overrides: dict | None = None,
    stop_after: str | None = None,
    before_each: Callable[[str, ir.Operation], None] | None = None,
    after_each: Callable[[str, ir.Operation], None] | None = None,
    print_ir: IRPrinting | None = None,
    verify_each: bool = True,
) -> None:
    """Run ``pipeline`` on ``module`` in place.

    ``stop_after``: the name of the stage after which to stop.
    ``before_each(stage_name, module_op)``, ``after_each(...)``: called around
    every stage (IR dumps; lazy-opt names the stage that failed).
    ``print_ir``: print the IR before/after every pass to stderr.
    ``verify_each``: verify the module after every stage, as ``mlir-opt``
    does, so a pass that breaks the IR is named. When False (the runtime's
    compiles: the ``lazy`` verifiers are Python, ~30% of a lowering when run
    after every stage), it is verified only where an MLIR pass is to run on
    what lazycore's passes made (C++ passes assume valid input) and after the
    last stage.
    """
    module_op = module.operation if isinstance(module, ir.Module) else module
    with module_op.context:
        stages = build_stages(pipeline, overrides)
        if stop_after is not None and stop_after not in [s.name for s in stages]:
            raise PassError(f"stop_after: no stage '{stop_after}' in pipeline {[s.name for s in stages]}")
        unverified = None  # the last stage whose output was not verified
        for stage in stages:
            if unverified is not None and stage.native:
                _verify(module_op, _SINCE.format(unverified))
                unverified = None
            if before_each is not None:
                before_each(stage.name, module_op)
            stage.run(module_op, print_ir, verify_each)
            if not verify_each:
                unverified = stage.name
            if after_each is not None:
                after_each(stage.name, module_op)
            if stage.name == stop_after:
                break
        if unverified is not None:
            _verify(module_op, _SINCE.format(unverified))


_SINCE = "'{}' (LAZYCORE_VERIFY_EACH=1 verifies after every pass)"


_loaded = False


def _ensure_passes_loaded() -> None:
    global _loaded
    if not _loaded:
        # importing a pass module registers its passes (and canonicalize's, updates');
        # set after: a thread that finds it set finds them all registered
        from . import aliasing, canonicalize, conv_layout, pdl, roll_loops, to_stablehlo  # noqa: F401
        from . import keep_roundings  # noqa: F401
        _loaded = True
