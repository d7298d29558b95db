// lazy-opt reads stdin when no file is given and writes to -o when asked.
// RUN: lazy-opt --lazy-to-stablehlo < %s | filecheck %s
// RUN: lazy-opt --lazy-to-stablehlo %s -o %t && filecheck %s < %t

// CHECK: stablehlo.abs %arg0 : tensor<2xi32>
func.func @main(%a: tensor<2xi32>) -> tensor<2xi32> {
  %0 = "lazy.abs"(%a) : (tensor<2xi32>) -> tensor<2xi32>
  return %0 : tensor<2xi32>
}
