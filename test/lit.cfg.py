# lit suite for mstep's MLIR tests: every *.mlir file under test/ is a test
# whose RUN lines use mstep-opt (from the build) and FileCheck, not, count
# (from LLVM 19). Run it through ctest (`ctest -L lit`) or directly:
#   /usr/lib/llvm-19/build/utils/lit/lit.py -sv <build>/test
# which finds <build>/test/lit.site.cfg.py, configured by CMake.
import os

import lit.formats

config.name = "mstep"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.mstep_obj_root, "test")
# fuzz/ holds the fuzzer's seed corpus and aot/ mstep-aot's test steps:
# .mlir inputs, not lit tests.
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in", "unit", "oracle",
                   "tools", "fuzz", "aot"]

# Plugins (test/plugin) for `mstep-opt --load-plugin`: the custom ops the
# modules call, one whose registration conflicts with it, and a library
# that is no plugin.
plugin_dir = os.path.join(config.mstep_obj_root, "test", "plugin")
for name, library in [("%custom_ops_plugin", "lit_custom_ops"),
                      ("%conflicting_plugin", "conflicting_plugin"),
                      ("%not_a_plugin", "not_a_plugin")]:
    config.substitutions.append(
        (name, os.path.join(plugin_dir, "libmstep_test_" + library + ".so")))

# The build's mstep-opt first, then LLVM 19's FileCheck, not and count.
config.environment["PATH"] = os.pathsep.join(
    [config.mstep_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
