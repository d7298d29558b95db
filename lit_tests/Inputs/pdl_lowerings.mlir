// PDL lowerings loaded by tests of lazycore.passes.load_pdl_patterns and lazy-opt --load-pdl-patterns.
module {
  // |x| = max(x, -x), in lazy ops: the Python lowerings take it from there.
  pdl.pattern @abs_as_max_of_neg : benefit(1) {
    %t = pdl.type
    %x = pdl.operand
    %abs = pdl.operation "lazy.abs"(%x : !pdl.value) -> (%t : !pdl.type)
    pdl.rewrite %abs {
      %neg = pdl.operation "lazy.neg"(%x : !pdl.value) -> (%t : !pdl.type)
      %negx = pdl.result 0 of %neg
      %max = pdl.operation "lazy.maximum"(%x, %negx : !pdl.value, !pdl.value) -> (%t : !pdl.type)
      pdl.replace %abs with %max
    }
  }

  // -x = 0 - x, straight to StableHLO. The zero constant needs a type, so the
  // pattern only matches tensor<4xf32>; other negations keep their lowering.
  pdl.pattern @neg_as_zero_minus_x : benefit(1) {
    %t = pdl.type : tensor<4xf32>
    %x = pdl.operand
    %neg = pdl.operation "lazy.neg"(%x : !pdl.value) -> (%t : !pdl.type)
    pdl.rewrite %neg {
      %zero = pdl.attribute = dense<0.0> : tensor<4xf32>
      %c = pdl.operation "stablehlo.constant" {"value" = %zero} -> (%t : !pdl.type)
      %cv = pdl.result 0 of %c
      %sub = pdl.operation "stablehlo.subtract"(%cv, %x : !pdl.value, !pdl.value) -> (%t : !pdl.type)
      pdl.replace %neg with %sub
    }
  }
}
