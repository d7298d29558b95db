// Partial updates: the canonical forms lazy-canonicalize gives chains of
// slices and updates (what a write through a view of a view arrives as), and
// lazy-update-to-select, which turns a large update that reads the array it
// writes into a whole-array select (XLA would otherwise copy every region the
// update reads before writing in place).
// RUN: lazy-opt --split-input-file --lazy-canonicalize %s | filecheck %s --check-prefix=CANON
// RUN: lazy-opt --split-input-file --lazy-update-to-select %s | filecheck %s --check-prefix=SELECT

// A slice of a slice is one slice: starts add up (scaled by the outer
// strides), strides multiply.
// CANON-LABEL: func.func @slice_of_slice
// CANON: %[[S:.*]] = "lazy.slice"(%arg0) {limit = array<i64: 8, 11>, start = array<i64: 3, 2>, strides = array<i64: 2, 4>}
// CANON-NOT: lazy.slice
// CANON: return %[[S]]
func.func @slice_of_slice(%x: tensor<8x12xf32>) -> tensor<3x3xf32> {
  %0 = "lazy.slice"(%x) {start = array<i64: 1, 0>, limit = array<i64: 8, 12>, strides = array<i64: 1, 2>} : (tensor<8x12xf32>) -> tensor<7x6xf32>
  %1 = "lazy.slice"(%0) {start = array<i64: 2, 1>, limit = array<i64: 7, 6>, strides = array<i64: 2, 2>} : (tensor<7x6xf32>) -> tensor<3x3xf32>
  return %1 : tensor<3x3xf32>
}

// -----

// Writing back a row band of x with v written into it is writing v into x:
// the offsets add up. u[1:-1, 1:-1] = v on a 6x6 array arrives as the outer
// form.
// CANON-LABEL: func.func @update_of_update
// CANON-DAG: %[[ONE:.*]] = "lazy.constant"() {value = dense<1> : tensor<i64>}
// CANON: %[[U:.*]] = "lazy.dynamic_update_slice"(%arg0, %arg1, %[[ONE]], %[[ONE]])
// CANON-NOT: lazy.dynamic_update_slice
// CANON: return %[[U]]
func.func @update_of_update(%x: tensor<6x6xf32>, %v: tensor<4x4xf32>) -> tensor<6x6xf32> {
  %c0 = "lazy.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %c1 = "lazy.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %rows = "lazy.slice"(%x) {start = array<i64: 1, 0>, limit = array<i64: 5, 6>, strides = array<i64: 1, 1>} : (tensor<6x6xf32>) -> tensor<4x6xf32>
  %in = "lazy.dynamic_update_slice"(%rows, %v, %c0, %c1) {operandSegmentSizes = array<i32: 1, 1, 2>} : (tensor<4x6xf32>, tensor<4x4xf32>, tensor<i64>, tensor<i64>) -> tensor<4x6xf32>
  %out = "lazy.dynamic_update_slice"(%x, %in, %c1, %c0) {operandSegmentSizes = array<i32: 1, 1, 2>} : (tensor<6x6xf32>, tensor<4x6xf32>, tensor<i64>, tensor<i64>) -> tensor<6x6xf32>
  return %out : tensor<6x6xf32>
}

// -----

// Left alone: the band written back is not the band that was read (rows 2..5
// written at row 1), so the inner update's other elements move.
// CANON-LABEL: func.func @update_of_other_region
// CANON-COUNT-2: lazy.dynamic_update_slice
func.func @update_of_other_region(%x: tensor<6x6xf32>, %v: tensor<4x4xf32>) -> tensor<6x6xf32> {
  %c0 = "lazy.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %c1 = "lazy.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %rows = "lazy.slice"(%x) {start = array<i64: 2, 0>, limit = array<i64: 6, 6>, strides = array<i64: 1, 1>} : (tensor<6x6xf32>) -> tensor<4x6xf32>
  %in = "lazy.dynamic_update_slice"(%rows, %v, %c0, %c1) {operandSegmentSizes = array<i32: 1, 1, 2>} : (tensor<4x6xf32>, tensor<4x4xf32>, tensor<i64>, tensor<i64>) -> tensor<4x6xf32>
  %out = "lazy.dynamic_update_slice"(%x, %in, %c1, %c0) {operandSegmentSizes = array<i32: 1, 1, 2>} : (tensor<6x6xf32>, tensor<4x6xf32>, tensor<i64>, tensor<i64>) -> tensor<6x6xf32>
  return %out : tensor<6x6xf32>
}

// -----

// A stencil update of the interior (16 of 36 elements... here 4x4 of 6x6 is
// 44%, so a 7x7 interior of 9x9 = 60%): it reads x, it covers over half of x,
// its offsets are constants. It becomes select(inside, pad(v, 0), x), the mask
// a pad of true by false with the same edges.
// SELECT-LABEL: func.func @stencil_update
// SELECT: %[[V:.*]] = "lazy.add"
// SELECT: %[[P:.*]] = "lazy.pad"(%[[V]], %{{.*}}) {high = array<i64: 1, 1>, interior = array<i64: 0, 0>, low = array<i64: 1, 1>} : (tensor<7x7xf32>, tensor<f32>) -> tensor<9x9xf32>
// SELECT: %[[T:.*]] = "lazy.constant"() {value = dense<true> : tensor<7x7xi1>}
// SELECT: %[[F:.*]] = "lazy.constant"() {value = dense<false> : tensor<i1>}
// SELECT: %[[M:.*]] = "lazy.pad"(%[[T]], %[[F]]) {high = array<i64: 1, 1>, interior = array<i64: 0, 0>, low = array<i64: 1, 1>}
// SELECT: %[[S:.*]] = "lazy.select"(%[[M]], %[[P]], %arg0)
// SELECT-NOT: lazy.dynamic_update_slice
// SELECT: return %[[S]]
func.func @stencil_update(%x: tensor<9x9xf32>) -> tensor<9x9xf32> {
  %c1 = "lazy.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %up = "lazy.slice"(%x) {start = array<i64: 0, 1>, limit = array<i64: 7, 8>, strides = array<i64: 1, 1>} : (tensor<9x9xf32>) -> tensor<7x7xf32>
  %down = "lazy.slice"(%x) {start = array<i64: 2, 1>, limit = array<i64: 9, 8>, strides = array<i64: 1, 1>} : (tensor<9x9xf32>) -> tensor<7x7xf32>
  %v = "lazy.add"(%up, %down) : (tensor<7x7xf32>, tensor<7x7xf32>) -> tensor<7x7xf32>
  %out = "lazy.dynamic_update_slice"(%x, %v, %c1, %c1) {operandSegmentSizes = array<i32: 1, 1, 2>} : (tensor<9x9xf32>, tensor<7x7xf32>, tensor<i64>, tensor<i64>) -> tensor<9x9xf32>
  return %out : tensor<9x9xf32>
}

// -----

// Left in place: an update that does not read x (writing it in place costs
// no copies), one covering less than half of x (rewriting all of x would cost
// more than the copies saved), and one whose offset is not a constant.
// SELECT-LABEL: func.func @updates_left_in_place
// SELECT-NOT: lazy.select
// SELECT-COUNT-3: lazy.dynamic_update_slice
// SELECT-NOT: lazy.select
func.func @updates_left_in_place(%x: tensor<9x9xf32>, %w: tensor<7x7xf32>, %i: tensor<i64>) -> (tensor<9x9xf32>, tensor<9x9xf32>, tensor<9x9xf32>) {
  %c1 = "lazy.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %fresh = "lazy.dynamic_update_slice"(%x, %w, %c1, %c1) {operandSegmentSizes = array<i32: 1, 1, 2>} : (tensor<9x9xf32>, tensor<7x7xf32>, tensor<i64>, tensor<i64>) -> tensor<9x9xf32>
  %row = "lazy.slice"(%x) {start = array<i64: 0, 0>, limit = array<i64: 1, 9>, strides = array<i64: 1, 1>} : (tensor<9x9xf32>) -> tensor<1x9xf32>
  %twice = "lazy.add"(%row, %row) : (tensor<1x9xf32>, tensor<1x9xf32>) -> tensor<1x9xf32>
  %small = "lazy.dynamic_update_slice"(%x, %twice, %c1, %c1) {operandSegmentSizes = array<i32: 1, 1, 2>} : (tensor<9x9xf32>, tensor<1x9xf32>, tensor<i64>, tensor<i64>) -> tensor<9x9xf32>
  %inner = "lazy.slice"(%x) {start = array<i64: 1, 1>, limit = array<i64: 8, 8>, strides = array<i64: 1, 1>} : (tensor<9x9xf32>) -> tensor<7x7xf32>
  %dyn = "lazy.dynamic_update_slice"(%x, %inner, %i, %c1) {operandSegmentSizes = array<i32: 1, 1, 2>} : (tensor<9x9xf32>, tensor<7x7xf32>, tensor<i64>, tensor<i64>) -> tensor<9x9xf32>
  return %fresh, %small, %dyn : tensor<9x9xf32>, tensor<9x9xf32>, tensor<9x9xf32>
}

// -----

// Successive whole-array updates: each select's "outside" reads the select
// before it under an equal mask, so it reads the first array directly.
// SELECT-LABEL: func.func @successive_updates
// SELECT: %[[S1:.*]] = "lazy.select"(%{{.*}}, %{{.*}}, %arg0)
// SELECT: %[[S2:.*]] = "lazy.select"(%{{.*}}, %{{.*}}, %arg0)
// SELECT: return %[[S2]]
func.func @successive_updates(%x: tensor<9x9xf32>) -> tensor<9x9xf32> {
  %c1 = "lazy.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %a = "lazy.slice"(%x) {start = array<i64: 0, 1>, limit = array<i64: 7, 8>, strides = array<i64: 1, 1>} : (tensor<9x9xf32>) -> tensor<7x7xf32>
  %v = "lazy.add"(%a, %a) : (tensor<7x7xf32>, tensor<7x7xf32>) -> tensor<7x7xf32>
  %x1 = "lazy.dynamic_update_slice"(%x, %v, %c1, %c1) {operandSegmentSizes = array<i32: 1, 1, 2>} : (tensor<9x9xf32>, tensor<7x7xf32>, tensor<i64>, tensor<i64>) -> tensor<9x9xf32>
  %b = "lazy.slice"(%x1) {start = array<i64: 2, 1>, limit = array<i64: 9, 8>, strides = array<i64: 1, 1>} : (tensor<9x9xf32>) -> tensor<7x7xf32>
  %w = "lazy.add"(%b, %b) : (tensor<7x7xf32>, tensor<7x7xf32>) -> tensor<7x7xf32>
  %x2 = "lazy.dynamic_update_slice"(%x1, %w, %c1, %c1) {operandSegmentSizes = array<i32: 1, 1, 2>} : (tensor<9x9xf32>, tensor<7x7xf32>, tensor<i64>, tensor<i64>) -> tensor<9x9xf32>
  return %x2 : tensor<9x9xf32>
}
