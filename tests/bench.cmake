# kolo-bench: its parts in-process, and the program under kolorun.
kolo_add_test(bench_core_test SOURCES bench_core_test.cc
  LIBS kolo_bench_core LABELS unit tsan)
kolo_add_test(multiprocess_bench_test SOURCES multiprocess_bench_test.cc
  LIBS kolo_testing LABELS multiprocess SERIAL TIMEOUT 600)
add_dependencies(multiprocess_bench_test kolo-bench kolorun)
