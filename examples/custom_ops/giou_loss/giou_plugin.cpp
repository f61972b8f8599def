// The GIoU loss's custom ops as a plugin (mstep/runtime/Plugin.h): a shared
// library with the runtime alone, for replaying an exported step that uses
// them in a process that did not compile them in:
//   mstep-run --plugin libmstep_giou_plugin.so step.mstep
//   mstep-opt --load-plugin libmstep_giou_plugin.so module.mlir
#include "examples/custom_ops/giou_loss/GiouOps.h"
#include "mstep/runtime/Plugin.h"

MSTEP_PLUGIN(mstep::examples::register_giou_ops)
