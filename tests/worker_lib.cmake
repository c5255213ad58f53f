# worker_lib/: configuration from the environment (no gRPC, so also under
# TSan), and the Session client against an in-process coordinator.
kolo_add_test(worker_lib_config_test SOURCES worker_lib_config_test.cc
  LIBS kolo_worker_config LABELS unit tsan)
kolo_add_test(worker_lib_timeline_test SOURCES worker_lib_timeline_test.cc
  LIBS kolo_timeline protobuf::libprotobuf LABELS unit tsan)
kolo_add_test(worker_lib_session_test SOURCES worker_lib_session_test.cc
  LIBS kolo_worker kolo_coordinator LABELS unit)
kolo_add_test(worker_lib_lease_test SOURCES worker_lib_lease_test.cc
  LIBS kolo_worker LABELS unit)
kolo_add_test(worker_lib_api_test SOURCES worker_lib_api_test.cc
  LIBS kolo_worker kolo_coordinator LABELS unit)
# A worker::Job in-process: one worker hosting its coordinator.
kolo_add_test(worker_lib_job_test SOURCES worker_lib_job_test.cc
  LIBS kolo_worker LABELS unit)

# Multi-process starts (torchrun, Slurm, Open MPI, standalone coordinator)
# are in multiprocess.cmake.
kolo_add_test(worker_lib_cache_mirror_test SOURCES worker_lib_cache_mirror_test.cc
  LIBS kolo_worker LABELS unit)
kolo_add_test(worker_lib_fused_executor_test SOURCES worker_lib_fused_executor_test.cc
  LIBS kolo_worker LABELS unit)
kolo_add_test(worker_lib_plan_executor_test SOURCES worker_lib_plan_executor_test.cc
  LIBS kolo_worker LABELS unit)
kolo_add_test(worker_lib_cuda_executor_test SOURCES worker_lib_cuda_executor_test.cc
  LIBS kolo_worker LABELS unit)
# On a real GPU with real NCCL (one rank): an epoch's abort while an NCCL
# allreduce is in flight (skipped without a usable device; run by
# scripts/gpu-check.sh).
kolo_add_test(worker_lib_cuda_abort_test SOURCES worker_lib_cuda_abort_test.cc
  LIBS kolo_worker LABELS unit)
if(KOLO_HAVE_CUDA)
  target_link_libraries(worker_lib_cuda_abort_test PRIVATE CUDA::cudart)
  target_compile_definitions(worker_lib_cuda_abort_test PRIVATE KOLO_HAVE_CUDA=1)
else()
  target_compile_definitions(worker_lib_cuda_abort_test PRIVATE KOLO_HAVE_CUDA=0)
endif()
