// A pass that fails says where, like a verifier: here lazy-to-stablehlo with
// lowerings that fail (Inputs/failing_lowerings.py). One that raises is named
// at its op with the Python error; one whose results have other types than
// its op's is named with the line that registered it and both types.
// RUN: lazy-opt --load-python-module %S/../Inputs/failing_lowerings.py --split-input-file \
// RUN:   --lazy-to-stablehlo --verify-diagnostics %s
// A lowering that declines hands the op to the next one, here the built-in one:
// RUN: lazy-opt --load-python-module %S/../Inputs/failing_lowerings.py --split-input-file \
// RUN:   --lazy-to-stablehlo --verify-diagnostics %s | filecheck %s

func.func @raises(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error-re @+1 {{lazy-to-stablehlo: lazy.sign at {{.*}}failing_pass.mlir:13: its lowering raised ValueError: this lowering of sign is broken}}
  %0 = "lazy.sign"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @wrong_type(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error-re @+1 {{lowering of lazy.ceil registered at {{.*}}failing_lowerings.py:23 returned tensor<4xf64>, expected tensor<4xf32>}}
  %0 = "lazy.ceil"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @declines
// CHECK: stablehlo.floor %arg0 : tensor<4xf32>
func.func @declines(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "lazy.floor"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
