// Pipelines work on any function, whatever its name: the default pipeline's
// lazy-aliasing has an empty plan there and needs no entry function. A plan
// is for one function: the module's only one, or the one entry= names.
// RUN: lazy-opt --lazy-default-pipeline %s | filecheck %s
// RUN: lazy-opt "--lazy-aliasing=donate=0:0 entry=second" %s | filecheck %s --check-prefix=ENTRY
// With several functions and no entry=, the plan is refused at the first one:
// RUN: lazy-opt --lazy-aliasing=donate=0:0 --verify-diagnostics %s

// CHECK-LABEL: func.func @forward
// CHECK: stablehlo.add
// CHECK-LABEL: func.func @second
// CHECK: stablehlo.multiply
// ENTRY: func.func @forward(%arg0: tensor<4xf32>) -> tensor<4xf32>
// ENTRY: func.func @second(%arg0: tensor<4xf32> {tf.aliasing_output = 0 : i32}) -> tensor<4xf32>

// expected-error @+1 {{lazy-aliasing: the module has 2 functions (@forward, @second); say which one the plan is for with entry=NAME}}
func.func @forward(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "lazy.add"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

func.func @second(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "lazy.mul"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
