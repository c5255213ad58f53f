// kolo's wire protocol version and feature bits, and the release version
// (kolo/version.h, from CMake's project()). A worker and a coordinator of
// different protocol versions refuse each other at hello, naming both.
#ifndef KOLO_COMMON_VERSION_H_
#define KOLO_COMMON_VERSION_H_

#include <cstdint>

#include "kolo/version.h"

namespace kolo {

inline constexpr uint32_t kProtocolVersion = 1;
// Bit i set = proto::Feature value (1 << i) supported.
inline constexpr uint64_t kFeatureExchange = 1ull << 1;
inline constexpr uint64_t kFeatureNegotiation = 1ull << 2;
inline constexpr uint64_t kFeatureBits = kFeatureExchange | kFeatureNegotiation;
inline constexpr const char* kVersionString = KOLO_VERSION_STRING;

}  // namespace kolo

#endif  // KOLO_COMMON_VERSION_H_
