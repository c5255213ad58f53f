// Presets: the tensors of one training step for kolo-bench --mode step.
//
//   resnet50  the 161 parameter tensors of torchvision's ResNet-50, float32,
//             in registration (forward) order: 161 tensors, 25,557,032
//             elements, 102,228,128 bytes (97.5 MiB). The element counts
//             are those of torchvision's model, embedded here; the Horovod
//             figures of docs/benchmarks.md time the same shapes.
//   small161  161 tensors of 256 float32 elements (1 KiB each): a step that
//             is all negotiation and no bandwidth.
//
// A step submits the tensors in reverse order, as backpropagation produces
// their gradients. Tensor names are stable across steps
// ("resnet50/param.<i>") so that the response cache can recognise them.
//
// Thread-safety: immutable data and pure functions.
#ifndef KOLO_BENCH_PRESETS_H_
#define KOLO_BENCH_PRESETS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace kolo::bench {

enum class Preset { kResnet50, kSmall161 };

absl::string_view PresetName(Preset preset);  // "resnet50", "small161"
// Case-insensitive; kInvalidArgument naming the presets otherwise.
absl::StatusOr<Preset> ParsePreset(absl::string_view name);

// The element counts (float32) of the preset's tensors, forward order.
absl::Span<const int64_t> PresetCounts(Preset preset);
// The sum of the tensors' sizes in bytes.
int64_t PresetBytes(Preset preset);
// "<preset>/param.<index>", the name every rank submits tensor `index` under.
std::string PresetTensorName(Preset preset, int index);

}  // namespace kolo::bench

#endif  // KOLO_BENCH_PRESETS_H_
