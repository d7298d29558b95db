// --mlir-print-ir-before-all / --mlir-print-ir-after-all print the module
// around every pass to stderr under mlir-opt's banner: lazycore's passes by
// their pipeline name, upstream ones as MLIR prints them (a pass nested on
// functions prints the function). The result still goes to stdout.
// RUN: lazy-opt --mlir-print-ir-before-all --mlir-print-ir-after-all \
// RUN:   --pass-pipeline="builtin.module(lazy-canonicalize,func.func(cse),lazy-to-stablehlo)" %s \
// RUN:   2> %t.err | filecheck %s --check-prefix=OUT
// RUN: filecheck %s < %t.err
// Only after, and with locations:
// RUN: lazy-opt --mlir-print-ir-after-all --mlir-print-debuginfo --lazy-canonicalize %s 2>&1 >/dev/null \
// RUN:   | filecheck %s --check-prefix=AFTER

// CHECK: // -----// IR Dump Before lazy-canonicalize //----- //
// CHECK-NEXT: module {
// CHECK: "lazy.mul"
// CHECK: // -----// IR Dump After lazy-canonicalize //----- //
// CHECK-NOT: "lazy.mul"
// CHECK: // -----// IR Dump Before {{.*}}cse{{.*}} //----- //
// CHECK-NEXT: func.func @main
// CHECK-COUNT-2: "lazy.exp"
// CHECK: // -----// IR Dump After {{.*}}cse{{.*}} //----- //
// CHECK-NEXT: func.func @main
// CHECK: "lazy.exp"
// CHECK-NOT: "lazy.exp"
// CHECK: // -----// IR Dump Before lazy-to-stablehlo //----- //
// CHECK: // -----// IR Dump After lazy-to-stablehlo //----- //
// CHECK: stablehlo.exponential

// OUT-NOT: IR Dump
// OUT: stablehlo.exponential

// AFTER-NOT: IR Dump Before
// AFTER: // -----// IR Dump After lazy-canonicalize //----- //
// AFTER: "lazy.exp"(%arg0) : (tensor<4xf32>) -> tensor<4xf32> loc(
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %one = "lazy.constant"() {value = dense<1.0> : tensor<4xf32>} : () -> tensor<4xf32>
  %x = "lazy.mul"(%a, %one) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %0 = "lazy.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "lazy.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "lazy.add"(%0, %1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %2 : tensor<4xf32>
}
