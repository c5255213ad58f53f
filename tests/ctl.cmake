# kolo-ctl (ctl/) and the Status RPC's authentication
# (coordinator/status_auth.h). The formatting, options and auth tests link no
# gRPC (TSan-safe); the end-to-end test runs a real coordinator and the
# kolo-ctl binary.
kolo_add_test(ctl_format_test
  SOURCES ctl_format_test.cc
  LIBS kolo_ctl
  LABELS unit tsan)
kolo_add_test(ctl_options_test
  SOURCES ctl_options_test.cc
  LIBS kolo_ctl
  LABELS unit tsan)
kolo_add_test(ctl_status_auth_test
  SOURCES ctl_status_auth_test.cc
  LIBS kolo_status_auth
  LABELS unit tsan)
kolo_add_test(ctl_end_to_end_test
  SOURCES ctl_end_to_end_test.cc
  LIBS kolo_coordinator kolo_ctl_client
  LABELS unit)
add_dependencies(ctl_end_to_end_test kolo-ctl)
kolo_add_test(ctl_run_test
  SOURCES ctl_run_test.cc
  LIBS kolo_ctl
  LABELS unit tsan)
# kolo-coordinator's command line (coordinator/flags.h), also CLI11.
kolo_add_test(ctl_coordinator_flags_test
  SOURCES ctl_coordinator_flags_test.cc
  LIBS kolo_coordinator_flags
  LABELS unit tsan)
