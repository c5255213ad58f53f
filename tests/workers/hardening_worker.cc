// kolo-hardening-worker: the program the hardening tests run under kolorun
// (tests/multiprocess_hardening_test.cc; issue 16, defects a careless caller
// found). One mode per defect:
//   huge: shapes whose size overflows or that no machine holds ({2^62},
//     {2^61}, {2^32,2^32}, a blocking count of 2^62, an allgather of 2^61
//     rows, a grouped member) fail with kInvalidArgument on every rank; one
//     rank alone with a huge shape fails there with kInvalidArgument and on
//     the others with an error, nobody waiting. After each case a good
//     allreduce gives the exact sum. Prints "HARD_CASE case=K code=C" per
//     case and rank, then HARD_OK.
//   long-name: a name of 64 MiB + 1 and one of 16 KiB + 1 fail at once on
//     the submitting rank (kInvalidArgument, no abort); so does a
//     control_allgather value of 1 MiB; then a good allreduce. HARD_OK.
//   group-count: the last rank's group "g" has one member, the others' two;
//     every rank's group handle ends in an error (not a timeout). HARD_OK.
//   abandon: rank 0 submits 'only-0', which no other rank submits, and shuts
//     down: its shutdown() says which op it abandoned ("HARD_ABANDON code=C
//     msg=..."). The others wait in an op rank 0 never submits, which fails
//     when rank 0 leaves ("HARD_WAITED code=C msg=..."), then shut down
//     (OK).
//   no-shutdown: an allreduce, then main returns without kolo::shutdown():
//     the process must exit 0 (kolo shuts down at exit). Prints HARD_EXIT.
//   stopped-peer: raw allreduces of 8 MiB in a loop; rank 1 stops itself
//     (SIGSTOP) after 300 ms, mid-transfer; the others' allreduce fails
//     (KOLO_TIMEOUT_SECONDS, or the coordinator's verdict), they print
//     "HARD_STOPPED code=C msg=..." and return from main without shutdown().
//   killed-peer: the same with SIGKILL.
//   hold: allreduces every 50 ms until the job is stopped (at most 60 s).
// Every wait is bounded; nothing here can hang a test run.
#include <signal.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "kolo/kolo.h"
#include "worker_lib/api/raw.h"

namespace {

using kolo::DataType;
using kolo::Handle;
using kolo::Tensor;

const absl::Duration kWait = absl::Seconds(60);

void Print(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

int Fail(const std::string& what, const absl::Status& st) {
  Print(absl::StrCat("HARD_FAIL ", what, ": ", st.ToString()));
  (void)kolo::shutdown();
  return 4;
}

std::string OneLine(absl::string_view s) {
  std::string out(s.substr(0, 400));
  for (char& c : out) {
    if (c == '\n') c = ' ';
  }
  return out;
}

// A good allreduce of 4 int64 (rank+1 each): the job still works.
absl::Status GoodAllreduce(const std::string& name) {
  std::vector<int64_t> in(4, kolo::rank() + 1), out(4, -1);
  const int64_t n = kolo::size();
  absl::StatusOr<Handle> h = kolo::allreduce_async(
      Tensor{DataType::kInt64, {4}, in.data()},
      Tensor{DataType::kInt64, {4}, out.data()}, {}, name);
  if (!h.ok()) return h.status();
  if (absl::Status s = kolo::synchronize(*h, kWait); !s.ok()) return s;
  for (int64_t v : out) {
    if (v != n * (n + 1) / 2) {
      return absl::InternalError(
          absl::StrCat(name, ": got ", v, ", want ", n * (n + 1) / 2));
    }
  }
  return absl::OkStatus();
}

// The status of one submitted op: the submission's error, or the wait's.
absl::Status Outcome(const absl::StatusOr<Handle>& h) {
  if (!h.ok()) return h.status();
  return kolo::synchronize(*h, kWait);
}

int Huge() {
  const int rank = kolo::rank();
  const int last = kolo::size() - 1;
  std::vector<float> small(4, 1.0f), small_out(4, 0.0f);
  std::vector<float> gathered;
  auto alloc = [&](absl::Span<const int64_t> shape) -> absl::StatusOr<void*> {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    gathered.assign(static_cast<size_t>(n), 0.0f);
    return gathered.data();
  };
  auto big = [&](std::vector<int64_t> shape) {
    return Tensor{DataType::kFloat32, std::move(shape), small.data()};
  };
  auto big_out = [&](std::vector<int64_t> shape) {
    return Tensor{DataType::kFloat32, std::move(shape), small_out.data()};
  };
  const int64_t k62 = int64_t{1} << 62, k61 = int64_t{1} << 61,
                k32 = int64_t{1} << 32;
  struct Case {
    std::string name;
    absl::Status status;
  };
  std::vector<Case> cases;
  auto run = [&](const std::string& name, const absl::Status& s) {
    cases.push_back({name, s});
    Print(absl::StrCat("HARD_CASE case=", name,
                       " code=", static_cast<int>(s.code()),
                       " msg=", OneLine(s.message())));
    if (absl::Status g = GoodAllreduce("good." + name); !g.ok()) {
      Print(absl::StrCat("HARD_FAIL after ", name, ": ", g.ToString()));
    }
  };
  run("2^62", Outcome(kolo::allreduce_async(big({k62}), big_out({k62}), {},
                                            "huge.62")));
  run("2^61", Outcome(kolo::allreduce_async(big({k61}), big_out({k61}), {},
                                            "huge.61")));
  run("2^32x2^32",
      Outcome(kolo::allreduce_async(big({k32, k32}), big_out({k32, k32}), {},
                                    "huge.32x32")));
  run("blocking",
      kolo::allreduce(small.data(), small_out.data(), k62, DataType::kFloat32));
  run("allgather",
      Outcome(kolo::allgather_async(big({k61}), alloc, "huge.gather")));
  {
    std::vector<Tensor> in = {big({4}), big({k62})};
    std::vector<Tensor> out = {big_out({4}), big_out({k62})};
    run("grouped",
        Outcome(kolo::grouped_allreduce_async(in, out, {}, "huge.group")));
  }
  // Only the last rank's shape is huge.
  const std::vector<int64_t> one_shape =
      rank == last ? std::vector<int64_t>{k62} : std::vector<int64_t>{4};
  run("one-rank", Outcome(kolo::allreduce_async(
                      big(one_shape), big_out(one_shape), {}, "huge.one")));
  Print(absl::StrCat("HARD_OK mode=huge rank=", rank, " size=", kolo::size()));
  absl::Status s = kolo::shutdown();
  return s.ok() ? 0 : Fail("shutdown", s);
}

int LongName() {
  std::vector<int64_t> in(4, 1), out(4, 0);
  for (size_t len : {(size_t{64} << 20) + 1, size_t{16} * 1024 + 1}) {
    const std::string name(len, 'n');
    absl::StatusOr<Handle> h = kolo::allreduce_async(
        Tensor{DataType::kInt64, {4}, in.data()},
        Tensor{DataType::kInt64, {4}, out.data()}, {}, name);
    Print(absl::StrCat("HARD_CASE case=name", len,
                       " code=", static_cast<int>(h.status().code()),
                       " msg=", OneLine(h.status().message())));
    if (h.ok()) (void)kolo::synchronize(*h, kWait);
  }
  absl::StatusOr<std::vector<std::string>> x = kolo::control_allgather(
      "big", std::string(size_t{1} << 20, 'v'), absl::Seconds(30));
  Print(absl::StrCat(
      "HARD_CASE case=exchange code=", static_cast<int>(x.status().code()),
      " msg=", OneLine(x.status().message())));
  if (absl::Status g = GoodAllreduce("good.name"); !g.ok()) {
    return Fail("good allreduce", g);
  }
  Print(absl::StrCat("HARD_OK mode=long-name rank=", kolo::rank(),
                     " size=", kolo::size()));
  absl::Status s = kolo::shutdown();
  return s.ok() ? 0 : Fail("shutdown", s);
}

int GroupCount() {
  const bool fewer = kolo::rank() == kolo::size() - 1;
  std::vector<int64_t> a(4, 1), b(4, 1), oa(4, 0), ob(4, 0);
  std::vector<Tensor> in = {Tensor{DataType::kInt64, {4}, a.data()}};
  std::vector<Tensor> out = {Tensor{DataType::kInt64, {4}, oa.data()}};
  if (!fewer) {
    in.push_back(Tensor{DataType::kInt64, {4}, b.data()});
    out.push_back(Tensor{DataType::kInt64, {4}, ob.data()});
  }
  absl::Status s = Outcome(kolo::grouped_allreduce_async(in, out, {}, "g"));
  Print(absl::StrCat("HARD_CASE case=group code=", static_cast<int>(s.code()),
                     " msg=", OneLine(s.message())));
  if (absl::Status g = GoodAllreduce("good.group"); !g.ok()) {
    return Fail("good allreduce", g);
  }
  Print(absl::StrCat("HARD_OK mode=group-count rank=", kolo::rank(),
                     " size=", kolo::size()));
  absl::Status done = kolo::shutdown();
  return done.ok() ? 0 : Fail("shutdown", done);
}

int Abandon() {
  std::vector<int64_t> in(4, 1), out(4, 0);
  if (kolo::rank() == 0) {
    absl::StatusOr<Handle> h = kolo::allreduce_async(
        Tensor{DataType::kInt64, {4}, in.data()},
        Tensor{DataType::kInt64, {4}, out.data()}, {}, "only-0");
    if (!h.ok()) return Fail("submit", h.status());
  }
  // Every rank past its submission before anyone leaves.
  absl::StatusOr<std::vector<std::string>> x =
      kolo::control_allgather("submitted", "", kWait);
  if (!x.ok()) return Fail("control_allgather", x.status());
  const int rank = kolo::rank();
  if (rank != 0) {
    // Rank 0 shuts down first: an op it never submits fails here when it
    // leaves (so 'only-0' is still pending at its shutdown, whatever the
    // timing).
    std::vector<int64_t> w(4, 1), wo(4, 0);
    absl::StatusOr<Handle> h = kolo::allreduce_async(
        Tensor{DataType::kInt64, {4}, w.data()},
        Tensor{DataType::kInt64, {4}, wo.data()}, {}, "after-rank-0");
    if (!h.ok()) return Fail("submit", h.status());
    absl::Status waited = kolo::synchronize(*h, kWait);
    Print(absl::StrCat("HARD_WAITED rank=", rank,
                       " code=", static_cast<int>(waited.code()),
                       " msg=", OneLine(waited.message())));
  }
  absl::Status s = kolo::shutdown();
  Print(absl::StrCat("HARD_ABANDON rank=", rank,
                     " code=", static_cast<int>(s.code()),
                     " msg=", OneLine(s.message())));
  return 0;
}

int NoShutdown() {
  if (absl::Status g = GoodAllreduce("good.exit"); !g.ok()) {
    return Fail("good allreduce", g);
  }
  Print(absl::StrCat("HARD_EXIT rank=", kolo::rank()));
  return 0;  // kolo stays initialised: it shuts down at exit
}

int StoppedPeer(int sig) {
  // Rank 1 stops (or kills) itself in the middle of the data transfers: the
  // others then wait on the data plane (raw collectives: no negotiation).
  std::thread stopper;
  if (kolo::rank() == 1) {
    stopper = std::thread([sig] {
      absl::SleepFor(absl::Milliseconds(300));
      Print("HARD_STOPPING rank=1");
      raise(sig);
    });
  }
  std::vector<int64_t> in(1 << 20, 1), out(1 << 20, 0);
  absl::Status s;
  const absl::Time end = absl::Now() + absl::Seconds(120);
  while (s.ok() && absl::Now() < end) {
    s = kolo::raw::allreduce(in.data(), out.data(), 1 << 20, DataType::kInt64);
  }
  Print(absl::StrCat("HARD_STOPPED rank=", kolo::rank(),
                     " code=", static_cast<int>(s.code()),
                     " msg=", OneLine(s.message())));
  if (stopper.joinable()) stopper.join();
  return 0;  // without shutdown(), as the bench did
}

// Allreduces every 50 ms for up to 60 s (until kolorun stops the job).
int Hold() {
  const absl::Time end = absl::Now() + absl::Seconds(60);
  Print(absl::StrCat("HARD_HOLDING rank=", kolo::rank()));
  while (absl::Now() < end) {
    if (absl::Status g = GoodAllreduce("hold"); !g.ok()) {
      Print(absl::StrCat("HARD_HOLD_ENDED rank=", kolo::rank(),
                         " code=", static_cast<int>(g.code()),
                         " msg=", OneLine(g.message())));
      return 1;
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  (void)kolo::shutdown();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: kolo-hardening-worker MODE\n");
    return 2;
  }
  const std::string mode = argv[1];
  if (absl::Status s = kolo::init(); !s.ok()) return Fail("init", s);
  if (mode == "huge") return Huge();
  if (mode == "long-name") return LongName();
  if (mode == "group-count") return GroupCount();
  if (mode == "abandon") return Abandon();
  if (mode == "no-shutdown") return NoShutdown();
  if (mode == "stopped-peer") return StoppedPeer(SIGSTOP);
  if (mode == "killed-peer") return StoppedPeer(SIGKILL);
  if (mode == "hold") return Hold();
  return Fail("mode", absl::InvalidArgumentError("unknown mode " + mode));
}
