# -DKOLO_FUZZ=ON: kolo's code is built with -fsanitize=fuzzer-no-link (edge
# coverage for libFuzzer, no main), and the targets in fuzz/ link libFuzzer's
# main with -fsanitize=fuzzer (fuzz/CMakeLists.txt). Combine with
# -DKOLO_SANITIZE=address,undefined (scripts/fuzz.sh does).
if(KOLO_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "KOLO_FUZZ=ON needs clang (libFuzzer); this is "
            "${CMAKE_CXX_COMPILER_ID}. Configure with -DCMAKE_C_COMPILER=clang "
            "-DCMAKE_CXX_COMPILER=clang++ (scripts/fuzz.sh does).")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
