// Shardings and collectives lower as jax lowers with_sharding_constraint and
// shard_map (GSPMD): lazy.shard is a custom_call @Sharding with XLA's text for
// the layout (devices are positions in the mesh, row-major; mesh axes that
// split no dimension replicate each tile); a collective runs on each device's
// block, between @SPMDFullToShardShape and @SPMDShardToFullShape, with
// replica groups of the devices along its mesh axis.
// RUN: lazy-opt --split-input-file --lazy-to-stablehlo %s | filecheck %s

// CHECK-LABEL: func.func @shard
// CHECK: %[[A:.*]] = stablehlo.custom_call @Sharding(%arg0) {backend_config = "", mhlo.sharding = "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}"} : (tensor<8x6xf32>) -> tensor<8x6xf32>
// Columns split along the second axis: tiles go down the columns of the mesh.
// CHECK: %[[B:.*]] = stablehlo.custom_call @Sharding(%arg0) {backend_config = "", mhlo.sharding = "{devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}"}
// CHECK: %[[C:.*]] = stablehlo.custom_call @Sharding(%arg0) {backend_config = "", mhlo.sharding = "{devices=[2,2]0,2,1,3}"}
// CHECK: %[[D:.*]] = stablehlo.custom_call @Sharding(%arg0) {backend_config = "", mhlo.sharding = "{replicated}"}
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
// CHECK: %[[S:.*]] = stablehlo.custom_call @Sharding(%arg0) {{.*}}mhlo.sharding = "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}"
// CHECK: %[[L:.*]] = stablehlo.custom_call @SPMDFullToShardShape(%[[S]]) {{.*}}mhlo.sharding = "{manual}"} : (tensor<8x6xf32>) -> tensor<4x6xf32>
// CHECK: %[[R:.*]] = "stablehlo.all_reduce"(%[[L]]) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<{{\[\[}}0, 2], [1, 3]]> : tensor<2x2xi64>, use_global_device_ids}>
// CHECK: stablehlo.add
// CHECK: %[[M:.*]] = stablehlo.custom_call @Sharding(%[[R]]) {{.*}}mhlo.sharding = "{manual}"} : (tensor<4x6xf32>) -> tensor<4x6xf32>
// CHECK: %[[G:.*]] = stablehlo.custom_call @SPMDShardToFullShape(%[[M]]) {{.*}}mhlo.sharding = "{replicated}"} : (tensor<4x6xf32>) -> tensor<4x6xf32>
// CHECK: return %[[G]]
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
// CHECK: @SPMDFullToShardShape{{.*}} -> tensor<4x3xf32>
// CHECK: "stablehlo.all_gather"({{.*}}) <{all_gather_dim = 1 : i64, channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<{{\[\[}}0, 1], [2, 3]]> : tensor<2x2xi64>, use_global_device_ids}> : (tensor<4x3xf32>) -> tensor<4x6xf32>
// CHECK: @SPMDShardToFullShape{{.*}}mhlo.sharding = "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}"} : (tensor<4x6xf32>) -> tensor<8x6xf32>
func.func @all_gather(%x: tensor<8x6xf32>) -> tensor<8x6xf32> {
  %0 = "lazy.all_gather"(%x) {mesh = array<i64: 2, 2>, sharding = array<i64: 0, 1>, axis = 1} : (tensor<8x6xf32>) -> tensor<8x6xf32>
  return %0 : tensor<8x6xf32>
}

// -----

// CHECK-LABEL: func.func @reduce_scatter
// CHECK: @SPMDFullToShardShape{{.*}} -> tensor<2x8xf32>
// CHECK: "stablehlo.reduce_scatter"({{.*}}) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<{{\[\[}}0, 1, 2, 3]]> : tensor<1x4xi64>, scatter_dimension = 1 : i64, use_global_device_ids}>
// CHECK: (tensor<2x8xf32>) -> tensor<2x2xf32>
// CHECK: @SPMDShardToFullShape{{.*}}mhlo.sharding = "{devices=[1,4]0,1,2,3}"} : (tensor<2x2xf32>) -> tensor<2x8xf32>
func.func @reduce_scatter(%x: tensor<8x8xf32>) -> tensor<2x8xf32> {
  %0 = "lazy.reduce_scatter"(%x) {mesh = array<i64: 4>, sharding = array<i64: 0, -1>, axis = 0, dim = 1, reduction = "sum"} : (tensor<8x8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// As jax writes it: no use_global_device_ids on all_to_all.
// CHECK-LABEL: func.func @all_to_all
// CHECK: "stablehlo.all_to_all"({{.*}}) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, concat_dimension = 0 : i64, replica_groups = dense<{{\[\[}}0, 1]]> : tensor<1x2xi64>, split_count = 2 : i64, split_dimension = 1 : i64}> : (tensor<4x6xf32>) -> tensor<8x3xf32>
// CHECK: @SPMDShardToFullShape{{.*}}mhlo.sharding = "{devices=[1,2]0,1}"} : (tensor<8x3xf32>) -> tensor<8x6xf32>
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
