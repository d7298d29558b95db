// A pass that fails says where, like a verifier: here lazy-to-stablehlo with
// lowerings that fail (Inputs/failing_lowerings.py). One that raises is named
// at its op with the Python error; one that declines leaves MLIR's "failed to
// legalize" at the op.
// RUN: lazy-opt --load-python-module %S/../Inputs/failing_lowerings.py --split-input-file \
// RUN:   --lazy-to-stablehlo --verify-diagnostics %s

func.func @raises(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error-re @+1 {{lazy-to-stablehlo: lazy.sign at {{.*}}failing_pass.mlir:10: its lowering raised ValueError: this lowering of sign is broken}}
  %0 = "lazy.sign"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @declines(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{failed to legalize operation 'lazy.floor'}}
  %0 = "lazy.floor"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
