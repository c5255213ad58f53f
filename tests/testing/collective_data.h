// Test data for the collective algorithms: inputs made of small integers
// (so every partial result is exact in every dtype, whatever the reduction
// order), the expected reductions computed independently of the kernels (in
// int64; only the float16/bfloat16 conversions come from kernels.h), byte
// patterns for the data-movement collectives, and a runner that keeps one
// LocalFabric (and its rank threads) per world size across collectives.
//
// Value model, per element hash h = Mix(i, rank) % 60: sum/average/min/max
// use h % 5 - 2 (h % 4 for uint8, h % 2 for bool); product uses -1, 1 or 2
// (1 or 2 for uint8) with 2 only on ranks 0-2, so |product| <= 8; bool
// product/min (AND) use h % 4 != 0 so that results are not all false.
//
// Thread-safety: Input/Expected/Pattern may run on any thread; RunRanks and
// the Expect helpers on the test's main thread only.
#ifndef KOLO_TESTS_TESTING_COLLECTIVE_DATA_H_
#define KOLO_TESTS_TESTING_COLLECTIVE_DATA_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "allreduce/transport.h"
#include "kolo/types.h"

namespace kolo::testing {

inline constexpr DataType kAllTypes[] = {
    DataType::kUInt8,    DataType::kInt8,    DataType::kInt16,
    DataType::kInt32,    DataType::kInt64,   DataType::kFloat16,
    DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64,
    DataType::kBool};
inline constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kAverage,
                                       ReduceOp::kMin, ReduceOp::kMax,
                                       ReduceOp::kProduct};
// The grid's large count, 1 Mi + 3 elements.
inline constexpr int64_t kLarge = (int64_t{1} << 20) + 3;

// True in sanitizer builds (KOLO_TIMEOUT_SCALE > 1): tests run a subset.
bool Sanitized();
// The inactivity deadline of the test fabrics: 30 s, scaled.
absl::Duration FabricTimeout();

// The grid's counts for a world of n ranks: 0, 1, 7, 4099, kLarge; world
// size 7 is a lighter pass (up to 4099, up to 7 when Sanitized()).
std::vector<int64_t> GridCounts(int n);
// Whether the kLarge count runs for (type, op): always, except when
// Sanitized() (then only float32 sum and int8 max).
bool LargeCaseRuns(DataType type, ReduceOp op);
// The segment size for a grid count: 1000 bytes (not a multiple of 8) for
// 4099 elements, so those cases pipeline over many uneven segments; the
// default otherwise.
size_t SegmentBytesFor(int64_t count);

using Bytes = std::vector<char>;

// Rank `rank`'s input for `op`: elements [first, first + count) of the value
// model, encoded as `type`.
Bytes Input(DataType type, ReduceOp op, int rank, int64_t first, int64_t count);
// The reduction with `op` over ranks 0..n-1 of elements [first, first +
// count), encoded as `type` (average: integer division truncating toward
// zero, float division in the type's precision).
Bytes Expected(DataType type, ReduceOp op, int n, int64_t first, int64_t count);
// Pseudo-random bytes, a function of (seed, position).
Bytes Pattern(uint64_t seed, size_t bytes);
// Sum of counts.
int64_t Total(const std::vector<int64_t>& counts);
// "" when got == want bytewise, else the first differing element of `elem`
// bytes, both ways.
std::string Diff(const Bytes& got, const Bytes& want, size_t elem);
// "3 ranks, float32 sum, count 7, <extra>".
std::string CaseName(int n, DataType type, ReduceOp op, int64_t count,
                     absl::string_view extra);

// Runs `fn` on every rank of a world of n ranks, as one operation (its own
// BeginOperation sequence), and returns the statuses by rank. The world's
// fabric and threads are kept across calls, as the ranks of a job run
// collective after collective; a failed collective aborts the fabric, so the
// next call starts a fresh one.
std::vector<absl::Status> RunRanks(
    int n, const std::function<absl::Status(Transport&)>& fn);

// Makes RunRanks run its worlds over the transports `make(n)` returns (one
// per rank) instead of the in-process mailboxes: the same grid then tests
// another transport (tests/allreduce_shm_grid.cc). Call before the first
// RunRanks, e.g. from a static initializer.
using TransportMaker =
    std::function<std::vector<std::unique_ptr<Transport>>(int n)>;
void SetTransportMaker(TransportMaker make);

// gtest expectations: every status OK / kInvalidArgument containing message.
void ExpectAllOk(const std::vector<absl::Status>& statuses,
                 const std::string& what);
void ExpectAllInvalid(const std::vector<absl::Status>& statuses,
                      absl::string_view message);

}  // namespace kolo::testing

#endif  // KOLO_TESTS_TESTING_COLLECTIVE_DATA_H_
