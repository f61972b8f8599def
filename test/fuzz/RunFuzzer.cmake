# ctest driver of the fuzz test (cmake -P): fuzzes the mstep parser and
# verifiers for a bounded time, starting from a fresh copy of the seed
# corpus in the build tree (libFuzzer writes new inputs into its corpus
# directory, which must never be the source tree). Fails when libFuzzer
# reports a crash, a sanitizer error, a timeout or running out of memory,
# and names the reproducer it saved.
#
# Variables: FUZZER (the binary), SEED_CORPUS, DICT, WORK_DIR, SECONDS.
foreach(var FUZZER SEED_CORPUS DICT WORK_DIR SECONDS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "RunFuzzer.cmake needs -D${var}=...")
  endif()
endforeach()
foreach(path FUZZER SEED_CORPUS DICT WORK_DIR)
  get_filename_component(${path} "${${path}}" ABSOLUTE)
endforeach()

# 1. A fresh working corpus and artifact directory for every run.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/corpus ${WORK_DIR}/artifacts)
file(GLOB seeds ${SEED_CORPUS}/*)
file(COPY ${seeds} DESTINATION ${WORK_DIR}/corpus)

# 2. Fuzz. -timeout bounds one input, -rss_limit_mb the whole process (ASan's
#    quarantine alone takes 256 MB).
execute_process(
  COMMAND ${FUZZER} -max_total_time=${SECONDS} -timeout=10 -rss_limit_mb=2048
          -dict=${DICT} -artifact_prefix=${WORK_DIR}/artifacts/ -print_final_stats=1
          ${WORK_DIR}/corpus
  WORKING_DIRECTORY ${WORK_DIR}
  RESULT_VARIABLE status)

# 3. Any artifact fails the test; so does a non-zero exit without one (the
#    fuzzer could not start, or died before saving the input).
file(GLOB artifacts ${WORK_DIR}/artifacts/*)
if(artifacts)
  message(FATAL_ERROR
    "The fuzzer found a bug (exit status ${status}). Reproducer(s):\n  ${artifacts}\n"
    "Replay: ${FUZZER} <reproducer>; see the diagnostics: mstep-opt <reproducer>. "
    "Fix the verifier, parser or folder, and add the input as a case to test/ir/invalid.mlir.")
elseif(NOT status EQUAL 0)
  message(FATAL_ERROR "The fuzzer failed (exit status ${status}) without a reproducer; "
                      "see its output above")
endif()
message(STATUS "No crash, timeout or OOM in ${SECONDS} s of fuzzing")
