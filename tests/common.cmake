# common/: authentication, networking and socket helpers, element types and
# reduce ops, Mutex/CondVar, logging, the shared knobs.
kolo_add_test(common_auth_test SOURCES common_auth_test.cc LIBS kolo_common LABELS unit tsan)
kolo_add_test(common_net_test SOURCES common_net_test.cc LIBS kolo_common LABELS unit tsan)
kolo_add_test(common_sync_test SOURCES common_sync_test.cc LIBS kolo_common LABELS unit tsan)
kolo_add_test(common_framing_test SOURCES common_framing_test.cc LIBS kolo_common LABELS unit tsan)
kolo_add_test(common_rate_limited_log_test SOURCES common_rate_limited_log_test.cc LIBS kolo_common LABELS unit tsan)
kolo_add_test(common_types_test SOURCES common_types_test.cc LIBS kolo_common LABELS unit tsan)
kolo_add_test(common_socket_test SOURCES common_socket_test.cc LIBS kolo_common LABELS unit tsan)
kolo_add_test(common_knobs_test SOURCES common_knobs_test.cc LIBS kolo_common LABELS unit tsan)
kolo_add_test(common_fault_spec_test SOURCES common_fault_spec_test.cc LIBS kolo_common LABELS unit tsan)
kolo_add_test(common_fd_limit_test SOURCES common_fd_limit_test.cc LIBS kolo_common LABELS unit tsan)
# The table of variables against docs/configuration.md's tables.
kolo_add_test(common_variables_test SOURCES common_variables_test.cc LIBS kolo_common LABELS unit tsan)
target_compile_definitions(common_variables_test PRIVATE
  KOLO_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
# A job's TLS certificates: files, checks, throwaway CAs (issue 38).
kolo_add_test(common_tls_test SOURCES common_tls_test.cc LIBS kolo_tls LABELS unit tsan)
