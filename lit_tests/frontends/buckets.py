# Shape buckets: a marked dimension is padded to its bucket (powers of two),
# the valid size is a program parameter, and a reduction over the padded
# dimension sees its identity past the valid size (here max's -inf, and
# false for the NaN test of torch's and NumPy's max); a contraction over it
# sees zeros in both operands. Lengths 5 and 7 share the one program of 8.
# RUN: %PYTHON %s | FileCheck %s

import numpy as np

import lazycore.numpy as lnp
from lazycore.observe.testing import print_ir


# CHECK-LABEL: TEST: numpy_max_and_gram_over_a_padded_axis
# CHECK-NEXT: 5 [5. 5. 5.] [2. 2. 2.]
# CHECK-NEXT: 7 [7. 7. 7.] [2. 2. 2.]
# CHECK:      ----- graph 0 -----
# CHECK:      func.func @main(%arg0: tensor<8x3xf32>, %arg1: tensor<1xi32>)
# CHECK:        %[[VALID:.*]] = "lazy.reshape"(%{{.*}}) : (tensor<1xi32>) -> tensor<i32>
# CHECK-NEXT:   %[[ROW:.*]] = "lazy.iota"() {dim = 0 : i64} : () -> tensor<8x3xi32>
# CHECK-NEXT:   %[[N:.*]] = "lazy.broadcast_in_dim"(%[[VALID]]) {dims = array<i64>} : (tensor<i32>) -> tensor<8x3xi32>
# CHECK-NEXT:   %[[IN:.*]] = "lazy.compare"(%[[ROW]], %[[N]]) {direction = "LT"}
# CHECK:        %[[LOW:.*]] = "lazy.constant"() {value = dense<0xFF800000> : tensor<f32>}
# CHECK-NEXT:   %[[LOWS:.*]] = "lazy.broadcast_in_dim"(%[[LOW]])
# CHECK-NEXT:   %[[MASKED:.*]] = "lazy.select"(%[[IN]], %arg0, %[[LOWS]])
# CHECK-NEXT:   "lazy.reduce_max"(%[[MASKED]]) {dims = array<i64: 0>} : (tensor<8x3xf32>) -> tensor<3xf32>
# CHECK:        %[[ZERO:.*]] = "lazy.select"(%[[IN]], %arg0, %{{.*}}) : (tensor<8x3xi1>, tensor<8x3xf32>, tensor<8x3xf32>)
# CHECK-NEXT:   "lazy.dot_general"(%{{.*}}, %[[ZERO]]) {{.*}} : (tensor<3x8xf32>, tensor<8x3xf32>) -> tensor<3x3xf32>
# CHECK:      ----- stablehlo -----
# CHECK:        stablehlo.compare LT
# CHECK-NOT:  ----- graph 1 -----
@print_ir
def numpy_max_and_gram_over_a_padded_axis():
    for n in (5, 7):
        a = lnp.dynamic(lnp.asarray(np.ones((n, 3), np.float32)), 0)
        m, g = a.max(axis=0), a.T @ a
        print(n, np.asarray(g)[0], 2 * np.asarray(m))
