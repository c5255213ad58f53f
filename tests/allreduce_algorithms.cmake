# The collective algorithms (allreduce/collectives.h) over an in-process
# transport: N ranks as N threads (tests/testing/local_transport.h). No
# sockets, no gRPC, so the tests also run under ThreadSanitizer. Sanitizer
# builds (KOLO_TIMEOUT_SCALE > 1) run a subset of the grid, see
# tests/testing/collective_data.h.
add_library(kolo_collective_testing STATIC
  testing/local_transport.cc
  testing/collective_data.cc)
target_link_libraries(kolo_collective_testing PUBLIC kolo_allreduce kolo_testing GTest::gmock)
kolo_target_warnings(kolo_collective_testing)

kolo_add_test(allreduce_algorithms_test
  SOURCES allreduce_algorithms_test.cc
  LIBS kolo_collective_testing kolo_allreduce
  LABELS unit tsan)
kolo_add_test(allreduce_collectives_test
  SOURCES allreduce_collectives_test.cc
  LIBS kolo_collective_testing kolo_allreduce
  LABELS unit tsan)
kolo_add_test(allreduce_algorithms_errors_test
  SOURCES allreduce_algorithms_errors_test.cc
  LIBS kolo_collective_testing kolo_allreduce
  LABELS unit tsan)
# SubsetTransport: collectives on subsets of one LocalFabric mesh, while other
# subsets of the same mesh run other collectives.
kolo_add_test(allreduce_subset_transport_test
  SOURCES allreduce_subset_transport_test.cc
  LIBS kolo_collective_testing kolo_allreduce
  LABELS unit tsan)
# The same grid over shared memory (allreduce/shm/): every world is N
# ShmTransports over one segment, ranks as threads.
kolo_add_test(allreduce_shm_grid_test
  SOURCES allreduce_algorithms_test.cc allreduce_shm_grid.cc
  LIBS kolo_collective_testing kolo_allreduce
  LABELS unit tsan)
# The shared-memory transport itself: bytes, errors, abort, deadline, a killed
# peer process, the segment set-up over TCP, the hybrid transport.
kolo_add_test(allreduce_shm_transport_test
  SOURCES allreduce_shm_transport_test.cc
  LIBS kolo_collective_testing kolo_allreduce
  LABELS unit tsan)
# The hybrid transport with KOLO_DATA_ENCRYPTION=aes-256-gcm: exact across
# two encrypted "hosts", a tampered frame across them refused.
kolo_add_test(allreduce_hybrid_encryption_test
  SOURCES allreduce_hybrid_encryption_test.cc
  LIBS kolo_collective_testing kolo_allreduce
  LABELS unit tsan)
# The hierarchical collectives (within each host, then across hosts) and their
# grouping of ranks into hosts, over LocalFabric for several host layouts.
kolo_add_test(allreduce_hierarchical_test
  SOURCES allreduce_hierarchical_test.cc
  LIBS kolo_collective_testing kolo_allreduce
  LABELS unit tsan)
# DataPlane's switch between flat and two-level collectives (autotune's
# hierarchical dimension): what is tunable, exact results either way.
kolo_add_test(allreduce_data_plane_hierarchy_test
  SOURCES allreduce_data_plane_hierarchy_test.cc
  LIBS kolo_collective_testing kolo_allreduce
  LABELS unit tsan)
# Allreduce straight through the shared segment (allreduce/shm/shm_allreduce.h):
# the grid on one world per size, random floats, scaling, a mismatch, faults.
kolo_add_test(allreduce_shm_allreduce_test
  SOURCES allreduce_shm_allreduce_test.cc
  LIBS kolo_collective_testing kolo_allreduce
  LABELS unit tsan)
