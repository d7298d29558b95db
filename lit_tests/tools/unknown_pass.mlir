// An unknown pass in a pipeline is named at its column in --pass-pipeline,
// with the list of lazycore passes, and lazy-opt exits non-zero without
// printing IR.
// RUN: not lazy-opt --pass-pipeline="builtin.module(lazy-canonicalize,lazy-frobnicate)" %s 2>&1 | filecheck %s

// CHECK: <pass-pipeline>:1:34: error: unknown pass or bad pipeline element 'lazy-frobnicate' (lazycore passes: lazy-aliasing, lazy-apply-pdl, lazy-canonicalize, lazy-channels-last, lazy-keep-roundings, lazy-roll-loops, lazy-to-stablehlo, lazy-update-to-select)
// CHECK-NOT: func.func
func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> {
  return %a : tensor<3xf32>
}
