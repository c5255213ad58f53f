# Multi-process tests: real workers through kolorun, or started the way
# torchrun / Slurm / Open MPI start them, on loopback. RUN_SERIAL: they spawn
# many processes on a 2-core machine.
add_executable(kolo-mp-worker workers/mp_worker.cc)
target_link_libraries(kolo-mp-worker PRIVATE kolo_worker)
kolo_target_warnings(kolo-mp-worker)

add_library(kolo_mp_testing STATIC testing/topology.cc testing/netns.cc)
target_link_libraries(kolo_mp_testing PUBLIC kolo_testing)
kolo_target_warnings(kolo_mp_testing)

kolo_add_test(multiprocess_kolorun_test SOURCES multiprocess_kolorun_test.cc
  LIBS kolo_mp_testing LABELS multiprocess SERIAL TIMEOUT 600)
kolo_add_test(multiprocess_env_test SOURCES multiprocess_env_test.cc
  LIBS kolo_mp_testing LABELS multiprocess SERIAL TIMEOUT 600)
add_dependencies(multiprocess_kolorun_test kolo-mp-worker kolorun kolo-hello)
add_dependencies(multiprocess_env_test kolo-mp-worker kolo-coordinator)
kolo_add_test(multiprocess_netns_test SOURCES multiprocess_netns_test.cc
  LIBS kolo_mp_testing LABELS multiprocess SERIAL TIMEOUT 300)
add_dependencies(multiprocess_netns_test kolo-mp-worker kolorun
  kolo-elastic-worker kolo-hier-worker)
# kolorun over real OpenSSH: two namespaces, each with its own sshd; what a
# remote worker gets (environment, -x, the secret kept off command lines).
# Skipped without root, ip netns or sshd.
kolo_add_test(multiprocess_sshd_test SOURCES multiprocess_sshd_test.cc
  LIBS kolo_mp_testing LABELS multiprocess SERIAL TIMEOUT 300)
target_compile_definitions(multiprocess_sshd_test PRIVATE
  KOLO_ENV_REPORT_SH="${CMAKE_CURRENT_SOURCE_DIR}/workers/env_report.sh")
add_dependencies(multiprocess_sshd_test kolo-mp-worker kolorun)

# The collective grid of issue 3 point 6 through kolorun and the public API:
# kolo-grid-worker loops over dtypes, ops and counts inside one job per world
# size and algorithm (tests/workers/grid_worker.cc).
add_executable(kolo-grid-worker workers/grid_worker.cc workers/grid_check.cc)
target_link_libraries(kolo-grid-worker PRIVATE kolo_worker kolo_collective_testing)
kolo_target_warnings(kolo-grid-worker)
kolo_add_test(multiprocess_grid_test SOURCES multiprocess_grid_test.cc
  LIBS kolo_mp_testing LABELS multiprocess SERIAL TIMEOUT 900)
add_dependencies(multiprocess_grid_test kolo-grid-worker kolorun)

# The negotiated runtime of issue 4: orders, mismatches, duplicates, stalls and
# a killed worker, through kolorun (tests/workers/negotiation_worker.cc).
add_executable(kolo-negotiation-worker workers/negotiation_worker.cc)
target_link_libraries(kolo-negotiation-worker PRIVATE kolo_worker)
kolo_target_warnings(kolo-negotiation-worker)
kolo_add_test(multiprocess_negotiation_test
  SOURCES multiprocess_negotiation_test.cc
  LIBS kolo_mp_testing nlohmann_json::nlohmann_json
  LABELS multiprocess SERIAL TIMEOUT 600)
add_dependencies(multiprocess_negotiation_test kolo-negotiation-worker kolorun
  kolo-ctl)

# Fusion, the response cache and the timeline of issue 5: exact results over
# the grid of settings, settings switched at run time, metadata changes, and
# the timeline file (tests/workers/fusion_worker.cc).
add_executable(kolo-fusion-worker workers/fusion_worker.cc)
target_link_libraries(kolo-fusion-worker PRIVATE kolo_worker)
kolo_target_warnings(kolo-fusion-worker)
kolo_add_test(multiprocess_fusion_test SOURCES multiprocess_fusion_test.cc
  LIBS kolo_mp_testing protobuf::libprotobuf LABELS multiprocess SERIAL
  TIMEOUT 600)
add_dependencies(multiprocess_fusion_test kolo-fusion-worker kolorun)

# Autotune (issue 36 point 3): kolorun --autotune jobs of kolo-fusion-worker;
# every rank switches at the same plan.
kolo_add_test(multiprocess_autotune_test SOURCES multiprocess_autotune_test.cc
  LIBS kolo_mp_testing LABELS multiprocess SERIAL TIMEOUT 300)
add_dependencies(multiprocess_autotune_test kolo-fusion-worker kolorun)

# Every collective and option through the negotiated API with exact values,
# and the errors of each on every rank (issue 6 point 1): one kolorun job per
# world size 2..5 (tests/workers/collectives_worker.cc).
# Exact element encoding and comparison for the workers that check
# collectives through the public API (tests/testing/elements.h).
add_library(kolo_test_elements STATIC testing/elements.cc)
target_link_libraries(kolo_test_elements PUBLIC kolo_worker)
kolo_target_warnings(kolo_test_elements)

# One program in files by kind of collective (workers/collectives_worker.h).
add_executable(kolo-collectives-worker workers/collectives_worker.cc
  workers/collectives_worker_values.cc workers/collectives_worker_reductions.cc
  workers/collectives_worker_movement.cc workers/collectives_worker_errors.cc)
target_link_libraries(kolo-collectives-worker PRIVATE kolo_worker kolo_test_elements)
kolo_target_warnings(kolo-collectives-worker)
kolo_add_test(multiprocess_collectives_test
  SOURCES multiprocess_collectives_test.cc
  LIBS kolo_mp_testing LABELS multiprocess SERIAL TIMEOUT 600)
add_dependencies(multiprocess_collectives_test kolo-collectives-worker kolorun)

# Grouped ops, join with uneven batches and overlapping process sets through
# the public API, with exact values and the errors of each on every rank: one
# kolorun job per world size 2..5, and one of three ranks with static sets and
# KOLO_DISABLE_GROUP_FUSION=1 (tests/workers/groups_worker.cc).
# One program in files by feature (workers/groups_worker.h).
add_executable(kolo-groups-worker workers/groups_worker.cc
  workers/groups_worker_common.cc workers/groups_worker_cases.cc
  workers/groups_worker_grouped.cc workers/groups_worker_sets.cc
  workers/groups_worker_join.cc)
target_link_libraries(kolo-groups-worker PRIVATE kolo_worker kolo_test_elements)
kolo_target_warnings(kolo-groups-worker)
kolo_add_test(multiprocess_groups_test SOURCES multiprocess_groups_test.cc
  LIBS kolo_mp_testing LABELS multiprocess SERIAL TIMEOUT 600)
add_dependencies(multiprocess_groups_test kolo-groups-worker kolorun)

# Hardening (issue 16): huge shapes, long names, groups the ranks disagree
# on, ops abandoned at shutdown, returning from main without shutdown, and
# blame after a stopped worker (tests/workers/hardening_worker.cc).
add_executable(kolo-hardening-worker workers/hardening_worker.cc)
target_link_libraries(kolo-hardening-worker PRIVATE kolo_worker)
kolo_target_warnings(kolo-hardening-worker)
kolo_add_test(multiprocess_hardening_test
  SOURCES multiprocess_hardening_test.cc
  LIBS kolo_mp_testing LABELS multiprocess SERIAL TIMEOUT 600)
add_dependencies(multiprocess_hardening_test kolo-hardening-worker kolorun)

# Elastic membership of issue 17: workers killed or stopped mid-training
# under kolorun --min-np; the survivors go on (tests/workers/elastic_worker.cc).
add_executable(kolo-elastic-worker workers/elastic_worker.cc)
target_link_libraries(kolo-elastic-worker PRIVATE kolo_elastic)
kolo_target_warnings(kolo-elastic-worker)
kolo_add_test(multiprocess_elastic_test SOURCES multiprocess_elastic_test.cc
  LIBS kolo_mp_testing LABELS multiprocess SERIAL TIMEOUT 900)
add_dependencies(multiprocess_elastic_test kolo-elastic-worker kolorun)
kolo_add_test(multiprocess_growth_test SOURCES multiprocess_growth_test.cc
  LIBS kolo_mp_testing nlohmann_json::nlohmann_json
  LABELS multiprocess SERIAL TIMEOUT 900)
add_dependencies(multiprocess_growth_test kolo-elastic-worker kolorun
  kolo-coordinator kolo-ctl kolo-elastic-train)
# Connections from outside the job (issue 39): idle floods to the gRPC port
# and the data ports, then a kill; garbage to each port.
kolo_add_test(multiprocess_flood_test SOURCES multiprocess_flood_test.cc
  LIBS kolo_mp_testing LABELS multiprocess SERIAL TIMEOUT 600)
add_dependencies(multiprocess_flood_test kolo-elastic-worker kolorun)

# Fault injection through kolorun (issue 19): each fault kind, its effect and
# its recovery report entry; bad specs.
kolo_add_test(multiprocess_faults_test SOURCES multiprocess_faults_test.cc
  LIBS kolo_mp_testing nlohmann_json::nlohmann_json LABELS multiprocess SERIAL
  TIMEOUT 600)
add_dependencies(multiprocess_faults_test kolo-elastic-worker kolorun)
# Issue 39: faults that do what their spec says and a report and log that
# say what happened (tests/multiprocess_fault_accounting_test.cc).
kolo_add_test(multiprocess_fault_accounting_test
  SOURCES multiprocess_fault_accounting_test.cc
  LIBS kolo_mp_testing nlohmann_json::nlohmann_json LABELS multiprocess SERIAL
  TIMEOUT 600)
add_dependencies(multiprocess_fault_accounting_test kolo-elastic-worker
  kolorun)
# GCC 12 warns (-Wnull-dereference) inside nlohmann-json's inlined
# get<std::string>(), a false positive (as CLI11's: launcher/CMakeLists.txt).
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  set_source_files_properties(multiprocess_faults_test.cc
    multiprocess_fault_accounting_test.cc PROPERTIES
    COMPILE_OPTIONS -Wno-null-dereference)
endif()

# kolo-elastic-train (issue 19's example): exact results across world sizes
# and through a killed worker.
kolo_add_test(multiprocess_elastic_train_test
  SOURCES multiprocess_elastic_train_test.cc
  LIBS kolo_mp_testing LABELS multiprocess SERIAL TIMEOUT 600)
add_dependencies(multiprocess_elastic_train_test kolo-elastic-train kolorun)

# Shared memory between the ranks of one host (allreduce/shm/): a rank killed
# mid-collective, plain and elastic; nothing left in /dev/shm.
kolo_add_test(multiprocess_shm_test SOURCES multiprocess_shm_test.cc
  LIBS kolo_mp_testing LABELS multiprocess SERIAL TIMEOUT 300)
add_dependencies(multiprocess_shm_test kolo-mp-worker kolo-elastic-worker
  kolorun)

# Hierarchical collectives (allreduce/hierarchical.h) on launcher hosts made
# by a command template on this machine (no root needed): exact results,
# equal on every rank and with KOLO_HIERARCHICAL=0, 2x2 and 3+1
# (tests/workers/hier_worker.cc); the light collective grid; process sets;
# an elastic epoch's own hierarchy.
add_executable(kolo-hier-worker workers/hier_worker.cc)
target_link_libraries(kolo-hier-worker PRIVATE kolo_worker kolo_collective_testing)
kolo_target_warnings(kolo-hier-worker)
kolo_add_test(multiprocess_hierarchical_test
  SOURCES multiprocess_hierarchical_test.cc
  LIBS kolo_mp_testing LABELS multiprocess SERIAL TIMEOUT 600)
add_dependencies(multiprocess_hierarchical_test kolo-hier-worker
  kolo-elastic-worker kolo-grid-worker kolo-groups-worker kolorun)

# CUDA tensors through the public API (tests/workers/cuda_worker.cc): the
# device-kind errors on every machine; every op over CUDA tensors where a
# device is usable (skipped otherwise).
add_executable(kolo-cuda-worker workers/cuda_worker.cc)
target_link_libraries(kolo-cuda-worker PRIVATE kolo_worker kolo_elastic)
if(KOLO_HAVE_CUDA)
  target_link_libraries(kolo-cuda-worker PRIVATE CUDA::cudart)
  target_compile_definitions(kolo-cuda-worker PRIVATE KOLO_HAVE_CUDA=1)
else()
  target_compile_definitions(kolo-cuda-worker PRIVATE KOLO_HAVE_CUDA=0)
endif()
kolo_target_warnings(kolo-cuda-worker)
kolo_add_test(multiprocess_cuda_test SOURCES multiprocess_cuda_test.cc
  LIBS kolo_mp_testing LABELS multiprocess SERIAL TIMEOUT 900)
add_dependencies(multiprocess_cuda_test kolo-cuda-worker kolorun)

# The coordinator's /metrics page (checked by promtool) and event log
# through kolorun, in a plain and an elastic kill run
# (tests/multiprocess_metrics_test.cc).
kolo_add_test(multiprocess_metrics_test
  SOURCES multiprocess_metrics_test.cc
  LIBS kolo_mp_testing nlohmann_json::nlohmann_json LABELS multiprocess SERIAL
  TIMEOUT 120)
add_dependencies(multiprocess_metrics_test kolo-elastic-worker kolorun)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  set_source_files_properties(multiprocess_metrics_test.cc PROPERTIES
    COMPILE_OPTIONS -Wno-null-dereference)
endif()
# The control plane under TLS (issue 38): kolorun --tls, files, refusals.
kolo_add_test(multiprocess_tls_test SOURCES multiprocess_tls_test.cc
  LIBS kolo_mp_testing kolo_tls LABELS multiprocess SERIAL TIMEOUT 300)
add_dependencies(multiprocess_tls_test kolo-mp-worker kolorun kolo-coordinator
  kolo-ctl)
