// --split-input-file processes each chunk on its own: an error in one chunk is
// reported with its line in the whole file, the other chunks still print, and
// the exit status is non-zero.
// RUN: not lazy-opt --split-input-file --lazy-to-stablehlo %s > %t.out 2> %t.err
// RUN: filecheck --check-prefix=OUT %s < %t.out
// RUN: filecheck --check-prefix=ERR %s < %t.err

// OUT-LABEL: func.func @first
// OUT: stablehlo.negate
// OUT: // -----
// OUT-LABEL: func.func @third
// OUT: stablehlo.exponential
func.func @first(%a: tensor<3xf32>) -> tensor<3xf32> {
  %0 = "lazy.neg"(%a) : (tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// ERR: split_input_file.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: 'lazy.neg' op result 'result' has type tensor<4xf32>
func.func @second(%a: tensor<3xf32>) -> tensor<4xf32> {
  %0 = "lazy.neg"(%a) : (tensor<3xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @third(%a: tensor<3xf32>) -> tensor<3xf32> {
  %0 = "lazy.exp"(%a) : (tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}
