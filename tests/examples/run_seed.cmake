# Runs one seed command (EXE with ARGS, '|'-separated) on a GPU: passes when it exits 0, no
# verification line says FAILED, with VERIFY at least one says ok, and, with PERF, it prints a
# Perf line. Without a GPU the example says "no GPU available", which the test's
# SKIP_REGULAR_EXPRESSION turns into a skip.
string(REPLACE "|" ";" args "${ARGS}")
execute_process(COMMAND ${EXE} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if("${out}${err}" MATCHES "no GPU available")
  return()
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "exit status ${rc}")
endif()
if("${out}" MATCHES "verification[^\n:]*: FAILED")
  message(FATAL_ERROR "the verification failed")
endif()
if(VERIFY AND NOT "${out}" MATCHES "verification[^\n:]*: ok")
  message(FATAL_ERROR "no verification line says ok")
endif()
if(PERF AND NOT "${out}" MATCHES "Perf: [0-9.]+ ms")
  message(FATAL_ERROR "no Perf line")
endif()
