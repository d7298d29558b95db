"""The bottom layer: settings, graph nodes and their hashing, the step log,
tensor handles and their per-device registry, the trace context, events, and
the user's source lines. Imports nothing from lazycore but the MLIR-free half
of :mod:`lazycore.dialect` (types and the op table); no MLIR, no jax."""
