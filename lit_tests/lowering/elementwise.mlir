// Every elementwise lazy op and the StableHLO it lowers to. Most map one to one;
// erf has no StableHLO op and is built from a rational approximation.
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo %s | filecheck %s

// Unary ops keep their operand type (is_finite gives i1).
// CHECK-LABEL: func.func @unary
// CHECK: stablehlo.negate %arg0 : tensor<4xf32>
// CHECK: stablehlo.abs %arg0 : tensor<4xf32>
// CHECK: stablehlo.sign %arg0 : tensor<4xf32>
// CHECK: stablehlo.exponential %arg0 : tensor<4xf32>
// CHECK: stablehlo.log %arg0 : tensor<4xf32>
// CHECK: stablehlo.log_plus_one %arg0 : tensor<4xf32>
// CHECK: stablehlo.exponential_minus_one %arg0 : tensor<4xf32>
// CHECK: stablehlo.tanh %arg0 : tensor<4xf32>
// logistic is 1 / (1 + exp(-x)): XLA's CPU backend runs stablehlo.logistic slowly.
// CHECK: %[[NEG:.*]] = stablehlo.negate %arg0 : tensor<4xf32>
// CHECK: %[[EXP:.*]] = stablehlo.exponential %[[NEG]]
// CHECK: %[[ONE:.*]] = stablehlo.constant dense<1.000000e+00> : tensor<4xf32>
// CHECK: %[[DEN:.*]] = stablehlo.add %[[ONE]], %[[EXP]]
// CHECK: stablehlo.divide %[[ONE]], %[[DEN]]
// CHECK: stablehlo.sqrt %arg0 : tensor<4xf32>
// CHECK: stablehlo.rsqrt %arg0 : tensor<4xf32>
// CHECK: stablehlo.floor %arg0 : tensor<4xf32>
// CHECK: stablehlo.ceil %arg0 : tensor<4xf32>
// CHECK: stablehlo.round_nearest_even %arg0 : tensor<4xf32>
// CHECK: stablehlo.sine %arg0 : tensor<4xf32>
// CHECK: stablehlo.cosine %arg0 : tensor<4xf32>
// CHECK: stablehlo.is_finite %arg0 : (tensor<4xf32>) -> tensor<4xi1>
// CHECK: stablehlo.not %arg1 : tensor<4xi32>
// CHECK-NOT: lazy.
func.func @unary(%x: tensor<4xf32>, %i: tensor<4xi32>) -> tensor<4xf32> {
  %neg = "lazy.neg"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %abs = "lazy.abs"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %sign = "lazy.sign"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %exp = "lazy.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %log = "lazy.log"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %log1p = "lazy.log1p"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %expm1 = "lazy.expm1"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %tanh = "lazy.tanh"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %logistic = "lazy.logistic"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %sqrt = "lazy.sqrt"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %rsqrt = "lazy.rsqrt"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %floor = "lazy.floor"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %ceil = "lazy.ceil"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %round = "lazy.round"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %sin = "lazy.sin"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %cos = "lazy.cos"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %fin = "lazy.is_finite"(%x) : (tensor<4xf32>) -> tensor<4xi1>
  %not = "lazy.not"(%i) : (tensor<4xi32>) -> tensor<4xi32>
  return %neg : tensor<4xf32>
}

// -----

// Binary ops take two operands of one type; and/or/xor also take i1.
// CHECK-LABEL: func.func @binary
// CHECK: stablehlo.add %arg0, %arg1 : tensor<2x3xf32>
// CHECK: stablehlo.subtract %arg0, %arg1 : tensor<2x3xf32>
// CHECK: stablehlo.multiply %arg0, %arg1 : tensor<2x3xf32>
// CHECK: stablehlo.divide %arg0, %arg1 : tensor<2x3xf32>
// CHECK: stablehlo.remainder %arg0, %arg1 : tensor<2x3xf32>
// CHECK: stablehlo.power %arg0, %arg1 : tensor<2x3xf32>
// CHECK: stablehlo.maximum %arg0, %arg1 : tensor<2x3xf32>
// CHECK: stablehlo.minimum %arg0, %arg1 : tensor<2x3xf32>
// CHECK: stablehlo.atan2 %arg0, %arg1 : tensor<2x3xf32>
// CHECK: stablehlo.and %arg2, %arg3 : tensor<2x3xi1>
// CHECK: stablehlo.or %arg2, %arg3 : tensor<2x3xi1>
// CHECK: stablehlo.xor %arg2, %arg3 : tensor<2x3xi1>
// CHECK-NOT: lazy.
func.func @binary(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>, %p: tensor<2x3xi1>, %q: tensor<2x3xi1>) -> tensor<2x3xf32> {
  %add = "lazy.add"(%a, %b) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %sub = "lazy.sub"(%a, %b) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %mul = "lazy.mul"(%a, %b) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %div = "lazy.div"(%a, %b) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %rem = "lazy.rem"(%a, %b) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %pow = "lazy.pow"(%a, %b) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %maximum = "lazy.maximum"(%a, %b) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %minimum = "lazy.minimum"(%a, %b) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %atan2 = "lazy.atan2"(%a, %b) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %and = "lazy.and"(%p, %q) : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>
  %or = "lazy.or"(%p, %q) : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>
  %xor = "lazy.xor"(%p, %q) : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>
  return %add : tensor<2x3xf32>
}

// -----

// stablehlo.abs and stablehlo.sign take signed types only: for unsigned
// operands abs is the operand itself and sign is (x != 0) converted back.
// CHECK-LABEL: func.func @abs_sign_unsigned
// CHECK-NOT: stablehlo.abs %arg0
// CHECK-NOT: stablehlo.sign %arg0
// CHECK: %[[ZERO:.*]] = stablehlo.constant dense<0> : tensor<4xui8>
// CHECK: %[[NZ:.*]] = stablehlo.compare NE, %arg0, %[[ZERO]] : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xi1>
// CHECK: %[[SIGN:.*]] = stablehlo.convert %[[NZ]] : (tensor<4xi1>) -> tensor<4xui8>
// CHECK: %[[IABS:.*]] = stablehlo.abs %arg1 : tensor<4xi32>
// CHECK: %[[ISIGN:.*]] = stablehlo.sign %arg1 : tensor<4xi32>
// CHECK: return %arg0, %[[SIGN]], %[[IABS]], %[[ISIGN]]
func.func @abs_sign_unsigned(%u: tensor<4xui8>, %i: tensor<4xi32>) -> (tensor<4xui8>, tensor<4xui8>, tensor<4xi32>, tensor<4xi32>) {
  %abs = "lazy.abs"(%u) : (tensor<4xui8>) -> tensor<4xui8>
  %sign = "lazy.sign"(%u) : (tensor<4xui8>) -> tensor<4xui8>
  %iabs = "lazy.abs"(%i) : (tensor<4xi32>) -> tensor<4xi32>
  %isign = "lazy.sign"(%i) : (tensor<4xi32>) -> tensor<4xi32>
  return %abs, %sign, %iabs, %isign : tensor<4xui8>, tensor<4xui8>, tensor<4xi32>, tensor<4xi32>
}

// -----

// A float sign of either zero is +0.0 (NumPy's and torch's; stablehlo.sign keeps -0.0).
// CHECK-LABEL: func.func @sign_of_zero
// CHECK: %[[ZERO:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK: %[[ISZERO:.*]] = stablehlo.compare EQ, %arg0, %[[ZERO]]
// CHECK: %[[SIGN:.*]] = stablehlo.sign %arg0 : tensor<4xf32>
// CHECK: %[[OUT:.*]] = stablehlo.select %[[ISZERO]], %[[ZERO]], %[[SIGN]] : tensor<4xi1>, tensor<4xf32>
// CHECK: return %[[OUT]]
func.func @sign_of_zero(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "lazy.sign"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Integer division and remainder by zero are 0 (NumPy's values), and XLA never
// sees a zero divisor: its constant folder dies of SIGFPE on one. Zero lanes
// divide by 1 instead, and their result is replaced by 0. Floats divide as they are.
// CHECK-LABEL: func.func @int_division_by_zero
// CHECK: %[[ZERO:.*]] = stablehlo.constant dense<0> : tensor<4xi32>
// CHECK: %[[BYZERO:.*]] = stablehlo.compare EQ, %arg1, %[[ZERO]]
// CHECK: %[[ONE:.*]] = stablehlo.constant dense<1> : tensor<4xi32>
// CHECK: %[[SAFE:.*]] = stablehlo.select %[[BYZERO]], %[[ONE]], %arg1 : tensor<4xi1>, tensor<4xi32>
// CHECK: %[[Q:.*]] = stablehlo.divide %arg0, %[[SAFE]] : tensor<4xi32>
// CHECK: %[[DIV:.*]] = stablehlo.select %[[BYZERO]], %[[ZERO]], %[[Q]] : tensor<4xi1>, tensor<4xi32>
// CHECK: %[[SAFE2:.*]] = stablehlo.select %{{.*}}, %{{.*}}, %arg1 : tensor<4xi1>, tensor<4xi32>
// CHECK: %[[R:.*]] = stablehlo.remainder %arg0, %[[SAFE2]] : tensor<4xi32>
// CHECK: %[[REM:.*]] = stablehlo.select %{{.*}}, %{{.*}}, %[[R]] : tensor<4xi1>, tensor<4xi32>
// CHECK: %[[FDIV:.*]] = stablehlo.divide %arg2, %arg3 : tensor<4xf32>
// CHECK: return %[[DIV]], %[[REM]], %[[FDIV]]
func.func @int_division_by_zero(%a: tensor<4xi32>, %b: tensor<4xi32>, %x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xi32>, tensor<4xi32>, tensor<4xf32>) {
  %div = "lazy.div"(%a, %b) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  %rem = "lazy.rem"(%a, %b) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  %fdiv = "lazy.div"(%x, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %div, %rem, %fdiv : tensor<4xi32>, tensor<4xi32>, tensor<4xf32>
}

// -----

// A value check passes its operand through. The runtime returns the flag as an
// extra program output before any pass runs (lazycore.runtime.checks), so
// lowering the op drops nothing the program needs.
// CHECK-LABEL: func.func @check
// CHECK-NOT: lazy.check
// CHECK: return %arg0, %arg1 : tensor<4xi32>, tensor<i1>
func.func @check(%x: tensor<4xi32>, %failed: tensor<i1>) -> (tensor<4xi32>, tensor<i1>) {
  %0 = "lazy.check"(%x, %failed) {message = "ZeroDivisionError", error = "RuntimeError"} : (tensor<4xi32>, tensor<i1>) -> tensor<4xi32>
  return %0, %failed : tensor<4xi32>, tensor<i1>
}

// -----

// Integer pow squares and multiplies over every exponent bit (XLA's
// stablehlo.power on integers looks at six bits only): bits 0..6 of an i8
// exponent, then x ** -n is 0 unless x is 1 or -1.
// CHECK-LABEL: func.func @int_pow
// CHECK-NOT: stablehlo.power
// CHECK-DAG: %[[ZERO:.*]] = stablehlo.constant dense<0> : tensor<4xi8>
// CHECK-DAG: %[[ONE:.*]] = stablehlo.constant dense<1> : tensor<4xi8>
// CHECK: %[[B0:.*]] = stablehlo.and %arg1, %{{.*}} : tensor<4xi8>
// CHECK: %[[SET0:.*]] = stablehlo.compare NE, %[[B0]], %[[ZERO]]
// CHECK: %[[ACC0:.*]] = stablehlo.select %[[SET0]], %arg0, %[[ONE]] : tensor<4xi1>, tensor<4xi8>
// CHECK: %[[SQ1:.*]] = stablehlo.multiply %arg0, %arg0 : tensor<4xi8>
// CHECK: %[[TWO:.*]] = stablehlo.constant dense<2> : tensor<4xi8>
// CHECK: %[[B1:.*]] = stablehlo.and %arg1, %[[TWO]] : tensor<4xi8>
// CHECK: %[[SET1:.*]] = stablehlo.compare NE, %[[B1]], %[[ZERO]]
// CHECK: %[[MUL1:.*]] = stablehlo.multiply %[[ACC0]], %[[SQ1]] : tensor<4xi8>
// CHECK: stablehlo.select %[[SET1]], %[[MUL1]], %[[ACC0]] : tensor<4xi1>, tensor<4xi8>
// CHECK: stablehlo.constant dense<64> : tensor<4xi8>
// CHECK-NOT: stablehlo.constant dense<-128> : tensor<4xi8>
// CHECK: %[[ACC:.*]] = stablehlo.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<4xi1>, tensor<4xi8>
// CHECK: %[[IS1:.*]] = stablehlo.compare EQ, %arg0, %[[ONE]]
// CHECK: %[[M1:.*]] = stablehlo.constant dense<-1> : tensor<4xi8>
// CHECK: %[[ISM1:.*]] = stablehlo.compare EQ, %arg0, %[[M1]]
// CHECK: %[[UNIT:.*]] = stablehlo.or %[[IS1]], %[[ISM1]] : tensor<4xi1>
// CHECK: %[[NEG:.*]] = stablehlo.compare LT, %arg1, %[[ZERO]]
// CHECK: %[[NOTUNIT:.*]] = stablehlo.not %[[UNIT]] : tensor<4xi1>
// CHECK: %[[FRACTION:.*]] = stablehlo.and %[[NEG]], %[[NOTUNIT]] : tensor<4xi1>
// CHECK: %[[POW:.*]] = stablehlo.select %[[FRACTION]], %[[ZERO]], %[[ACC]] : tensor<4xi1>, tensor<4xi8>
// CHECK: return %[[POW]]
func.func @int_pow(%a: tensor<4xi8>, %b: tensor<4xi8>) -> tensor<4xi8> {
  %0 = "lazy.pow"(%a, %b) : (tensor<4xi8>, tensor<4xi8>) -> tensor<4xi8>
  return %0 : tensor<4xi8>
}

// -----

// An unsigned exponent uses all its bits, the top one included, and is never negative.
// CHECK-LABEL: func.func @uint_pow
// CHECK-NOT: stablehlo.power
// CHECK: stablehlo.constant dense<64> : tensor<4xui8>
// CHECK: %[[TOP:.*]] = stablehlo.constant dense<128> : tensor<4xui8>
// CHECK: stablehlo.and %arg1, %[[TOP]] : tensor<4xui8>
// CHECK: %[[POW:.*]] = stablehlo.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<4xi1>, tensor<4xui8>
// CHECK-NEXT: return %[[POW]]
func.func @uint_pow(%a: tensor<4xui8>, %b: tensor<4xui8>) -> tensor<4xui8> {
  %0 = "lazy.pow"(%a, %b) : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xui8>
  return %0 : tensor<4xui8>
}

// -----

// compare carries its direction over as a #stablehlo<comparison_direction>.
// CHECK-LABEL: func.func @compare
// CHECK: stablehlo.compare EQ, %arg0, %arg1 : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
// CHECK: stablehlo.compare NE, %arg0, %arg1
// CHECK: stablehlo.compare LT, %arg0, %arg1
// CHECK: stablehlo.compare LE, %arg0, %arg1
// CHECK: stablehlo.compare GT, %arg0, %arg1
// CHECK: stablehlo.compare GE, %arg0, %arg1
func.func @compare(%a: tensor<4xi32>, %b: tensor<4xi32>) -> tensor<4xi1> {
  %eq = "lazy.compare"(%a, %b) {direction = "EQ"} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
  %ne = "lazy.compare"(%a, %b) {direction = "NE"} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
  %lt = "lazy.compare"(%a, %b) {direction = "LT"} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
  %le = "lazy.compare"(%a, %b) {direction = "LE"} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
  %gt = "lazy.compare"(%a, %b) {direction = "GT"} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
  %ge = "lazy.compare"(%a, %b) {direction = "GE"} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
  return %eq : tensor<4xi1>
}

// -----

// CHECK-LABEL: func.func @select
// CHECK: %[[S:.*]] = stablehlo.select %arg0, %arg1, %arg2 : tensor<4xi1>, tensor<4xf32>
// CHECK: return %[[S]]
func.func @select(%p: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "lazy.select"(%p, %a, %b) : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// convert takes its target element type from the result type. Floats to i32/i64
// give INT_MIN for NaN and out-of-range values (x86's cvttss2si: NumPy's, eager's).
// CHECK-LABEL: func.func @convert
// CHECK: %[[C:.*]] = stablehlo.convert %arg0 : (tensor<2x2xf32>) -> tensor<2x2xi32>
// CHECK: %[[LO:.*]] = stablehlo.constant dense<-2.14748365E+9> : tensor<2x2xf32>
// CHECK: %[[GE:.*]] = stablehlo.compare GE, %arg0, %[[LO]]
// CHECK: %[[HI:.*]] = stablehlo.constant dense<2.14748365E+9> : tensor<2x2xf32>
// CHECK: %[[LT:.*]] = stablehlo.compare LT, %arg0, %[[HI]]
// CHECK: %[[IN:.*]] = stablehlo.and %[[GE]], %[[LT]]
// CHECK: %[[MIN:.*]] = stablehlo.constant dense<-2147483648> : tensor<2x2xi32>
// CHECK: %[[I:.*]] = stablehlo.select %[[IN]], %[[C]], %[[MIN]]
// CHECK: %[[B:.*]] = stablehlo.convert %[[I]] : (tensor<2x2xi32>) -> tensor<2x2xbf16>
// CHECK: return %[[B]]
func.func @convert(%x: tensor<2x2xf32>) -> tensor<2x2xbf16> {
  %0 = "lazy.convert"(%x) : (tensor<2x2xf32>) -> tensor<2x2xi32>
  %1 = "lazy.convert"(%0) : (tensor<2x2xi32>) -> tensor<2x2xbf16>
  return %1 : tensor<2x2xbf16>
}

// -----

// Operand-free ops: iota's dim becomes iota_dimension, constants keep their value.
// CHECK-LABEL: func.func @sources
// CHECK: stablehlo.iota dim = 1 : tensor<2x3xi64>
// CHECK: stablehlo.constant dense<{{\[}}[1.500000e+00, 2.000000e+00, 3.000000e+00], [4.000000e+00, 5.000000e+00, 6.000000e+00]]> : tensor<2x3xf32>
// CHECK: stablehlo.constant dense<true> : tensor<2x3xi1>
func.func @sources() -> (tensor<2x3xi64>, tensor<2x3xf32>, tensor<2x3xi1>) {
  %0 = "lazy.iota"() {dim = 1} : () -> tensor<2x3xi64>
  %1 = "lazy.constant"() {value = dense<[[1.5, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
  %2 = "lazy.constant"() {value = dense<true> : tensor<2x3xi1>} : () -> tensor<2x3xi1>
  return %0, %1, %2 : tensor<2x3xi64>, tensor<2x3xf32>, tensor<2x3xi1>
}

// -----

// f32 erf: x clamped to [-4, 4], then x * A(x^2) / B(x^2) (Eigen's coefficients,
// A of degree 6 starting at -2.72614237E-10, B of degree 4), clamped to [-1, 1].
// CHECK-LABEL: func.func @erf_f32
// CHECK-DAG: %[[LO:.*]] = stablehlo.constant dense<-4.000000e+00> : tensor<8xf32>
// CHECK-DAG: %[[HI:.*]] = stablehlo.constant dense<4.000000e+00> : tensor<8xf32>
// CHECK: %[[X:.*]] = stablehlo.clamp %[[LO]], %arg0, %[[HI]] : tensor<8xf32>
// CHECK: %[[X2:.*]] = stablehlo.multiply %[[X]], %[[X]] : tensor<8xf32>
// CHECK: stablehlo.constant dense<-2.72614237E-10>
// CHECK: %[[NUM:.*]] = stablehlo.multiply %[[X]], %{{.*}} : tensor<8xf32>
// CHECK: stablehlo.constant dense<-1.45660715E-5>
// CHECK: %[[Q:.*]] = stablehlo.divide %[[NUM]], %{{.*}} : tensor<8xf32>
// CHECK: %[[R:.*]] = stablehlo.clamp %{{.*}}, %[[Q]], %{{.*}} : tensor<8xf32>
// CHECK: return %[[R]]
// CHECK-NOT: stablehlo.select
func.func @erf_f32(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = "lazy.erf"(%x) : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// f16 and bf16 erf are computed in f32 and rounded back.
// CHECK-LABEL: func.func @erf_bf16
// CHECK: %[[W:.*]] = stablehlo.convert %arg0 : (tensor<8xbf16>) -> tensor<8xf32>
// CHECK: stablehlo.clamp %{{.*}}, %[[W]], %{{.*}} : tensor<8xf32>
// CHECK: %[[N:.*]] = stablehlo.convert %{{.*}} : (tensor<8xf32>) -> tensor<8xbf16>
// CHECK: return %[[N]]
func.func @erf_bf16(%x: tensor<8xbf16>) -> tensor<8xbf16> {
  %0 = "lazy.erf"(%x) : (tensor<8xbf16>) -> tensor<8xbf16>
  return %0 : tensor<8xbf16>
}

// -----

// f64 erf: Cephes' x T(x^2) / U(x^2) where |x| < 1, else sign(x) (1 - erfc(|x|))
// with erfc = exp(-x^2) P(|x|) / Q(|x|) and |x| clamped to [1, 6]; NaN passes through.
// CHECK-LABEL: func.func @erf_f64
// CHECK: stablehlo.constant dense<9.6049737398705161> : tensor<8xf64>
// CHECK: %[[ABS:.*]] = stablehlo.abs %arg0 : tensor<8xf64>
// CHECK: stablehlo.clamp %{{.*}}, %[[ABS]], %{{.*}} : tensor<8xf64>
// CHECK: stablehlo.exponential
// CHECK: stablehlo.constant dense<2.4619698147353052E-10> : tensor<8xf64>
// CHECK: stablehlo.compare LT, %arg0
// CHECK: %[[SIGNED:.*]] = stablehlo.select
// CHECK: %[[PICK:.*]] = stablehlo.select %{{.*}}, %{{.*}}, %[[SIGNED]] : tensor<8xi1>, tensor<8xf64>
// CHECK: %[[NAN:.*]] = stablehlo.compare NE, %arg0, %arg0
// CHECK: %[[R:.*]] = stablehlo.select %[[NAN]], %arg0, %[[PICK]]
// CHECK: return %[[R]]
func.func @erf_f64(%x: tensor<8xf64>) -> tensor<8xf64> {
  %0 = "lazy.erf"(%x) : (tensor<8xf64>) -> tensor<8xf64>
  return %0 : tensor<8xf64>
}

// -----

// bf16 (and f16) logistic computes in f32 and rounds once, as eager torch does.
// CHECK-LABEL: func.func @logistic_bf16
// CHECK: %[[W:.*]] = stablehlo.convert %arg0 : (tensor<8xbf16>) -> tensor<8xf32>
// CHECK: stablehlo.negate %[[W]] : tensor<8xf32>
// CHECK: %[[Q:.*]] = stablehlo.divide %{{.*}}, %{{.*}} : tensor<8xf32>
// CHECK: %[[N:.*]] = stablehlo.convert %[[Q]] : (tensor<8xf32>) -> tensor<8xbf16>
// CHECK: return %[[N]]
func.func @logistic_bf16(%x: tensor<8xbf16>) -> tensor<8xbf16> {
  %0 = "lazy.logistic"(%x) : (tensor<8xbf16>) -> tensor<8xbf16>
  return %0 : tensor<8xbf16>
}

// -----

// bitcast_convert reads the same bits as another type of the same width.
// CHECK-LABEL: func.func @bitcast_convert
// CHECK: %[[I:.*]] = stablehlo.bitcast_convert %arg0 : (tensor<2x2xf32>) -> tensor<2x2xi32>
// CHECK: return %[[I]]
func.func @bitcast_convert(%x: tensor<2x2xf32>) -> tensor<2x2xi32> {
  %0 = "lazy.bitcast_convert"(%x) : (tensor<2x2xf32>) -> tensor<2x2xi32>
  return %0 : tensor<2x2xi32>
}
