# Launcher tests. launcher_args_test covers the pure parts (no gRPC, no
# processes: TSan-safe); the others run real processes — the kolorun binary,
# or the supervisor with kolorun as its guard — and are RUN_SERIAL.
kolo_add_test(launcher_args_test
  SOURCES launcher_args_test.cc
  LIBS kolo_launcher_core
  LABELS unit tsan)
kolo_add_test(launcher_supervisor_test
  SOURCES launcher_supervisor_test.cc
  LIBS kolo_launcher_core
  LABELS multiprocess SERIAL)
add_dependencies(launcher_supervisor_test kolorun)
kolo_add_test(launcher_process_test
  SOURCES launcher_process_test.cc
  LABELS multiprocess SERIAL)
add_dependencies(launcher_process_test kolorun)
# What a worker gets (launcher/command_line.h, line_prefixer.h): the
# forwarded environment, -x, ssh port and identity, timestamps, output files.
kolo_add_test(launcher_command_line_test
  SOURCES launcher_command_line_test.cc
  LIBS kolo_launcher_core
  LABELS unit)
kolo_add_test(launcher_slots_test
  SOURCES launcher_slots_test.cc
  LIBS kolo_launcher_core
  LABELS unit tsan)
kolo_add_test(launcher_discovery_test
  SOURCES launcher_discovery_test.cc
  LIBS kolo_launcher_core
  LABELS unit)
kolo_add_test(launcher_elastic_test
  SOURCES launcher_elastic_test.cc
  LIBS kolo_launcher_core
  LABELS multiprocess SERIAL)
add_dependencies(launcher_elastic_test kolorun)
kolo_add_test(launcher_ctl_access_test
  SOURCES launcher_ctl_access_test.cc
  LIBS kolo_launcher_core
  LABELS unit tsan)
# kolorun's TLS for a job (issue 38): throwaway files, given files.
kolo_add_test(launcher_job_tls_test
  SOURCES launcher_job_tls_test.cc
  LIBS kolo_launcher_core kolo_tls
  LABELS unit tsan)
kolo_add_test(launcher_fault_driver_test
  SOURCES launcher_fault_driver_test.cc
  LIBS kolo_launcher_faults kolo_launcher_core
  LABELS unit)
# kolorun's coordinator, killed and started again at its port.
kolo_add_test(launcher_embedded_coordinator_test
  SOURCES launcher_embedded_coordinator_test.cc
  LIBS kolo_launcher_coordinator
  LABELS unit)
# horovodrun's command line (launcher/horovod_flags.h, config_file.h,
# horovod_variables.h) and --hostfile: pure parsing, files given in memory.
kolo_add_test(launcher_horovod_flags_test
  SOURCES launcher_horovod_flags_test.cc
  LIBS kolo_launcher_core kolo_launcher_check_build
  LABELS unit tsan)
kolo_add_test(launcher_hostfile_test
  SOURCES launcher_hostfile_test.cc
  LIBS kolo_launcher_core
  LABELS unit tsan)
