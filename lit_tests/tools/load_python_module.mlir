// --load-python-module imports a Python file (or a module on the path) that
// registers passes and lowerings with lazycore's API, like mlir-opt's
// --load-pass-plugin: its passes become flags and pipeline elements, its
// lowerings replace the built-in ones. (The plugin: Inputs/lazy_plugin.py.)
// RUN: lazy-opt --load-python-module %S/../Inputs/lazy_plugin.py --plugin-count-ops --lazy-to-stablehlo %s \
// RUN:   | filecheck %s
// RUN: env PYTHONPATH=%S/../Inputs lazy-opt --load-python-module lazy_plugin \
// RUN:   --pass-pipeline="builtin.module(plugin-count-ops{attr=my.count},lazy-to-stablehlo)" %s \
// RUN:   | filecheck %s --check-prefix=BY-NAME
// A plugin pass that refuses its input says where, as lazycore's passes do:
// RUN: lazy-opt --load-python-module %S/../Inputs/lazy_plugin.py --plugin-no-exp --verify-diagnostics %s
// A plugin that fails to load is reported at its line that raised:
// RUN: not lazy-opt --load-python-module %S/../Inputs/broken_plugin.py %s 2>&1 | filecheck %s --check-prefix=BROKEN
// RUN: not lazy-opt --load-python-module no_such_plugin_module %s 2>&1 | filecheck %s --check-prefix=MISSING

// CHECK: module attributes {plugin.lazy_ops = 2 : i64}
// CHECK: stablehlo.logistic
// CHECK-NOT: stablehlo.tanh
// CHECK: stablehlo.exponential
// BY-NAME: module attributes {my.count = 2 : i64}
// BROKEN: broken_plugin.py:5:1: error: loading {{.*}}broken_plugin.py raised KeyError: "unknown lazy op 'lazy.tahn'"
// MISSING: lazy-opt: error: --load-python-module: no module named 'no_such_plugin_module'
func.func @f(%a: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = "lazy.tanh"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  // expected-error @+1 {{plugin-no-exp: lazy.exp is not allowed here}}
  %1 = "lazy.exp"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}
