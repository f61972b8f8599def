# The exported-graph round trip across processes (see export_worker.cpp):
#   cmake -DWORKER=... -DRUN=<mstep-run> -DDEVICE=cpu|ref|neuron -DSTEPS=N -P RoundTrip.cmake
# The files go to a fresh private directory (make_private_dir).
include(${CMAKE_CURRENT_LIST_DIR}/RunChecked.cmake)
make_private_dir(DIR mstep_export_${DEVICE})
run_checked(${WORKER} export ${DIR} ${DEVICE} ${STEPS})
run_checked(${RUN} ${DIR}/step.mstep --inputs ${DIR}/inputs.safetensors --steps ${STEPS}
            --outputs ${DIR}/got.safetensors)
run_checked(${WORKER} compare ${DIR}/expected.safetensors ${DIR}/got.safetensors)

# Inputs of the wrong name, shape and dtype: one error naming each.
run_checked(${WORKER} bad_inputs ${DIR}/bad.safetensors)
run_failing(2 COMMAND ${RUN} ${DIR}/step.mstep --inputs ${DIR}/bad.safetensors --steps ${STEPS}
            EXPECT "'images' is not an input of the step" "'x' has shape [3, 5]"
                   "'y' is f32, the step's input is i64[16]")
file(REMOVE_RECURSE ${DIR})
