# A step saved on a device whose executables have no stored form yet (xla)
# does not replay in mstep-run, which has no compiler: the error names the
# device and what to do instead.
#   cmake -DWORKER=... -DRUN=<mstep-run> -DDEVICE=xla -P NoStoredForm.cmake
include(${CMAKE_CURRENT_LIST_DIR}/RunChecked.cmake)
make_private_dir(DIR mstep_export_${DEVICE})
run_checked(${WORKER} export ${DIR} ${DEVICE} 2)
run_failing(1 COMMAND ${RUN} ${DIR}/step.mstep --inputs ${DIR}/inputs.safetensors --steps 2
            EXPECT "does not load" "xla executables have no stored form yet" "libmstep_compiler")
file(REMOVE_RECURSE ${DIR})
