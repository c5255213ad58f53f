// kolo-elastic-worker: the program the elastic tests run under kolorun
// --min-np (tests/multiprocess_elastic_test.cc; issue 17). A training loop
// under kolo::elastic::run with a State of one int64 tensor ("w", 4
// elements) and a blob ("step"): each step allreduces (rank + 1) over the
// epoch (exact: size * (size + 1) / 2 on every element), adds it to w and
// commits. A fault is a flag:
//   --steps N            steps to train (default 40)
//   --seconds T          train until rank 0 has trained T seconds (it tells
//                        the others in each step's allreduce), at most
//                        --steps steps
//   --step-ms M          stand-in compute per step (default 20)
//   --kill R:S           the worker that is rank R of epoch 1 SIGKILLs itself
//                        at step S (repeatable)
//   --kill-after-ms R:S:D  the same, D ms after reaching step S
//   --stop R:S:C         rank R of epoch 1 SIGSTOPs itself at step S; a child
//                        process sends it SIGCONT C ms later
//   --kill-in-reset R    the worker that is rank R of epoch 1 SIGKILLs itself
//                        in its first reset callback (while the others sync)
//   --term R:S           rank R of epoch 1 sends itself SIGTERM at step S: it
//                        leaves at that step's commit (exit 0)
//   --replacement-exits 1  a replacement kolorun starts (incarnation > 0)
//                        exits 0 at once: the job stays shrunk
//   --replacements-fail K  replacements of incarnation 1..K exit 3 at once
//                        (a slot that keeps failing)
//   --rejoin 0|1         an evicted worker rejoins (default 1) or ends with
//                        its error
//   --process-set        every rank adds process set {0, 1} first and runs an
//                        allreduce on it each step; after a reset the old set
//                        fails (kFailedPrecondition, "dissolved") and the
//                        reset callback adds it again
// Lines (each rank): EL_START worker=W incarnation=I rank=R size=S step=N t=T
// (after init and the first sync: a newcomer's step is the job's),
// EL_STEP_BAD (a wrong sum), EL_KILL t=<us> (just before
// a self-kill), EL_RESET n=K size=S rank=R, EL_RECOVERED t=<us> (the first
// step completed after a reset), EL_DISSOLVED code=C msg=..., and at the end
// EL_DONE rank=R size=S step=N w=W resets=K, or EL_ERROR code=C msg=... when
// run() returned an error (exit 3).
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "kolo/elastic.h"
#include "kolo/kolo.h"

namespace {

void Print(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

int64_t NowMicros() { return absl::ToUnixMicros(absl::Now()); }

std::string OneLine(absl::string_view s) {
  std::string out(s.substr(0, 300));
  for (char& c : out) {
    if (c == '\n') c = ' ';
  }
  return out;
}

struct Fault {
  enum Kind { kKill, kStop, kTerm } kind = kKill;
  int rank = -1;
  int64_t step = 0;
  int delay_ms = 0;  // kill: after reaching the step; stop: until SIGCONT
};

struct Args {
  int64_t steps = 40;
  int64_t seconds = 0;
  int step_ms = 20;
  std::vector<Fault> faults;
  int kill_in_reset = -1;
  bool process_set = false;
  bool rejoin = true;  // RunOptions::rejoin_after_eviction
  bool replacement_exits = false;
  int64_t replacements_fail = 0;
};

bool ParseInts(const std::string& text, std::vector<int64_t>& out) {
  for (absl::string_view part : absl::StrSplit(text, ':')) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(part, &v)) return false;
    out.push_back(v);
  }
  return true;
}

bool Parse(int argc, char** argv, Args& a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    std::vector<int64_t> v;
    if (flag == "--steps" && absl::SimpleAtoi(value, &a.steps)) continue;
    if (flag == "--seconds" && absl::SimpleAtoi(value, &a.seconds)) continue;
    if (flag == "--step-ms" && absl::SimpleAtoi(value, &a.step_ms)) continue;
    if (flag == "--kill-in-reset" && absl::SimpleAtoi(value, &a.kill_in_reset))
      continue;
    if (flag == "--replacements-fail" &&
        absl::SimpleAtoi(value, &a.replacements_fail)) {
      continue;
    }
    if (flag == "--replacement-exits") {
      a.replacement_exits = value == "1";
      continue;
    }
    if (flag == "--rejoin") {
      a.rejoin = value == "1";
      continue;
    }
    if (flag == "--process-set") {
      a.process_set = value == "1";
      continue;
    }
    if (!ParseInts(value, v)) return false;
    if (flag == "--kill" && v.size() == 2) {
      a.faults.push_back({Fault::kKill, static_cast<int>(v[0]), v[1], 0});
    } else if (flag == "--kill-after-ms" && v.size() == 3) {
      a.faults.push_back(
          {Fault::kKill, static_cast<int>(v[0]), v[1], static_cast<int>(v[2])});
    } else if (flag == "--term" && v.size() == 2) {
      a.faults.push_back({Fault::kTerm, static_cast<int>(v[0]), v[1], 0});
    } else if (flag == "--stop" && v.size() == 3) {
      a.faults.push_back(
          {Fault::kStop, static_cast<int>(v[0]), v[1], static_cast<int>(v[2])});
    } else {
      return false;
    }
  }
  return true;
}

void KillSelf() {
  Print(absl::StrCat("EL_KILL t=", NowMicros()));
  ::kill(::getpid(), SIGKILL);
}

// SIGSTOP now; a child sends SIGCONT after `ms`.
void StopSelf(int ms) {
  const pid_t me = ::getpid();
  if (::fork() == 0) {
    ::usleep(static_cast<useconds_t>(ms) * 1000);
    ::kill(me, SIGCONT);
    ::_exit(0);
  }
  Print(absl::StrCat("EL_STOP t=", NowMicros()));
  ::kill(me, SIGSTOP);
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!Parse(argc, argv, args)) {
    std::fprintf(stderr, "kolo-elastic-worker: bad arguments\n");
    return 2;
  }
  const char* incarnation = std::getenv("KOLO_WORKER_INCARNATION");
  if (args.replacement_exits && incarnation != nullptr &&
      std::string(incarnation) != "0") {
    Print("EL_REPLACEMENT_EXITS");
    return 0;
  }
  int64_t this_incarnation = 0;
  if (incarnation != nullptr &&
      absl::SimpleAtoi(incarnation, &this_incarnation) &&
      this_incarnation >= 1 && this_incarnation <= args.replacements_fail) {
    Print(absl::StrCat("EL_REPLACEMENT_FAILS incarnation=", this_incarnation,
                       " t=", NowMicros()));
    return 3;
  }
  if (absl::Status s = kolo::init(); !s.ok()) {
    Print(absl::StrCat("EL_ERROR code=", static_cast<int>(s.code()),
                       " msg=", OneLine(s.message())));
    return 3;
  }
  const int first_rank = kolo::rank();  // the fault plan names epoch-1 ranks
  const absl::Time started = absl::Now();

  std::vector<int64_t> w(4, 0);
  int64_t step = 0;
  std::string step_blob(sizeof(step), '\0');
  kolo::elastic::State state;
  (void)state.add_tensor("w", w.data(), static_cast<int64_t>(w.size()),
                         kolo::DataType::kInt64);
  (void)state.add_blob("step", &step_blob);
  int resets = 0;
  bool recovered_pending = false;
  kolo::ProcessSet set = 0;
  bool set_dissolved_checked = false;
  kolo::ProcessSet old_set = 0;
  state.register_reset_callback([&] {
    ++resets;
    recovered_pending = true;
    Print(absl::StrCat("EL_RESET n=", resets, " size=", kolo::size(),
                       " rank=", kolo::rank()));
    if (args.kill_in_reset == first_rank && resets == 1) KillSelf();
    if (args.process_set) {
      old_set = set;
      set = 0;  // added again in fn, on every rank, before it is used
    }
  });

  bool started_printed = false;
  kolo::elastic::RunOptions run_options;
  run_options.rejoin_after_eviction = args.rejoin;
  absl::Status result = kolo::elastic::run(
      state,
      [&]() -> absl::Status {
        std::memcpy(&step, step_blob.data(), sizeof(step));
        if (!started_printed) {
          started_printed = true;
          const char* inc = std::getenv("KOLO_WORKER_INCARNATION");
          Print(absl::StrCat("EL_START worker=", kolo::worker_id(),
                             " incarnation=", inc != nullptr ? inc : "0",
                             " rank=", kolo::rank(), " size=", kolo::size(),
                             " step=", step, " t=", NowMicros()));
        }
        if (args.process_set && old_set != 0 && !set_dissolved_checked) {
          int64_t one = 1, out = 0;
          kolo::Tensor in{kolo::DataType::kInt64, {1}, &one, kolo::kCpu};
          kolo::Tensor o{kolo::DataType::kInt64, {1}, &out, kolo::kCpu};
          absl::StatusOr<kolo::Handle> h =
              kolo::allreduce_async(in, o, {}, "on-the-old-set", old_set);
          absl::Status st = h.ok() ? kolo::synchronize(*h) : h.status();
          Print(absl::StrCat("EL_DISSOLVED code=", static_cast<int>(st.code()),
                             " msg=", OneLine(st.message())));
          set_dissolved_checked = true;
        }
        if (args.process_set && set == 0 && kolo::size() >= 2) {
          absl::StatusOr<kolo::ProcessSet> id = kolo::add_process_set({0, 1});
          if (!id.ok()) return id.status();
          set = *id;
        }
        while (step < args.steps) {
          for (const Fault& f : args.faults) {
            if (f.rank != first_rank || f.step != step) continue;
            if (f.kind == Fault::kKill) {
              if (f.delay_ms > 0)
                absl::SleepFor(absl::Milliseconds(f.delay_ms));
              KillSelf();
            } else if (f.kind == Fault::kTerm) {
              Print(absl::StrCat("EL_TERM t=", NowMicros()));
              ::raise(SIGTERM);
            } else {
              StopSelf(f.delay_ms);
            }
          }
          absl::SleepFor(absl::Milliseconds(args.step_ms));
          const int64_t size = kolo::size();
          // w's elements, then rank 0's "time is up" flag.
          std::vector<int64_t> in(w.size() + 1, kolo::rank() + 1),
              out(w.size() + 1, 0);
          in.back() = kolo::rank() == 0 && args.seconds > 0 &&
                      absl::Now() - started > absl::Seconds(args.seconds);
          absl::Status s = kolo::allreduce(in.data(), out.data(),
                                           static_cast<int64_t>(in.size()),
                                           kolo::DataType::kInt64);
          if (!s.ok()) return s;
          for (size_t i = 0; i < w.size(); ++i) {
            if (out[i] != size * (size + 1) / 2) {
              Print(absl::StrCat("EL_STEP_BAD step=", step, " got=", out[i],
                                 " size=", size));
            }
          }
          if (out.back() != 0 && out.back() != 1) {
            Print(
                absl::StrCat("EL_STEP_BAD step=", step, " flag=", out.back()));
          }
          if (args.process_set && set != 0 && kolo::rank() < 2) {
            int64_t one = 1, sum = 0;
            kolo::Tensor ti{kolo::DataType::kInt64, {1}, &one, kolo::kCpu};
            kolo::Tensor to{kolo::DataType::kInt64, {1}, &sum, kolo::kCpu};
            absl::StatusOr<kolo::Handle> h = kolo::allreduce_async(
                ti, to, {}, absl::StrCat("set-step-", step), set);
            absl::Status st = h.ok() ? kolo::synchronize(*h) : h.status();
            if (!st.ok()) return st;
            if (sum != 2) Print(absl::StrCat("EL_STEP_BAD set step=", step));
          }
          for (size_t i = 0; i < w.size(); ++i) w[i] += out[i];
          ++step;
          std::memcpy(step_blob.data(), &step, sizeof(step));
          if (absl::Status c = state.commit(); !c.ok()) return c;
          if (recovered_pending) {
            recovered_pending = false;
            Print(absl::StrCat("EL_RECOVERED t=", NowMicros(),
                               " size=", kolo::size()));
          }
          if (out.back() == 1) break;  // rank 0's time is up
        }
        return absl::OkStatus();
      },
      run_options);
  if (!result.ok()) {
    Print(absl::StrCat("EL_ERROR code=", static_cast<int>(result.code()),
                       " evicted=", kolo::elastic::is_evicted_error(result),
                       " msg=", OneLine(result.message())));
    (void)kolo::shutdown();
    return 3;
  }
  Print(absl::StrCat("EL_DONE rank=", kolo::rank(), " size=", kolo::size(),
                     " step=", step, " w=", w[0], " resets=", resets));
  absl::Status s = kolo::shutdown();
  if (!s.ok()) {
    Print(absl::StrCat("EL_SHUTDOWN code=", static_cast<int>(s.code()),
                       " msg=", OneLine(s.message())));
  }
  return 0;
}
