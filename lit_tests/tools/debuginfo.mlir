// --mlir-print-debuginfo prints every op's location: the line and column in
// this file, through any pass (here the lowering keeps the op's location).
// RUN: lazy-opt --mlir-print-debuginfo %s | filecheck %s
// RUN: lazy-opt --mlir-print-debuginfo --lazy-to-stablehlo %s | filecheck %s --check-prefix=LOWERED

// CHECK: "lazy.exp"(%arg0) : (tensor<4xf32>) -> tensor<4xf32> loc(#[[EXP:loc[0-9]*]])
// CHECK: #[[EXP]] = loc("{{.*}}debuginfo.mlir":[[# @LINE + 4]]:8)
// LOWERED: stablehlo.exponential %arg0 : tensor<4xf32> loc(#[[EXP:loc[0-9]*]])
// LOWERED: #[[EXP]] = loc("{{.*}}debuginfo.mlir":[[# @LINE + 2]]:8)
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "lazy.exp"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
