# The ops layer tests no platform macro (docs/architecture.md): no header under
# include/hipgrad/ops/ holds a preprocessor conditional; what differs between backends lives in
# core/, primitives/ and the GEMM's arch/ and device/ layers. The GEMM's collective/ and kernel/
# layers test only the features arch/ and primitives/ define (HIPGRAD_GEMM_*, HIPGRAD_CP_ASYNC),
# never a platform or backend macro.

# Fails where a conditional of a header under `folders` matches `forbidden`; prints `what`.
function(check_conditionals what forbidden)
  set(globs "")
  foreach(folder IN LISTS ARGN)
    list(APPEND globs ${INCLUDE_DIR}/hipgrad/${folder}/*.hpp)
  endforeach()
  file(GLOB_RECURSE headers RELATIVE ${INCLUDE_DIR} ${globs})
  list(LENGTH headers count)
  if(count EQUAL 0)
    message(FATAL_ERROR "no headers found under ${INCLUDE_DIR}/hipgrad/{${ARGN}}")
  endif()
  set(offenders "")
  foreach(header IN LISTS headers)
    file(STRINGS ${INCLUDE_DIR}/${header} lines REGEX "^[ \t]*#[ \t]*(if|ifdef|ifndef|elif)")
    foreach(line IN LISTS lines)
      if(line MATCHES "${forbidden}")
        list(APPEND offenders "${header}: ${line}")
      endif()
    endforeach()
  endforeach()
  if(offenders)
    string(REPLACE ";" "\n  " listed "${offenders}")
    message(FATAL_ERROR "${what} headers that break the rule:\n  ${listed}")
  endif()
  message("${count} ${what} headers, none breaking the rule")
endfunction()

check_conditionals("ops" "." ops)
check_conditionals("GEMM collective and kernel" "__CUDA|__HIP|__gfx|HIPGRAD_BACKEND_|__NVCC__|__clang__" gemm/collective
                   gemm/kernel)
