# Warning flags for kolo's own targets (never for generated or third-party code).
# kolo_target_warnings(<target>) adds them; KOLO_WERROR turns them into errors.
set(KOLO_WARNING_FLAGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
    -Wcast-align -Woverloaded-virtual -Wnull-dereference -Wformat=2 -Wimplicit-fallthrough)
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  # Compile-time lock checking: kolo::Mutex carries capability annotations.
  list(APPEND KOLO_WARNING_FLAGS -Wthread-safety -Werror=thread-safety)
endif()
if(KOLO_WERROR)
  list(APPEND KOLO_WARNING_FLAGS -Werror)
endif()

function(kolo_target_warnings target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${KOLO_WARNING_FLAGS}>)
endfunction()
