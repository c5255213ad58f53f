#include "bench/presets.h"

#include <array>
#include <numeric>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace kolo::bench {
namespace {

// torchvision resnet50's parameters in registration order (conv weights,
// batch-norm weights and biases, the final fc weight and bias): 161 tensors,
// 25,557,032 elements, 102,228,128 bytes in float32.
constexpr std::array<int64_t, 161> kResnet50 = {
    9408,    64,   64,   4096,    64,   64,   36864,   64,   64,
    16384,   256,  256,  16384,   256,  256,  16384,   64,   64,
    36864,   64,   64,   16384,   256,  256,  16384,   64,   64,
    36864,   64,   64,   16384,   256,  256,  32768,   128,  128,
    147456,  128,  128,  65536,   512,  512,  131072,  512,  512,
    65536,   128,  128,  147456,  128,  128,  65536,   512,  512,
    65536,   128,  128,  147456,  128,  128,  65536,   512,  512,
    65536,   128,  128,  147456,  128,  128,  65536,   512,  512,
    131072,  256,  256,  589824,  256,  256,  262144,  1024, 1024,
    524288,  1024, 1024, 262144,  256,  256,  589824,  256,  256,
    262144,  1024, 1024, 262144,  256,  256,  589824,  256,  256,
    262144,  1024, 1024, 262144,  256,  256,  589824,  256,  256,
    262144,  1024, 1024, 262144,  256,  256,  589824,  256,  256,
    262144,  1024, 1024, 262144,  256,  256,  589824,  256,  256,
    262144,  1024, 1024, 524288,  512,  512,  2359296, 512,  512,
    1048576, 2048, 2048, 2097152, 2048, 2048, 1048576, 512,  512,
    2359296, 512,  512,  1048576, 2048, 2048, 1048576, 512,  512,
    2359296, 512,  512,  1048576, 2048, 2048, 2048000, 1000};

constexpr int64_t Sum(const auto& counts) {
  int64_t sum = 0;
  for (int64_t c : counts) sum += c;
  return sum;
}
static_assert(kResnet50.size() == 161);
static_assert(Sum(kResnet50) == 25'557'032);
static_assert(Sum(kResnet50) * 4 == 102'228'128);

constexpr std::array<int64_t, 161> Small161() {
  std::array<int64_t, 161> counts{};
  for (int64_t& c : counts) c = 256;
  return counts;
}
constexpr std::array<int64_t, 161> kSmall161 = Small161();

}  // namespace

absl::string_view PresetName(Preset preset) {
  switch (preset) {
    case Preset::kResnet50:
      return "resnet50";
    case Preset::kSmall161:
      return "small161";
  }
  return "unknown";
}

absl::StatusOr<Preset> ParsePreset(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (Preset preset : {Preset::kResnet50, Preset::kSmall161}) {
    if (lower == PresetName(preset)) return preset;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--preset: unknown preset '", name, "'; use resnet50 or small161"));
}

absl::Span<const int64_t> PresetCounts(Preset preset) {
  return preset == Preset::kResnet50 ? absl::Span<const int64_t>(kResnet50)
                                     : absl::Span<const int64_t>(kSmall161);
}

int64_t PresetBytes(Preset preset) {
  const absl::Span<const int64_t> counts = PresetCounts(preset);
  return std::accumulate(counts.begin(), counts.end(), int64_t{0}) *
         static_cast<int64_t>(sizeof(float));
}

std::string PresetTensorName(Preset preset, int index) {
  return absl::StrCat(PresetName(preset), "/param.", index);
}

}  // namespace kolo::bench
