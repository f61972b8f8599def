# ptxas -v for one architecture, keeping its report (stderr) in a file:
#   cmake -DPTXAS=... -DARCH=sm_90 -DPTX=in.ptx -DCUBIN=out.cubin -DREPORT=out.txt -P RunPtxas.cmake
execute_process(COMMAND ${PTXAS} -v -arch=${ARCH} ${PTX} -o ${CUBIN}
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE log)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "ptxas -arch=${ARCH} ${PTX} failed (${status}):\n${out}${log}")
endif()
file(WRITE ${REPORT} "${out}${log}")
