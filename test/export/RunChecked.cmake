# Helpers of the export round-trip scripts (RoundTrip.cmake,
# CustomOpRoundTrip.cmake).

# Runs a command; fails the test with its output when it exits non-zero.
function(run_checked)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${out}")
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "failed (${status}): ${ARGN}\n${out}${err}")
  endif()
endfunction()

# Runs a command that must fail with exit status `code` and say each of the
# strings after EXPECT on stderr.
function(run_failing code)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "COMMAND;EXPECT")
  execute_process(COMMAND ${arg_COMMAND} RESULT_VARIABLE status ERROR_VARIABLE err OUTPUT_QUIET)
  if(NOT status EQUAL ${code})
    message(FATAL_ERROR "${arg_COMMAND} exited ${status}, expected ${code}:\n${err}")
  endif()
  foreach(expected IN LISTS arg_EXPECT)
    string(FIND "${err}" "${expected}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "${arg_COMMAND}: the error does not say \"${expected}\":\n${err}")
    endif()
  endforeach()
endfunction()

# A fresh private directory under $TMPDIR (or /tmp), in `var`: load_graph
# refuses files on a path another user can change, which a checkout's
# directory may be.
function(make_private_dir var prefix)
  execute_process(COMMAND mktemp -d -t ${prefix}.XXXXXX
                  OUTPUT_VARIABLE dir OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "mktemp -d failed")
  endif()
  set(${var} ${dir} PARENT_SCOPE)
endfunction()
