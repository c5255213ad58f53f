# allreduce/cuda/ and allreduce/nccl/: CUDA tensors' staging and the NCCL
# backend around fakes (tests/testing/fake_device.h), so they run on every
# machine; no gRPC (TSan-safe).
kolo_add_test(allreduce_cuda_staging_test
  SOURCES allreduce_cuda_staging_test.cc LIBS kolo_cuda LABELS unit tsan)
kolo_add_test(allreduce_nccl_test
  SOURCES allreduce_nccl_test.cc LIBS kolo_cuda LABELS unit tsan)
