// The verifiers of lazy.shard and the collectives reject layouts that break
// their rules, naming the rule, at the op's line.
// RUN: lazy-opt --split-input-file --verify-diagnostics %s

// A sharding has one entry per dimension.
func.func @case0(%a: tensor<8x6xf32>) -> tensor<8x6xf32> {
  // expected-error @+1 {{'lazy.shard' op sharding must have 2 entries (one per dimension), got 1}}
  %0 = "lazy.shard"(%a) {mesh = array<i64: 2>, sharding = array<i64: 0>} : (tensor<8x6xf32>) -> tensor<8x6xf32>
  return %0 : tensor<8x6xf32>
}

// -----

// A split dimension is divided evenly.
func.func @case1(%a: tensor<8x6xf32>) -> tensor<8x6xf32> {
  // expected-error @+1 {{'lazy.shard' op sharding [-1, 0]: dimension 1 of size 6 is not divisible by the size 4 of mesh axis 0}}
  %0 = "lazy.shard"(%a) {mesh = array<i64: 4>, sharding = array<i64: -1, 0>} : (tensor<8x6xf32>) -> tensor<8x6xf32>
  return %0 : tensor<8x6xf32>
}

// -----

// A mesh axis splits one dimension at most.
func.func @case2(%a: tensor<8x6xf32>) -> tensor<8x6xf32> {
  // expected-error @+1 {{'lazy.shard' op sharding [0, 0]: mesh axis 0 splits two dimensions}}
  %0 = "lazy.shard"(%a) {mesh = array<i64: 2>, sharding = array<i64: 0, 0>} : (tensor<8x6xf32>) -> tensor<8x6xf32>
  return %0 : tensor<8x6xf32>
}

// -----

// A collective's axis splits the operand.
func.func @case3(%a: tensor<8x6xf32>) -> tensor<4x6xf32> {
  // expected-error @+1 {{'lazy.all_reduce' op the operand is not split along mesh axis 1 (sharding [0, -1])}}
  %0 = "lazy.all_reduce"(%a) {mesh = array<i64: 2, 2>, sharding = array<i64: 0, -1>, axis = 1, reduction = "sum"} : (tensor<8x6xf32>) -> tensor<4x6xf32>
  return %0 : tensor<4x6xf32>
}

// -----

// The result type is the rule's: one block of the split dimension.
func.func @case4(%a: tensor<8x6xf32>) -> tensor<8x6xf32> {
  // expected-error @+1 {{'lazy.all_reduce' op result 'result' has type tensor<8x6xf32>, but the operands and attributes give tensor<4x6xf32>}}
  %0 = "lazy.all_reduce"(%a) {mesh = array<i64: 2>, sharding = array<i64: 0, -1>, axis = 0, reduction = "sum"} : (tensor<8x6xf32>) -> tensor<8x6xf32>
  return %0 : tensor<8x6xf32>
}

// -----

func.func @case5(%a: tensor<8x6xf32>) -> tensor<8x6xf32> {
  // expected-error @+1 {{'lazy.collective_permute' op pairs [[0, 1], [1, 1]] name a source or a target twice}}
  %0 = "lazy.collective_permute"(%a) {mesh = array<i64: 2>, sharding = array<i64: 0, -1>, axis = 0, pairs = array<i64: 0, 1, 1, 1>} : (tensor<8x6xf32>) -> tensor<8x6xf32>
  return %0 : tensor<8x6xf32>
}

// -----

func.func @case6(%a: tensor<8x6xf32>) -> tensor<8x6xf32> {
  // expected-error @+1 {{'lazy.all_to_all' op split_dim 1 of size 6 is not divisible by the size 4 of mesh axis 0}}
  %0 = "lazy.all_to_all"(%a) {mesh = array<i64: 4>, sharding = array<i64: 0, -1>, axis = 0, split_dim = 1, concat_dim = 0} : (tensor<8x6xf32>) -> tensor<8x6xf32>
  return %0 : tensor<8x6xf32>
}
