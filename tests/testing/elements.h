// Elements of any kolo dtype as doubles, for the test workers that check
// collectives through the public API with exact values: encoding (exact
// values only: a value the dtype cannot hold exactly is reported, never
// rounded), decoding, and bit-for-bit comparison with a message that says
// where two buffers first differ. The float16 / bfloat16 encodings are
// written here, not taken from kolo's kernels, so that the tests check the
// kernels against an independent conversion.
//
// Thread-safety: pure functions.
#ifndef KOLO_TESTS_TESTING_ELEMENTS_H_
#define KOLO_TESTS_TESTING_ELEMENTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "kolo/kolo.h"

namespace kolo::testing {

using Bytes = std::vector<char>;

// Writes x as one element of `t` at dst; false if x is not exact in t
// (float16: normal values and zero only).
bool EncodeElement(DataType t, double x, char* dst);
// The element of `t` at src.
double DecodeElement(DataType t, const char* src);

// `values` as elements of `t`. When one is not exact, *bad (if still empty)
// says which; the others are still written.
Bytes EncodeAll(DataType t, const std::vector<double>& values,
                std::string* bad);

// "" when got == want bit for bit, else where they first differ ("<what>
// element 3 of 8 is 1, want 2") or how their lengths differ.
std::string CompareElements(DataType t, absl::string_view what,
                            const Bytes& got, const Bytes& want);

// "[2,3]".
std::string ShapeText(const std::vector<int64_t>& shape);
// "" when got == want, else "<what> is [..], want [..]".
std::string CompareShape(absl::string_view what,
                         const std::vector<int64_t>& got,
                         const std::vector<int64_t>& want);
// The product of the dimensions (1 for a 0-d shape).
int64_t Elements(const std::vector<int64_t>& shape);

}  // namespace kolo::testing

#endif  // KOLO_TESTS_TESTING_ELEMENTS_H_
