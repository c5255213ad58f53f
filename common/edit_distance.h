// EditDistance: how many single-character edits turn one name into another,
// ignoring ASCII case; what the "did you mean ...?" suggestions of kolorun's
// config file and of the worker's unknown-variable check rank names by.
//
// Thread-safety: a pure function.
// Invariants: EditDistance(a, b) == EditDistance(b, a); 0 only when a and b
// are equal but for case.
#ifndef KOLO_COMMON_EDIT_DISTANCE_H_
#define KOLO_COMMON_EDIT_DISTANCE_H_

#include <cstddef>

#include "absl/strings/string_view.h"

namespace kolo {

// The edits counted: insertions, deletions and substitutions (Levenshtein),
// and with kWithTranspositions also swaps of two adjacent characters, each
// character edited at most once (optimal string alignment).
enum class EditOps { kLevenshtein, kWithTranspositions };

size_t EditDistance(absl::string_view a, absl::string_view b, EditOps ops);

}  // namespace kolo

#endif  // KOLO_COMMON_EDIT_DISTANCE_H_
