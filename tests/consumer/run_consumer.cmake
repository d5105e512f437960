# STEP=build: install hipgrad, configure and build the consumer. STEP=run: run what was built.
string(REPLACE "|" ";" backend_args "${BACKEND_ARGS}")
set(prefix ${WORK_DIR}/prefix)

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${what} failed (${result}):\n${out}\n${err}")
  endif()
  message(STATUS "${what}: ok")
endfunction()

if(STEP STREQUAL "run")
  execute_process(COMMAND ${WORK_DIR}/build/consumer_block_reduce RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}${err}")
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "consumer_block_reduce exited with ${result}")
  endif()
  return()
endif()

file(REMOVE_RECURSE ${WORK_DIR})
run_step("install hipgrad" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
if(NOT EXISTS ${prefix}/include/hipgrad/hipgrad.hpp)
  message(FATAL_ERROR "the install put no hipgrad/hipgrad.hpp under ${prefix}/include")
endif()
run_step("configure the consumer" ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build -G ${GENERATOR}
  -DCMAKE_PREFIX_PATH=${prefix} ${backend_args})
run_step("build the consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)

