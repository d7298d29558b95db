// lazy.rng_bit_generator lowers to stablehlo.rng_bit_generator; the algorithm
// name maps onto StableHLO's RngAlgorithm enum and both results carry over.
// The bits are drawn flat and reshaped: a value's bits are the stream's first
// ones in row-major order, whatever its shape (XLA lays out a draw of several
// dimensions by its shape).
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo %s | filecheck %s

// CHECK-LABEL: func.func @three_fry
// CHECK: %[[STATE:.*]], %[[FLAT:.*]] = stablehlo.rng_bit_generator %arg0, algorithm = THREE_FRY : (tensor<2xui64>) -> (tensor<2xui64>, tensor<12xui32>)
// CHECK: %[[BITS:.*]] = stablehlo.reshape %[[FLAT]] : (tensor<12xui32>) -> tensor<3x4xui32>
// CHECK: return %[[STATE]], %[[BITS]]
func.func @three_fry(%s: tensor<2xui64>) -> (tensor<2xui64>, tensor<3x4xui32>) {
  %0:2 = "lazy.rng_bit_generator"(%s) {algorithm = "three_fry"} : (tensor<2xui64>) -> (tensor<2xui64>, tensor<3x4xui32>)
  return %0#0, %0#1 : tensor<2xui64>, tensor<3x4xui32>
}

// -----

// Philox takes a 3-word state too.
// CHECK-LABEL: func.func @philox
// CHECK: stablehlo.rng_bit_generator %arg0, algorithm = PHILOX : (tensor<3xui64>) -> (tensor<3xui64>, tensor<8xui64>)
func.func @philox(%s: tensor<3xui64>) -> (tensor<3xui64>, tensor<8xui64>) {
  %0:2 = "lazy.rng_bit_generator"(%s) {algorithm = "philox"} : (tensor<3xui64>) -> (tensor<3xui64>, tensor<8xui64>)
  return %0#0, %0#1 : tensor<3xui64>, tensor<8xui64>
}

// -----

// "default" leaves the choice to the backend; unused new state is still a result.
// CHECK-LABEL: func.func @default
// CHECK: %{{.*}}, %[[BITS:.*]] = stablehlo.rng_bit_generator %arg0, algorithm = DEFAULT : (tensor<2xui64>) -> (tensor<2xui64>, tensor<16xui8>)
// CHECK: return %[[BITS]]
func.func @default(%s: tensor<2xui64>) -> tensor<16xui8> {
  %0:2 = "lazy.rng_bit_generator"(%s) {algorithm = "default"} : (tensor<2xui64>) -> (tensor<2xui64>, tensor<16xui8>)
  return %0#1 : tensor<16xui8>
}
