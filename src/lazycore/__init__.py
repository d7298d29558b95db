"""lazycore: LazyTensor tracing for array frontends, compiled by XLA through MLIR."""

__version__ = "0.1.0"
