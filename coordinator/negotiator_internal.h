// Internal to Negotiator (negotiator.h), whose member functions live in
// negotiator.cc and negotiator_plans.cc: the helpers both use.
#ifndef KOLO_COORDINATOR_NEGOTIATOR_INTERNAL_H_
#define KOLO_COORDINATOR_NEGOTIATOR_INTERNAL_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kolo::coordinator::negotiator_internal {

// A stall warning or shutdown lists at most this many tensors.
inline constexpr size_t kMaxListed = 5;

// The first kMaxListed items, then ", and N more".
inline std::string ListSome(const std::vector<std::string>& items) {
  if (items.size() <= kMaxListed) return absl::StrJoin(items, ", ");
  return absl::StrCat(
      absl::StrJoin(items.begin(), items.begin() + kMaxListed, ", "), ", and ",
      items.size() - kMaxListed, " more");
}

}  // namespace kolo::coordinator::negotiator_internal

#endif  // KOLO_COORDINATOR_NEGOTIATOR_INTERNAL_H_
