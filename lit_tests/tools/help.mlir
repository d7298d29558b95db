// `lazy-opt --help` lists every lazycore pass with its summary and options.
// RUN: lazy-opt --help | filecheck %s

// CHECK: usage: lazy-opt
// CHECK-DAG: --lazy-aliasing
// CHECK-DAG: donate:
// CHECK-DAG: --lazy-canonicalize
// CHECK-DAG: --lazy-to-stablehlo
// CHECK-DAG: --lazy-update-to-select
// CHECK-DAG: --pass-pipeline
// CHECK-DAG: --split-input-file
// CHECK: default pipeline (--lazy-default-pipeline):
// CHECK-NEXT: lazy-canonicalize,cse,lazy-update-to-select,lazy-aliasing,lazy-to-stablehlo,canonicalize
