// `lazy-opt --help` lists every lazycore pass with its summary and options,
// and mlir-opt's flags that lazy-opt has.
// RUN: lazy-opt --help | filecheck %s

// CHECK: usage: lazy-opt
// CHECK-DAG: --verify-diagnostics
// CHECK-DAG: --mlir-print-ir-before-all
// CHECK-DAG: --mlir-print-ir-after-all
// CHECK-DAG: --mlir-print-debuginfo
// CHECK-DAG: --load-pdl-patterns FILE
// CHECK-DAG: --load-python-module FILE_OR_MODULE
// CHECK-DAG: --dialect-doc
// CHECK-DAG: --lazy-aliasing
// CHECK-DAG: donate:
// CHECK-DAG: --lazy-apply-pdl
// CHECK-DAG: --lazy-canonicalize
// CHECK-DAG: --lazy-channels-last
// CHECK-DAG: --lazy-roll-loops
// CHECK-DAG: --lazy-to-stablehlo
// CHECK-DAG: --lazy-update-to-select
// CHECK-DAG: --pass-pipeline
// CHECK-DAG: --split-input-file
// CHECK: default pipeline (--lazy-default-pipeline):
// CHECK-NEXT: lazy-canonicalize,cse,lazy-update-to-select,lazy-aliasing,lazy-to-stablehlo,canonicalize
