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
# The replay-after-failure case (mstep-run --bad-value; issue 22 §4) where
# the backend stops a step on a class index out of range (ref, cpu): step 1
# of 2 with label 12 (of 10) fails naming it, the run goes on, and the
# weights after it are step 0's alone, bitwise.
if(DEVICE STREQUAL "ref" OR DEVICE STREQUAL "cpu")
  execute_process(COMMAND ${RUN} ${DIR}/step.mstep --steps 2 --bad-value y:1:12
                          --outputs ${DIR}/after_failure.safetensors
                  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(FIND "${out}" "step 1 failed: " failed_at)
  string(FIND "${out}" "mstep::nll_loss: target 12 at position 0 is out of range for C = 10 classes" at)
  if(NOT status EQUAL 0 OR failed_at EQUAL -1 OR at EQUAL -1)
    message(FATAL_ERROR "--bad-value y:1:12 exited ${status} and did not report the target:\n${out}${err}")
  endif()
  run_checked(${RUN} ${DIR}/step.mstep --steps 1 --outputs ${DIR}/one_step.safetensors)
  run_checked(${WORKER} compare ${DIR}/one_step.safetensors ${DIR}/after_failure.safetensors)
  run_failing(2 COMMAND ${RUN} ${DIR}/step.mstep --bad-value y:1
              EXPECT "--bad-value wants NAME:STEP:VALUE, got 'y:1'")
  run_failing(2 COMMAND ${RUN} ${DIR}/step.mstep --bad-value images:0:1
              EXPECT "--bad-value: 'images' is not an input of the step")
endif()
file(REMOVE_RECURSE ${DIR})
