#include "allreduce/shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace kolo::shm {
namespace {

constexpr uint64_t kMagic = 0x316d68736f6c6f6bull;  // "kolo" "shm1"
constexpr uint32_t kLayoutVersion = 3;
constexpr size_t kPage = 4096;
constexpr size_t kMinRing = 4096;
constexpr size_t kMinSlot = 64 * 1024;
constexpr size_t kMaxSlot = 2 << 20;

struct Header {
  uint64_t magic;
  uint32_t version;
  uint32_t ranks;
  uint64_t epoch;
  uint64_t ring_bytes;
  uint64_t total_bytes;
  uint64_t slot_bytes;
  char nonce[kNonceBytes];
};
static_assert(sizeof(Header) <= kPage);

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

size_t BellsOffset() { return kPage; }
size_t ControlsOffset(int ranks) {
  return BellsOffset() + RoundUp(sizeof(Doorbell) * ranks, 64);
}
size_t RingsOffset(int ranks) {
  return RoundUp(ControlsOffset(ranks) + sizeof(RingControl) * ranks * ranks,
                 kPage);
}
size_t PhasesOffset(int ranks, size_t ring_bytes);
size_t SlotsOffset(int ranks, size_t ring_bytes) {
  return RoundUp(PhasesOffset(ranks, ring_bytes) +
                     sizeof(PhaseWord) * static_cast<size_t>(ranks),
                 kPage);
}
size_t Pairs(int ranks) {
  return static_cast<size_t>(ranks) * static_cast<size_t>(ranks - 1);
}

absl::Status Errno(absl::string_view what) {
  return absl::InternalError(
      absl::StrCat("shared memory: ", what, ": ", std::strerror(errno)));
}

size_t PhasesOffset(int ranks, size_t ring_bytes) {
  return RingsOffset(ranks) + Pairs(ranks) * ring_bytes;
}

}  // namespace

size_t Segment::Size(int ranks, size_t ring_bytes, size_t slot_bytes) {
  return SlotsOffset(ranks, ring_bytes) +
         static_cast<size_t>(ranks) * slot_bytes;
}

absl::StatusOr<SegmentPlan> Segment::PlanFor(int ranks, size_t total_bytes) {
  SegmentPlan plan;
  if (ranks >= 1) {
    const size_t slot = std::min(
        kMaxSlot, total_bytes / 2 / static_cast<size_t>(ranks) / kPage * kPage);
    const size_t slots = slot * static_cast<size_t>(ranks);
    if (slot >= kMinSlot && total_bytes > slots) {
      absl::StatusOr<size_t> ring = RingBytesFor(ranks, total_bytes - slots);
      if (ring.ok()) {
        plan.ring_bytes = *ring;
        plan.slot_bytes = slot;
        return plan;
      }
    }
  }
  absl::StatusOr<size_t> ring = RingBytesFor(ranks, total_bytes);
  if (!ring.ok()) return ring.status();
  plan.ring_bytes = *ring;
  return plan;
}

absl::StatusOr<size_t> Segment::RingBytesFor(int ranks, size_t total_bytes) {
  if (ranks < 1) return absl::InvalidArgumentError("no ranks");
  if (ranks == 1) return kMinRing;
  const size_t fixed = Size(ranks, 0);
  const size_t per_pair =
      total_bytes > fixed ? (total_bytes - fixed) / Pairs(ranks) : 0;
  const size_t ring = per_pair / kPage * kPage;
  if (ring < kMinRing) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KOLO_SHM_BYTES=", total_bytes, " is too small for ", ranks,
        " local ranks: the segment needs at least ", Size(ranks, kMinRing),
        " bytes (4 KiB per ordered pair of ranks); raise it, or set "
        "KOLO_SHM=0"));
  }
  return ring;
}

absl::StatusOr<std::unique_ptr<Segment>> Segment::Create(
    int ranks, size_t ring_bytes, uint64_t epoch, const std::string& nonce,
    size_t slot_bytes) {
  KOLO_CHECK(ranks >= 1 && nonce.size() == kNonceBytes);
  KOLO_CHECK(ring_bytes >= kMinRing && ring_bytes % kPage == 0);
  KOLO_CHECK(slot_bytes % kPage == 0);
  net::UniqueFd fd(::memfd_create("kolo-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return Errno("memfd_create");
  // Unreachable by name; 0600 also bars other users from /proc/PID/fd.
  if (::fchmod(fd.get(), 0600) != 0) return Errno("fchmod of the segment");
  const size_t size = Size(ranks, ring_bytes, slot_bytes);
  if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) {
    return Errno(absl::StrCat("sizing the segment to ", size, " bytes"));
  }
  if (::fcntl(fd.get(), F_ADD_SEALS,
              F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return Errno("sealing the segment");
  }
  void* base =
      ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) return Errno("mapping the segment");
  // A fresh memfd reads as zeros: every atomic starts at 0.
  auto* h = static_cast<Header*>(base);
  h->magic = kMagic;
  h->version = kLayoutVersion;
  h->ranks = static_cast<uint32_t>(ranks);
  h->epoch = epoch;
  h->ring_bytes = ring_bytes;
  h->total_bytes = size;
  h->slot_bytes = slot_bytes;
  std::memcpy(h->nonce, nonce.data(), kNonceBytes);
  return std::unique_ptr<Segment>(
      new Segment(std::move(fd), base, size, ranks, ring_bytes, slot_bytes));
}

absl::StatusOr<std::unique_ptr<Segment>> Segment::Map(
    net::UniqueFd fd, int ranks, uint64_t epoch, const std::string& nonce) {
  KOLO_CHECK(nonce.size() == kNonceBytes);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Errno("fstat of the segment");
  const int seals = ::fcntl(fd.get(), F_GET_SEALS);
  if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) !=
                       (F_SEAL_SHRINK | F_SEAL_GROW)) {
    return absl::FailedPreconditionError(
        "shared memory: the segment received is not a sealed kolo memfd");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size < RingsOffset(ranks)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shared memory: the segment received has ", size,
        " bytes, less than the layout of ", ranks, " ranks needs"));
  }
  void* base =
      ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) return Errno("mapping the segment");
  const auto* h = static_cast<const Header*>(base);
  std::string why;
  if (h->magic != kMagic || h->version != kLayoutVersion) {
    why = "it is not a kolo segment of this layout version";
  } else if (h->epoch != epoch) {
    why = absl::StrCat("it belongs to epoch ", h->epoch, ", not ", epoch);
  } else if (std::memcmp(h->nonce, nonce.data(), kNonceBytes) != 0) {
    why = "its nonce differs from the one the creator announced";
  } else if (h->ranks != static_cast<uint32_t>(ranks)) {
    why = absl::StrCat("it is laid out for ", h->ranks, " ranks, not ", ranks);
  } else if (h->total_bytes != size || h->ring_bytes < kMinRing ||
             h->ring_bytes % kPage != 0 || h->slot_bytes % kPage != 0 ||
             h->ring_bytes > size || h->slot_bytes > size ||
             Size(ranks, h->ring_bytes, h->slot_bytes) != size) {
    why = "its size does not match its header";
  }
  if (!why.empty()) {
    ::munmap(base, size);
    return absl::FailedPreconditionError(
        absl::StrCat("shared memory: refusing the segment received: ", why));
  }
  const size_t ring_bytes = h->ring_bytes;
  const size_t slot_bytes = h->slot_bytes;
  return std::unique_ptr<Segment>(
      new Segment(std::move(fd), base, size, ranks, ring_bytes, slot_bytes));
}

Segment::~Segment() { ::munmap(base_, size_); }

Doorbell* Segment::bell(int rank) const {
  return std::launder(reinterpret_cast<Doorbell*>(base_ + BellsOffset() +
                                                  sizeof(Doorbell) * rank));
}

RingControl* Segment::control(int src, int dst) const {
  return std::launder(reinterpret_cast<RingControl*>(
      base_ + ControlsOffset(ranks_) +
      sizeof(RingControl) * (static_cast<size_t>(src) * ranks_ + dst)));
}

uint8_t* Segment::ring(int src, int dst) const {
  const size_t pair = static_cast<size_t>(src) * (ranks_ - 1) +
                      static_cast<size_t>(dst < src ? dst : dst - 1);
  return base_ + RingsOffset(ranks_) + pair * ring_bytes_;
}

PhaseWord* Segment::phase(int rank) const {
  return std::launder(reinterpret_cast<PhaseWord*>(
      base_ + PhasesOffset(ranks_, ring_bytes_) + sizeof(PhaseWord) * rank));
}

uint8_t* Segment::slot(int rank) const {
  return base_ + SlotsOffset(ranks_, ring_bytes_) +
         static_cast<size_t>(rank) * slot_bytes_;
}

}  // namespace kolo::shm
