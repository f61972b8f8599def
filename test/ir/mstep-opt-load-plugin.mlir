// mstep-opt --load-plugin: a module that calls custom ops verifies once a
// plugin has registered them (the plugin twice is fine); without it the op
// is a located error. A plugin that does not load (a missing file, a
// library that is no plugin, a registration that conflicts) is an error
// naming the path and the reason.
// RUN: mstep-opt --load-plugin %custom_ops_plugin --load-plugin %custom_ops_plugin %s | FileCheck %s
// RUN: not mstep-opt %s 2>&1 | FileCheck %s --check-prefix=NOPLUGIN
// RUN: not mstep-opt --load-plugin %t.missing.so %s 2>&1 | FileCheck %s --check-prefix=MISSING -DPATH=%t.missing.so
// RUN: not mstep-opt --load-plugin %not_a_plugin %s 2>&1 | FileCheck %s --check-prefix=NOTPLUGIN -DPATH=%not_a_plugin
// RUN: not mstep-opt --load-plugin %custom_ops_plugin --load-plugin %conflicting_plugin %s 2>&1 | FileCheck %s --check-prefix=CONFLICT -DPATH=%conflicting_plugin

// CHECK-LABEL: func.func @softplus
// CHECK: mstep.custom "scaled_softplus"
// NOPLUGIN: mstep-opt-load-plugin.mlir:[[@LINE+3]]:8: error: 'mstep.custom' op custom op 'scaled_softplus' version 1 is not registered in this process; load the library that registers it (mstep-opt --load-plugin libmyops.so)
// MISSING: mstep-opt: cannot load plugin [[PATH]]: [[PATH]]: cannot open shared object file: No such file or directory
func.func @softplus(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = mstep.custom "scaled_softplus"(%x) {user_attrs = {beta = 2.0 : f64}} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
// NOTPLUGIN: mstep-opt: [[PATH]] is not an mstep plugin: it exports no mstep_plugin_init (define it with MSTEP_PLUGIN(fn) from mstep/runtime/Plugin.h)
// CONFLICT: mstep-opt: plugin [[PATH]] failed to register its custom ops: custom op 'scaled_softplus' version 1 is already registered with another schema
