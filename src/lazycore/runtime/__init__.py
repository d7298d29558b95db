"""Running graphs: devices, values in and out (transfers), barriers, the
compile cache and recalled step plans, the compiler (the one runtime module
that loads MLIR, at the first program not on disk) and the PJRT executor. Imports
:mod:`lazycore.ir`, the compiler packages, jax; never tracing or observers:
it announces what happens through :mod:`lazycore.ir.events`."""
