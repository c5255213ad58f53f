# worker_lib/: configuration from the environment (no gRPC, so also under
# TSan), and the Session client against an in-process coordinator.
kolo_add_test(worker_lib_config_test SOURCES worker_lib_config_test.cc
  LIBS kolo_worker_config LABELS unit tsan)
kolo_add_test(worker_lib_session_test SOURCES worker_lib_session_test.cc
  LIBS kolo LABELS unit)
kolo_add_test(worker_lib_lease_test SOURCES worker_lib_lease_test.cc
  LIBS kolo LABELS unit)
kolo_add_test(worker_lib_api_test SOURCES worker_lib_api_test.cc
  LIBS kolo LABELS unit)

# Multi-process: workers started from torchrun-style variables (no kolorun).
add_executable(kolo-test-worker worker_lib_test_worker.cc)
target_link_libraries(kolo-test-worker PRIVATE kolo)
kolo_target_warnings(kolo-test-worker)
kolo_add_test(worker_lib_env_start_test SOURCES worker_lib_env_start_test.cc
  LIBS kolo_common LABELS multiprocess SERIAL)
add_dependencies(worker_lib_env_start_test kolo-test-worker)
