# The exported-graph round trip across processes (see export_worker.cpp):
#   cmake -DWORKER=... -DRUN=<mstep-run> -DDEVICE=cpu|ref -DSTEPS=N -P RoundTrip.cmake
# The files go to a fresh private directory under $TMPDIR (or /tmp):
# load_graph refuses files on a path another user can change, which a
# checkout's directory may be.
function(run_checked)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${out}")
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "failed (${status}): ${ARGN}\n${out}${err}")
  endif()
endfunction()

execute_process(COMMAND mktemp -d -t mstep_export_${DEVICE}.XXXXXX
                OUTPUT_VARIABLE DIR OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "mktemp -d failed")
endif()
run_checked(${WORKER} export ${DIR} ${DEVICE} ${STEPS})
run_checked(${RUN} ${DIR}/step.mstep --inputs ${DIR}/inputs.safetensors --steps ${STEPS}
            --outputs ${DIR}/got.safetensors)
run_checked(${WORKER} compare ${DIR}/expected.safetensors ${DIR}/got.safetensors)

# Inputs of the wrong name, shape and dtype: one error naming each.
run_checked(${WORKER} bad_inputs ${DIR}/bad.safetensors)
execute_process(COMMAND ${RUN} ${DIR}/step.mstep --inputs ${DIR}/bad.safetensors --steps ${STEPS}
                RESULT_VARIABLE status ERROR_VARIABLE err OUTPUT_QUIET)
if(NOT status EQUAL 2)
  message(FATAL_ERROR "mstep-run with bad inputs exited ${status}, expected 2:\n${err}")
endif()
foreach(expected "'images' is not an input of the step" "'x' has shape [3, 5]"
                 "'y' is f32, the step's input is i64[16]")
  string(FIND "${err}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "mstep-run's error does not say \"${expected}\":\n${err}")
  endif()
endforeach()
file(REMOVE_RECURSE ${DIR})
