// A PDL pattern that matches its own output (neg(x) -> neg(x)) would rewrite
// forever: the rewrites are bounded by the module's size, and running out is
// an error at an op the looping pattern still matches, naming the pattern.
// RUN: lazy-opt --load-pdl-patterns %S/../Inputs/pdl_self_matching.mlir --lazy-to-stablehlo --verify-diagnostics %s

func.func @loops(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{the PDL patterns did not converge (10 iterations of at most 1000 rewrites); still matching: @neg_forever (rooted at lazy.neg)}}
  %0 = "lazy.neg"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
