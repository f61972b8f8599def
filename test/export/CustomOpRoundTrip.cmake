# Custom ops across processes: giou_export_worker (libmstep, the GIoU ops
# compiled in) trains, captures, saves and replays a step that calls the
# giou_loss custom op and its backward op; mstep-run (the runtime alone)
# replays the saved step with the ops from the plugin; losses and weights
# must be bitwise equal. Without the plugin, or with a plugin that does not
# load, mstep-run refuses, naming what is missing.
#   cmake -DWORKER=<giou_export_worker> -DCOMPARE=<mstep_export_worker>
#         -DRUN=<mstep-run> -DPLUGIN=<libmstep_giou_plugin.so>
#         -DNOT_A_PLUGIN=<a shared library without mstep_plugin_init>
#         -DDEVICE=cpu|ref|neuron -DSTEPS=N -P CustomOpRoundTrip.cmake
include(${CMAKE_CURRENT_LIST_DIR}/RunChecked.cmake)
make_private_dir(DIR mstep_export_custom_${DEVICE})

run_checked(${WORKER} ${DIR} ${DEVICE} ${STEPS})
run_checked(${RUN} --plugin ${PLUGIN} ${DIR}/step.mstep --inputs ${DIR}/inputs.safetensors
            --steps ${STEPS} --outputs ${DIR}/got.safetensors)
run_checked(${COMPARE} compare ${DIR}/expected.safetensors ${DIR}/got.safetensors)

# The plugin twice (registration is idempotent); --list names the ops.
execute_process(COMMAND ${RUN} --plugin ${PLUGIN} --plugin ${PLUGIN} ${DIR}/step.mstep --list
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "mstep-run with the plugin twice exited ${status}:\n${err}")
endif()
foreach(expected "custom op giou_loss version 1" "custom op giou_loss_backward version 1")
  string(FIND "${out}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "mstep-run --list does not say \"${expected}\":\n${out}")
  endif()
endforeach()

# Without the plugin: not loaded, nothing run (exit 1, the file does not load).
run_failing(1 COMMAND ${RUN} ${DIR}/step.mstep --inputs ${DIR}/inputs.safetensors --steps ${STEPS}
            EXPECT "needs custom op 'giou_loss' version 1" "'giou_loss_backward' version 1"
                   "which this process has not registered" "mstep-run --plugin")
# A plugin that does not load: exit 2, naming the path and the reason.
run_failing(2 COMMAND ${RUN} --plugin ${DIR}/libnope.so ${DIR}/step.mstep
            EXPECT "cannot load plugin ${DIR}/libnope.so" "No such file")
run_failing(2 COMMAND ${RUN} --plugin ${NOT_A_PLUGIN} ${DIR}/step.mstep
            EXPECT "${NOT_A_PLUGIN} is not an mstep plugin" "mstep_plugin_init")
file(REMOVE_RECURSE ${DIR})
