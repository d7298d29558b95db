// `lazy-opt --help` lists every lazycore pass with its summary and options.
// RUN: lazy-opt --help | filecheck %s

// CHECK: usage: lazy-opt
// CHECK-DAG: --lazy-aliasing
// CHECK-DAG: donate:
// CHECK-DAG: --lazy-canonicalize
// CHECK-DAG: --lazy-to-stablehlo
// CHECK-DAG: --pass-pipeline
// CHECK-DAG: --split-input-file
// CHECK: default pipeline (--lazy-default-pipeline):
// CHECK-NEXT: lazy-canonicalize,cse,lazy-aliasing,lazy-to-stablehlo,canonicalize
