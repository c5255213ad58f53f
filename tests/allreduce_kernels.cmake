# allreduce/ reduction kernels: pure functions, no threads or sockets.
kolo_add_test(allreduce_kernels_test
  SOURCES allreduce_kernels_test.cc allreduce_half_test.cc
  LIBS kolo_allreduce
  LABELS unit tsan)
