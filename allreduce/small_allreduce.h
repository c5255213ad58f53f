// The latency-optimal allreduce for small buffers: log2(size) rounds of
// whole-buffer exchanges instead of the ring's 2(size-1) steps.
//
// With p the largest power of two <= size and rem = size - p: first the
// 2*rem lowest ranks pair up (2i, 2i+1) and the even one folds its buffer
// into the odd one (out = even op odd), leaving p participants (the odd
// ranks below 2*rem, and every rank from 2*rem up). They run recursive
// doubling: in round j each exchanges its whole buffer with the participant
// whose index differs in bit j and both compute out = lower op higher. At 2
// ranks this is a single direct exchange. Finally the odd ranks below 2*rem
// send the result back to their even partner. Every exchange moves the
// buffer in segments of 32 KiB staged through 4 slots (new[] aligns them
// for every DataType), so a large buffer pipelines and needs 128 KiB
// of scratch at most.
//
// Bitwise identical results on every rank: in every combination the lower
// rank's data is the left operand, and partners combine the same two
// buffers, so both sides compute the same bits; the folded-out ranks receive
// a copy.
//
// Thread-safety: runs on the transport's thread.
#ifndef KOLO_ALLREDUCE_SMALL_ALLREDUCE_H_
#define KOLO_ALLREDUCE_SMALL_ALLREDUCE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "allreduce/transport.h"
#include "kolo/types.h"

namespace kolo::internal {

// Reduces `data` (count elements, in place) over every rank with `op`
// (average reduces like sum; the caller divides). On a transport error,
// Fail()s the transport and returns the error.
absl::Status SmallAllreduce(Transport& transport, DataType type, ReduceOp op,
                            void* data, int64_t count);

}  // namespace kolo::internal

#endif  // KOLO_ALLREDUCE_SMALL_ALLREDUCE_H_
