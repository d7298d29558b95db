"""A plugin with a typo: loading it fails at the line that registers the lowering."""

from lazycore.passes import register_lowering

register_lowering("tahn", lambda op, rewriter: op.operands[0])
