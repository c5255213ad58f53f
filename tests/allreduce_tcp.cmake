# allreduce/tcp/: the TCP transport (N ranks = N threads over loopback).
kolo_add_test(allreduce_tcp_transport_test
  SOURCES allreduce_tcp_transport_test.cc LIBS kolo_allreduce LABELS unit tsan)
kolo_add_test(allreduce_tcp_handshake_test
  SOURCES allreduce_tcp_handshake_test.cc LIBS kolo_allreduce LABELS unit tsan)
# Throughput on loopback, by hand (not a test: it measures, asserts nothing):
#   <build>/bin/kolo-tcp-throughput --gtest_also_run_disabled_tests
add_executable(kolo-tcp-throughput allreduce_tcp_bench_test.cc)
target_link_libraries(kolo-tcp-throughput PRIVATE kolo_allreduce kolo_testing
  GTest::gtest_main)
kolo_target_warnings(kolo-tcp-throughput)
kolo_add_test(allreduce_tcp_acceptor_test
  SOURCES allreduce_tcp_acceptor_test.cc LIBS kolo_allreduce LABELS unit tsan)
kolo_add_test(allreduce_tcp_record_cipher_test
  SOURCES allreduce_tcp_record_cipher_test.cc LIBS kolo_allreduce LABELS unit tsan)
kolo_add_test(allreduce_tcp_encryption_test
  SOURCES allreduce_tcp_encryption_test.cc LIBS kolo_allreduce LABELS unit tsan)
