// The words for the data-plane settings the autotuner chooses ("small-message
// cut-off 65536 bytes, segment automatic"), shared by the coordinator's
// "autotune: done" line (coordinator/autotune.cc) and every rank's switch
// line (worker_lib/runtime/op_runtime_plans.cc), so that an operator reading
// either log finds the same text for the same setting.
//
// Thread-safety: a pure function.
#ifndef KOLO_PROTO_AUTOTUNE_TEXT_H_
#define KOLO_PROTO_AUTOTUNE_TEXT_H_

#include <cstdint>
#include <string>

namespace kolo::proto {

// "small-message cut-off <small_allreduce_bytes> bytes, segment <S>", where
// <S> is "automatic" for a segment_bytes of 0 (AutotuneSwitch's meaning) and
// "<segment_bytes> bytes" otherwise.
std::string DataPlaneSettingsText(uint64_t small_allreduce_bytes,
                                  uint64_t segment_bytes);

}  // namespace kolo::proto

#endif  // KOLO_PROTO_AUTOTUNE_TEXT_H_
