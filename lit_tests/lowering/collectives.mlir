// Shardings and collectives lower as jax 0.10 lowers with_sharding_constraint
// and shard_map for the Shardy partitioner, in Shardy's round-trip form (the
// sdy attributes as strings in mhlo.frontend_attributes, which XLA imports):
// the module declares the mesh (axes named by position, a0 first; devices are
// positions in the mesh, row-major); lazy.shard is a custom_call @Sharding
// with its #sdy.sharding_per_value; a collective runs on each device's block
// in a manual computation over every mesh axis: @xla.sdy.GlobalToLocalShape,
// a call to a private function of its own (@xla.sdy.manual_computation_body_N,
// not inlined) holding the collective, @xla.sdy.LocalToGlobalShape; replica
// groups are the devices along its mesh axis.
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo %s | filecheck %s

// The mesh is declared once, however many ops use it.
// CHECK: module attributes {mhlo.frontend_attributes = {xla.sdy.meshes = "{mesh_2x2 = #sdy.mesh<[\22a0\22=2, \22a1\22=2]>}"}}
// CHECK-LABEL: func.func @shard
// CHECK: %[[A:.*]] = stablehlo.custom_call @Sharding(%arg0) {backend_config = "", mhlo.frontend_attributes = {xla.sdy.sharding = "#sdy.sharding_per_value<[<@mesh_2x2, [{\22a0\22}, {}]>]>"}} : (tensor<8x6xf32>) -> tensor<8x6xf32>
// Columns split along the second axis.
// CHECK: %[[B:.*]] = stablehlo.custom_call @Sharding(%arg0) {{.*}}xla.sdy.sharding = "#sdy.sharding_per_value<[<@mesh_2x2, [{}, {\22a1\22}]>]>"
// CHECK: %[[C:.*]] = stablehlo.custom_call @Sharding(%arg0) {{.*}}xla.sdy.sharding = "#sdy.sharding_per_value<[<@mesh_2x2, [{\22a1\22}, {\22a0\22}]>]>"
// CHECK: %[[D:.*]] = stablehlo.custom_call @Sharding(%arg0) {{.*}}xla.sdy.sharding = "#sdy.sharding_per_value<[<@mesh_2x2, [{}, {}]>]>"
// CHECK: return %[[A]], %[[B]], %[[C]], %[[D]]
func.func @shard(%x: tensor<8x6xf32>) -> (tensor<8x6xf32>, tensor<8x6xf32>, tensor<8x6xf32>, tensor<8x6xf32>) {
  %0 = "lazy.shard"(%x) {mesh = array<i64: 2, 2>, sharding = array<i64: 0, -1>} : (tensor<8x6xf32>) -> tensor<8x6xf32>
  %1 = "lazy.shard"(%x) {mesh = array<i64: 2, 2>, sharding = array<i64: -1, 1>} : (tensor<8x6xf32>) -> tensor<8x6xf32>
  %2 = "lazy.shard"(%x) {mesh = array<i64: 2, 2>, sharding = array<i64: 1, 0>} : (tensor<8x6xf32>) -> tensor<8x6xf32>
  %3 = "lazy.shard"(%x) {mesh = array<i64: 2, 2>, sharding = array<i64: -1, -1>} : (tensor<8x6xf32>) -> tensor<8x6xf32>
  return %0, %1, %2, %3 : tensor<8x6xf32>, tensor<8x6xf32>, tensor<8x6xf32>, tensor<8x6xf32>
}

// -----

// The sum of the two row blocks: each device's 4x6 block, summed over the
// devices of a column of the mesh; the result is whole on every device.
// CHECK-LABEL: func.func @all_reduce
// CHECK: %[[L:.*]] = stablehlo.custom_call @xla.sdy.GlobalToLocalShape(%arg0) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {xla.sdy.in_shardings = "#sdy.sharding_per_value<[<@mesh_2x2, [{\22a0\22}, {}]>]>", xla.sdy.manual_axes = "#sdy<manual_axes{\22a0\22, \22a1\22}>"}} : (tensor<8x6xf32>) -> tensor<4x6xf32>
// CHECK: %[[R:.*]] = call @[[BODY:xla.sdy.manual_computation_body_0]](%[[L]]) {mhlo.frontend_attributes = {inlineable = "false"}} : (tensor<4x6xf32>) -> tensor<4x6xf32>
// CHECK: %[[G:.*]] = stablehlo.custom_call @xla.sdy.LocalToGlobalShape(%[[R]]) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {xla.sdy.manual_axes = "#sdy<manual_axes{\22a0\22, \22a1\22}>", xla.sdy.out_shardings = "#sdy.sharding_per_value<[<@mesh_2x2, [{}, {}]>]>"}} : (tensor<4x6xf32>) -> tensor<4x6xf32>
// CHECK: return %[[G]]
// CHECK: func.func private @[[BODY]](%arg0: tensor<4x6xf32>) -> tensor<4x6xf32>
// CHECK: %[[S:.*]] = "stablehlo.all_reduce"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<{{\[\[}}0, 2], [1, 3]]> : tensor<2x2xi64>, use_global_device_ids}>
// CHECK: stablehlo.add
// CHECK: return %[[S]]
func.func @all_reduce(%x: tensor<8x6xf32>) -> tensor<4x6xf32> {
  %0 = "lazy.all_reduce"(%x) {mesh = array<i64: 2, 2>, sharding = array<i64: 0, -1>, axis = 0, reduction = "sum"} : (tensor<8x6xf32>) -> tensor<4x6xf32>
  return %0 : tensor<4x6xf32>
}

// -----

// max over integers; groups along the second mesh axis.
// CHECK-LABEL: func.func @all_reduce_max
// CHECK: "stablehlo.all_reduce"({{.*}}replica_groups = dense<{{\[\[}}0, 1], [2, 3]]>
// CHECK: stablehlo.maximum {{.*}} : tensor<i32>
func.func @all_reduce_max(%x: tensor<8x6xi32>) -> tensor<8x3xi32> {
  %0 = "lazy.all_reduce"(%x) {mesh = array<i64: 2, 2>, sharding = array<i64: 0, 1>, axis = 1, reduction = "max"} : (tensor<8x6xi32>) -> tensor<8x3xi32>
  return %0 : tensor<8x3xi32>
}

// -----

// CHECK-LABEL: func.func @all_gather
// CHECK: @xla.sdy.GlobalToLocalShape{{.*}} -> tensor<4x3xf32>
// CHECK: @xla.sdy.LocalToGlobalShape{{.*}}xla.sdy.out_shardings = "#sdy.sharding_per_value<[<@mesh_2x2, [{\22a0\22}, {}]>]>"}} : (tensor<4x6xf32>) -> tensor<8x6xf32>
// CHECK: "stablehlo.all_gather"({{.*}}) <{all_gather_dim = 1 : i64, channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<{{\[\[}}0, 1], [2, 3]]> : tensor<2x2xi64>, use_global_device_ids}> : (tensor<4x3xf32>) -> tensor<4x6xf32>
func.func @all_gather(%x: tensor<8x6xf32>) -> tensor<8x6xf32> {
  %0 = "lazy.all_gather"(%x) {mesh = array<i64: 2, 2>, sharding = array<i64: 0, 1>, axis = 1} : (tensor<8x6xf32>) -> tensor<8x6xf32>
  return %0 : tensor<8x6xf32>
}

// -----

// CHECK: module attributes {mhlo.frontend_attributes = {xla.sdy.meshes = "{mesh_4 = #sdy.mesh<[\22a0\22=4]>}"}}
// CHECK-LABEL: func.func @reduce_scatter
// CHECK: @xla.sdy.GlobalToLocalShape{{.*}} -> tensor<2x8xf32>
// CHECK: @xla.sdy.LocalToGlobalShape{{.*}}xla.sdy.out_shardings = "#sdy.sharding_per_value<[<@mesh_4, [{}, {\22a0\22}]>]>"}} : (tensor<2x2xf32>) -> tensor<2x8xf32>
// CHECK: "stablehlo.reduce_scatter"({{.*}}) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<{{\[\[}}0, 1, 2, 3]]> : tensor<1x4xi64>, scatter_dimension = 1 : i64, use_global_device_ids}>
// CHECK: (tensor<2x8xf32>) -> tensor<2x2xf32>
func.func @reduce_scatter(%x: tensor<8x8xf32>) -> tensor<2x8xf32> {
  %0 = "lazy.reduce_scatter"(%x) {mesh = array<i64: 4>, sharding = array<i64: 0, -1>, axis = 0, dim = 1, reduction = "sum"} : (tensor<8x8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// As jax writes it: no use_global_device_ids on all_to_all.
// CHECK-LABEL: func.func @all_to_all
// CHECK: @xla.sdy.LocalToGlobalShape{{.*}}xla.sdy.out_shardings = "#sdy.sharding_per_value<[<@mesh_2, [{}, {\22a0\22}]>]>"}} : (tensor<8x3xf32>) -> tensor<8x6xf32>
// CHECK: "stablehlo.all_to_all"({{.*}}) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, concat_dimension = 0 : i64, replica_groups = dense<{{\[\[}}0, 1]]> : tensor<1x2xi64>, split_count = 2 : i64, split_dimension = 1 : i64}> : (tensor<4x6xf32>) -> tensor<8x3xf32>
func.func @all_to_all(%x: tensor<8x6xf32>) -> tensor<8x6xf32> {
  %0 = "lazy.all_to_all"(%x) {mesh = array<i64: 2>, sharding = array<i64: 0, -1>, axis = 0, split_dim = 1, concat_dim = 0} : (tensor<8x6xf32>) -> tensor<8x6xf32>
  return %0 : tensor<8x6xf32>
}

// -----

// Positions along the second mesh axis become device pairs in every group.
// CHECK-LABEL: func.func @collective_permute
// CHECK: "stablehlo.collective_permute"({{.*}}) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, source_target_pairs = dense<{{\[\[}}0, 1], [2, 3]]> : tensor<2x2xi64>}> : (tensor<8x3xf32>) -> tensor<8x3xf32>
func.func @collective_permute(%x: tensor<8x6xf32>) -> tensor<8x6xf32> {
  %0 = "lazy.collective_permute"(%x) {mesh = array<i64: 2, 2>, sharding = array<i64: -1, 1>, axis = 1, pairs = array<i64: 0, 1>} : (tensor<8x6xf32>) -> tensor<8x6xf32>
  return %0 : tensor<8x6xf32>
}

// -----

// A mesh of one device: its block is the value, and XLA runs no partitioner
// for one partition, so the collective works on the value itself (as jax
// lowers shard_map on one device): no manual computation.
// CHECK-LABEL: func.func @one_device
// CHECK-NOT: xla.sdy.GlobalToLocalShape
// CHECK: %[[R:.*]] = "stablehlo.all_reduce"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<0> : tensor<1x1xi64>, use_global_device_ids}>
// CHECK-NOT: xla.sdy.LocalToGlobalShape
// CHECK: return %[[R]]
func.func @one_device(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "lazy.all_reduce"(%x) {mesh = array<i64: 1>, sharding = array<i64: 0>, axis = 0, reduction = "sum"} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
