#include "allreduce/shm/shm_allreduce.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "allreduce/chunking.h"
#include "allreduce/collective_checks.h"
#include "allreduce/kernels.h"
#include "common/check.h"

namespace kolo {
namespace {

// The piece holding element `at` of `pieces` laid end to end, where piece i
// starts at starts[i] (starts[pieces.size()] is the total): the last piece
// starting at or before it, so that empty pieces there are passed over.
size_t PieceAt(const std::vector<int64_t>& starts, int64_t at) {
  return static_cast<size_t>(
      std::upper_bound(starts.begin(), starts.end(), at) - starts.begin() - 1);
}

// dst = elements [first, first + count) of the pieces' inputs laid end to
// end, multiplied by `prescale`.
absl::Status GatherPieces(DataType type,
                          absl::Span<const AllreducePiece> pieces,
                          const std::vector<int64_t>& starts, int64_t first,
                          int64_t count, uint8_t* dst, double prescale) {
  const size_t elem = DataTypeSize(type);
  for (size_t i = PieceAt(starts, first); count > 0; ++i) {
    const int64_t at = first - starts[i];
    const int64_t n = std::min(count, pieces[i].count - at);
    if (n <= 0) continue;
    if (absl::Status s = ScaleCopy(
            type, static_cast<const uint8_t*>(pieces[i].input) + at * elem, dst,
            static_cast<size_t>(n), prescale);
        !s.ok()) {
      return s;
    }
    dst += static_cast<size_t>(n) * elem;
    first += n;
    count -= n;
  }
  return absl::OkStatus();
}

// Elements [first, first + count) of the pieces' outputs laid end to end
// = src.
void ScatterPieces(DataType type, absl::Span<const AllreducePiece> pieces,
                   const std::vector<int64_t>& starts, int64_t first,
                   int64_t count, const uint8_t* src) {
  const size_t elem = DataTypeSize(type);
  for (size_t i = PieceAt(starts, first); count > 0; ++i) {
    const int64_t at = first - starts[i];
    const int64_t n = std::min(count, pieces[i].count - at);
    if (n <= 0) continue;
    const size_t bytes = static_cast<size_t>(n) * elem;
    std::memcpy(static_cast<uint8_t*>(pieces[i].output) + at * elem, src,
                bytes);
    src += bytes;
    first += n;
    count -= n;
  }
}

}  // namespace

ShmAllreduce::ShmAllreduce(ShmTransport* shm, Transport* whole)
    : shm_(shm),
      whole_(whole),
      segment_(shm->segment()),
      rank_(shm->rank()),
      n_(shm->size()),
      half_bytes_(segment_.slot_bytes() / 2 / 64 * 64),
      direct_max_bytes_(shm->spins() ? kSpinDirectMaxBytes
                                     : kSleepDirectMaxBytes),
      chunk_bytes_(shm->spins() ? std::min(kSpinChunkBytes, half_bytes_)
                                : half_bytes_) {
  KOLO_CHECK(n_ >= 2 && half_bytes_ >= 64) << n_ << " ranks, " << half_bytes_;
  KOLO_CHECK(whole_->size() == n_) << whole_->size() << " vs " << n_;
  for (int r = 0; r < n_; ++r) phases_.push_back(segment_.phase(r));
  // A segment is fresh per epoch, so every phase word starts at 0.
  phase_ = phases_[rank_]->phase.load(std::memory_order_relaxed);
}

uint8_t* ShmAllreduce::Half(int rank, uint64_t use) const {
  return segment_.slot(rank) + (use % 2) * half_bytes_;
}

absl::Status ShmAllreduce::Sync(uint64_t tag) {
  const uint64_t target = ++phase_;
  shm::PhaseWord* mine = phases_[rank_];
  mine->tag[target % 2].store(tag, std::memory_order_relaxed);
  // seq_cst, and the loads below: of ranks arriving at once, at least the
  // last in that order sees every other's phase; it alone wakes the
  // sleepers, so that nobody is woken only to wait for another rank. Its
  // waiter-count reads pair with the sleepers' (NotifyPeers, WaitFor).
  mine->phase.store(target, std::memory_order_seq_cst);
  const auto laggard = [&]() -> int {
    for (int p = 0; p < n_; ++p) {
      if (phases_[p]->phase.load(std::memory_order_seq_cst) < target) {
        return p;
      }
    }
    return -1;
  };
  if (laggard() < 0) {
    shm_->NotifyPeers();
  } else if (absl::Status s = shm_->WaitFor(laggard, "allreduce"); !s.ok()) {
    return s;
  }
  for (int p = 0; p < n_; ++p) {
    if (phases_[p]->tag[target % 2].load(std::memory_order_relaxed) != tag) {
      return Mismatch();
    }
  }
  return absl::OkStatus();
}

absl::Status ShmAllreduce::Mismatch() const {
  const uint64_t target = phase_;
  const uint64_t tag = phases_[rank_]->tag[target % 2].load();
  std::vector<std::string> names;
  std::vector<int> ranks;
  for (int p = 0; p < n_; ++p) {
    if (phases_[p]->tag[target % 2].load(std::memory_order_relaxed) != tag) {
      names.push_back(shm_->PeerName(p));
      ranks.push_back(shm_->PeerEpochRank(p));
    }
  }
  absl::Status error = absl::InvalidArgumentError(absl::StrCat(
      shm_->PeerName(rank_), " and ", absl::StrJoin(names, ", "),
      " are not running the same allreduce (its sequence number, size, "
      "dtype or op differ): every rank must call the same collectives in the "
      "same order with the same arguments"));
  SetPeers(error, ranks);
  return error;
}

uint64_t ShmAllreduce::Tag(DataType type, ReduceOp op, size_t bytes) const {
  uint64_t h = shm_->seq() * 0x9e3779b97f4a7c15ull;
  h ^= (static_cast<uint64_t>(bytes) + 0x632be59bd9b4e019ull) + (h << 6) +
       (h >> 2);
  h ^= (static_cast<uint64_t>(type) << 8 | static_cast<uint64_t>(op)) +
       0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

absl::Status ShmAllreduce::ReduceSlots(DataType type, ReduceOp op, char* out,
                                       uint64_t use, size_t offset,
                                       int64_t count, const char* own) const {
  const size_t n = static_cast<size_t>(count);
  const auto from = [&](int p) -> const void* {
    if (p == rank_ && own != nullptr) return own;
    return Half(p, use) + offset;
  };
  if (absl::Status s = Reduce(type, op, out, from(0), from(1), n); !s.ok()) {
    return s;
  }
  for (int p = 2; p < n_; ++p) {
    if (absl::Status s = ReduceInto(type, op, out, from(p), n); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status ShmAllreduce::Allreduce(DataType type, const void* input,
                                     void* output, int64_t count,
                                     const ReduceOptions& reduce) {
  constexpr absl::string_view kName = "allreduce";
  if (absl::Status s =
          internal::CheckAllreduce(kName, type, input, output, count, reduce);
      !s.ok()) {
    return s;
  }
  if (count == 0) return absl::OkStatus();
  if (absl::Status s = PeersUsable(kName); !s.ok()) return s;
  const size_t bytes = static_cast<size_t>(count) * DataTypeSize(type);
  const char* in = static_cast<const char*>(input);
  char* out = static_cast<char*>(output);
  const uint64_t tag = Tag(type, reduce.op, bytes);
  absl::Status s = Slices(bytes) ? Sliced(type, in, out, count, reduce, tag)
                                 : Direct(type, in, out, count, reduce, tag);
  if (!s.ok()) return internal::Fail(*whole_, kName, s);
  return absl::OkStatus();
}

absl::Status ShmAllreduce::PeersUsable(absl::string_view collective) {
  for (int p = 0; p < n_; ++p) {
    if (p == rank_) continue;
    if (absl::Status s = shm_->Usable(p); !s.ok()) {
      return internal::Fail(*whole_, collective, s);
    }
  }
  return absl::OkStatus();
}

bool ShmAllreduce::Slices(size_t bytes) const {
  return !(bytes <= direct_max_bytes_ && bytes <= half_bytes_);
}

absl::Status ShmAllreduce::AllreducePieces(
    DataType type, absl::Span<const AllreducePiece> pieces,
    const ReduceOptions& reduce) {
  constexpr absl::string_view kName = "allreduce";
  if (absl::Status s = internal::CheckType(kName, type); !s.ok()) return s;
  if (absl::Status s = internal::CheckReduce(kName, type, reduce); !s.ok()) {
    return s;
  }
  piece_starts_.clear();
  int64_t count = 0;
  for (const AllreducePiece& piece : pieces) {
    if (absl::Status s = internal::CheckCount(kName, "count", piece.count);
        !s.ok()) {
      return s;
    }
    if (absl::Status s =
            internal::CheckBuffer(kName, "input", piece.input, piece.count);
        !s.ok()) {
      return s;
    }
    if (absl::Status s =
            internal::CheckBuffer(kName, "output", piece.output, piece.count);
        !s.ok()) {
      return s;
    }
    piece_starts_.push_back(count);
    count += piece.count;
  }
  piece_starts_.push_back(count);
  if (count == 0) return absl::OkStatus();
  if (absl::Status s = PeersUsable(kName); !s.ok()) return s;
  const size_t bytes = static_cast<size_t>(count) * DataTypeSize(type);
  absl::Status s =
      SlicedPieces(type, pieces, count, reduce, Tag(type, reduce.op, bytes));
  if (!s.ok()) return internal::Fail(*whole_, kName, s);
  return absl::OkStatus();
}

absl::Status ShmAllreduce::SlicedPieces(DataType type,
                                        absl::Span<const AllreducePiece> pieces,
                                        int64_t count,
                                        const ReduceOptions& reduce,
                                        uint64_t tag) {
  const size_t elem = DataTypeSize(type);
  auto fill = [&](const Chunk& k) {
    return GatherPieces(type, pieces, piece_starts_, k.first, k.count, k.mine,
                        reduce.prescale);
  };
  // This rank's slice is reduced into its own slot, where the peers read
  // it. Ranks 2 and up would overwrite their own input there before its
  // turn in rank order: it is read from a copy.
  auto finish_own = [&](const Chunk& k) {
    uint8_t* acc = k.mine + static_cast<size_t>(k.own.offset) * elem;
    const char* own_input = nullptr;
    if (rank_ >= 2) {
      own_input_.assign(acc, acc + static_cast<size_t>(k.own.count) * elem);
      own_input = reinterpret_cast<const char*>(own_input_.data());
    }
    if (absl::Status s = FinishOwnSlice(
            type, reduce, k, reinterpret_cast<char*>(acc), own_input);
        !s.ok()) {
      return s;
    }
    ScatterPieces(type, pieces, piece_starts_, k.first + k.own.offset,
                  k.own.count, acc);
    return absl::OkStatus();
  };
  auto take = [&](const Chunk& k, const ElementRange& slice,
                  const uint8_t* from) {
    ScatterPieces(type, pieces, piece_starts_, k.first + slice.offset,
                  slice.count, from);
  };
  return RunSliced(type, count, tag, fill, finish_own, take);
}

absl::Status ShmAllreduce::Direct(DataType type, const char* in, char* out,
                                  int64_t count, const ReduceOptions& reduce,
                                  uint64_t tag) {
  const size_t n = static_cast<size_t>(count);
  const int64_t divide = reduce.op == ReduceOp::kAverage ? n_ : 1;
  const size_t bytes = n * DataTypeSize(type);
  if (bytes <= shm::kInlineBytes) {
    // In the phase word's cache line: one line per peer crosses cores.
    alignas(8) char buf[shm::kInlineBytes] = {};
    if (absl::Status s = ScaleCopy(type, in, buf, n, reduce.prescale);
        !s.ok()) {
      return s;
    }
    uint64_t words[2];
    std::memcpy(words, buf, sizeof(words));
    auto& mine = phases_[rank_]->inline_data[(phase_ + 1) % 2];
    mine[0].store(words[0], std::memory_order_relaxed);
    mine[1].store(words[1], std::memory_order_relaxed);
    if (absl::Status s = Sync(tag); !s.ok()) return s;
    // Every rank reduces in rank order: the same bits everywhere.
    alignas(8) char acc[shm::kInlineBytes];
    for (int p = 0; p < n_; ++p) {
      auto& theirs = phases_[p]->inline_data[phase_ % 2];
      words[0] = theirs[0].load(std::memory_order_relaxed);
      words[1] = theirs[1].load(std::memory_order_relaxed);
      if (p == 0) {
        std::memcpy(acc, words, sizeof(words));
        continue;
      }
      std::memcpy(buf, words, sizeof(words));
      if (absl::Status s = ReduceInto(type, reduce.op, acc, buf, n); !s.ok()) {
        return s;
      }
    }
    if (divide != 1 || reduce.postscale != 1.0) {
      return FinishCopy(type, acc, out, n, divide, reduce.postscale);
    }
    std::memcpy(out, acc, bytes);
    return absl::OkStatus();
  }
  const uint64_t use = uses_++;
  if (absl::Status s =
          ScaleCopy(type, in, Half(rank_, use), n, reduce.prescale);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = Sync(tag); !s.ok()) return s;
  if (absl::Status s = ReduceSlots(type, reduce.op, out, use, 0, count);
      !s.ok()) {
    return s;
  }
  if (divide != 1 || reduce.postscale != 1.0) {
    return FinishCopy(type, out, out, n, divide, reduce.postscale);
  }
  return absl::OkStatus();
}

absl::Status ShmAllreduce::FinishOwnSlice(DataType type,
                                          const ReduceOptions& reduce,
                                          const Chunk& k, char* acc,
                                          const char* own_input) const {
  const size_t elem = DataTypeSize(type);
  if (absl::Status s = ReduceSlots(type, reduce.op, acc, k.use,
                                   static_cast<size_t>(k.own.offset) * elem,
                                   k.own.count, own_input);
      !s.ok()) {
    return s;
  }
  const int64_t divide = reduce.op == ReduceOp::kAverage ? n_ : 1;
  if (divide == 1 && reduce.postscale == 1.0) return absl::OkStatus();
  return FinishCopy(type, acc, acc, static_cast<size_t>(k.own.count), divide,
                    reduce.postscale);
}

absl::Status ShmAllreduce::RunSliced(DataType type, int64_t count, uint64_t tag,
                                     const ChunkStep& fill,
                                     const ChunkStep& finish,
                                     const TakeSlice& take) {
  const size_t elem = DataTypeSize(type);
  const int64_t chunk = static_cast<int64_t>(chunk_bytes_ / elem);
  Chunk k;
  for (k.first = 0; k.first < count; k.first += chunk) {
    k.count = std::min(chunk, count - k.first);
    k.use = uses_++;
    k.mine = Half(rank_, k.use);
    k.slices = PartitionEvenly(k.count, n_);
    k.own = k.slices[rank_];
    if (absl::Status s = fill(k); !s.ok()) return s;
    if (absl::Status s = Sync(tag); !s.ok()) return s;
    if (k.own.count > 0) {
      if (absl::Status s = finish(k); !s.ok()) return s;
    }
    if (absl::Status s = Sync(tag); !s.ok()) return s;
    for (int p = 0; p < n_; ++p) {
      if (p == rank_ || k.slices[p].count == 0) continue;
      take(k, k.slices[p],
           Half(p, k.use) + static_cast<size_t>(k.slices[p].offset) * elem);
    }
  }
  return absl::OkStatus();
}

absl::Status ShmAllreduce::Sliced(DataType type, const char* in, char* out,
                                  int64_t count, const ReduceOptions& reduce,
                                  uint64_t tag) {
  const size_t elem = DataTypeSize(type);
  // Only this rank reads its own slice: it reduces that straight from its
  // input, unless scaling is asked or, in place, the partial result would
  // overwrite it before its turn in rank order (ranks 2 and up).
  const bool own_from_input =
      reduce.prescale == 1.0 && (in != out || rank_ < 2);
  auto fill = [&](const Chunk& k) {
    const size_t base = static_cast<size_t>(k.first) * elem;
    if (!own_from_input) {
      return ScaleCopy(type, in + base, k.mine, static_cast<size_t>(k.count),
                       reduce.prescale);
    }
    const size_t at = static_cast<size_t>(k.own.offset) * elem;
    const size_t end = at + static_cast<size_t>(k.own.count) * elem;
    std::memcpy(k.mine, in + base, at);
    std::memcpy(k.mine + end, in + base + end,
                static_cast<size_t>(k.count) * elem - end);
    return absl::OkStatus();
  };
  auto finish_own = [&](const Chunk& k) {
    const size_t at = static_cast<size_t>(k.own.offset) * elem;
    const size_t base = static_cast<size_t>(k.first) * elem;
    char* acc = out + base + at;
    if (absl::Status s = FinishOwnSlice(
            type, reduce, k, acc, own_from_input ? in + base + at : nullptr);
        !s.ok()) {
      return s;
    }
    std::memcpy(k.mine + at, acc, static_cast<size_t>(k.own.count) * elem);
    return absl::OkStatus();
  };
  auto take = [&](const Chunk& k, const ElementRange& slice,
                  const uint8_t* from) {
    std::memcpy(out + static_cast<size_t>(k.first + slice.offset) * elem, from,
                static_cast<size_t>(slice.count) * elem);
  };
  return RunSliced(type, count, tag, fill, finish_own, take);
}

}  // namespace kolo
