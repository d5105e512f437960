# Helpers for hipgrad's own examples, tests and benchmarks.
include_guard(GLOBAL)

# hipgrad_gpu_sources(<source>...)
#   Marks sources that hold kernels. Under nvcc they are compiled as CUDA; under hipcc every C++
#   source is already HIP. Sources not marked are plain C++ and must include host-only headers.
function(hipgrad_gpu_sources)
  if(HIPGRAD_BACKEND STREQUAL "CUDA")
    set_source_files_properties(${ARGN} DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} PROPERTIES LANGUAGE CUDA)
  endif()
endfunction()

# Warnings for hipgrad's own targets (the library itself imposes none on its users).
# Examples and benchmarks build with the flags a user's project has (the library must not need
# --expt-relaxed-constexpr); the tests call constexpr host helpers from their own kernels.
function(hipgrad_warnings target)
  if(HIPGRAD_BACKEND STREQUAL "CUDA")
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>
      $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
  else()
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-command-line-argument)
  endif()
endfunction()

# hipgrad_add_example(<name> SOURCES <source>...)
function(hipgrad_add_example name)
  cmake_parse_arguments(ARG "" "" "SOURCES" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  hipgrad_gpu_sources(${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE hipgrad::hipgrad Threads::Threads)
  hipgrad_warnings(${name})
endfunction()

# hipgrad_add_test(<name> SOURCES <source>... [GPU] [LABELS <label>...])
#   One GoogleTest executable; every test case becomes a CTest test (listed when CTest runs, so
#   that building never needs a GPU). GPU: the sources hold kernels.
function(hipgrad_add_test name)
  cmake_parse_arguments(ARG "GPU" "" "SOURCES;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  if(ARG_GPU)
    hipgrad_gpu_sources(${ARG_SOURCES})
    list(APPEND ARG_LABELS gpu)
  else()
    list(APPEND ARG_LABELS cpu)
  endif()
  target_link_libraries(${name} PRIVATE hipgrad::hipgrad GTest::gtest_main Threads::Threads)
  hipgrad_warnings(${name})
  if(HIPGRAD_BACKEND STREQUAL "CUDA")
    target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>)
  endif()
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 120
    PROPERTIES LABELS "${ARG_LABELS}")
endfunction()
