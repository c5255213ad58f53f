#include "worker_lib/timeline.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace kolo::worker {
namespace {

std::shared_ptr<spdlog::logger> Log() { return GetLogger("timeline"); }

// Appends `ns` nanoseconds as microseconds with three decimals, exactly
// (no floating point): -1500 -> "-1.500".
void AppendMicros(int64_t ns, std::string* out) {
  uint64_t mag = static_cast<uint64_t>(ns);
  if (ns < 0) {
    out->push_back('-');
    mag = ~mag + 1;  // two's complement magnitude, also for INT64_MIN
  }
  const uint64_t frac = mag % 1000;
  absl::StrAppend(out, mag / 1000, ".");
  out->push_back(static_cast<char>('0' + frac / 100));
  out->push_back(static_cast<char>('0' + frac / 10 % 10));
  out->push_back(static_cast<char>('0' + frac % 10));
}

void AppendArgs(const Timeline::Args& args, std::string* out) {
  if (args.empty()) return;
  out->append(",\"args\":{");
  for (size_t i = 0; i < args.size(); ++i) {
    if (i > 0) out->push_back(',');
    AppendJsonString(args[i].first, out);
    out->push_back(':');
    AppendJsonString(args[i].second, out);
  }
  out->push_back('}');
}

// The length of the valid UTF-8 sequence at the start of `s` (non-empty, its
// first byte >= 0x80), or 0 if there is none (RFC 3629: no overlong forms,
// no surrogates, nothing above U+10FFFF).
size_t Utf8SequenceLength(absl::string_view s) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = byte(0);
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (s.size() < n || byte(1) < lo || byte(1) > hi) return 0;
  for (size_t i = 2; i < n; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return n;
}

}  // namespace

void AppendJsonString(absl::string_view s, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    // A run of printable ASCII other than '"' and '\\' is copied at once.
    size_t run = i;
    while (run < s.size() && s[run] >= 0x20 && s[run] < 0x7f && s[run] != '"' &&
           s[run] != '\\') {
      ++run;
    }
    out->append(s.data() + i, run - i);
    i = run;
    if (i == s.size()) break;
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t n = Utf8SequenceLength(s.substr(i));
      if (n == 0) {
        out->append("\\ufffd");
        ++i;
      } else {
        out->append(s.data() + i, n);
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < 0x20) {
          out->append("\\u00");
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 0xF]);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  out->push_back('"');
}

absl::StatusOr<std::unique_ptr<Timeline>> Timeline::Open(
    const std::string& path, int rank, Options options) {
  std::FILE* file = std::fopen(path.c_str(), "we");
  if (file == nullptr) {
    const int err = errno;
    return absl::Status(
        absl::ErrnoToStatusCode(err),
        absl::StrCat("cannot create the timeline file '", path,
                     "': ", std::strerror(err),
                     "; set KOLO_TIMELINE to a writable path (its directory "
                     "must exist), or unset it"));
  }
  // The header: the array, then this rank's name and the plans row. Buffered
  // here; the writer's first flush reports a write error.
  std::string header =
      absl::StrCat("[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":", rank,
                   ",\"tid\":0,\"args\":{\"name\":\"rank ", rank, "\"}},\n",
                   "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":", rank,
                   ",\"tid\":0,\"args\":{\"name\":\"plans\"}}");
  if (std::fwrite(header.data(), 1, header.size(), file) != header.size()) {
    const int err = errno;
    std::fclose(file);
    return absl::Status(
        absl::ErrnoToStatusCode(err),
        absl::StrCat("cannot write the timeline file '", path,
                     "': ", std::strerror(err),
                     "; set KOLO_TIMELINE to a writable path, or unset it"));
  }
  return std::unique_ptr<Timeline>(new Timeline(file, path, rank, options));
}

Timeline::Timeline(std::FILE* file, std::string path, int rank, Options options)
    : path_(std::move(path)),
      rank_(rank),
      options_(options),
      origin_(options.origin == absl::InfinitePast() ? absl::Now()
                                                     : options.origin),
      full_batch_(std::max<size_t>(1, options.max_queued / 4)),
      file_(file) {
  writer_ = std::thread([this] { WriterMain(); });
}

Timeline::~Timeline() { Close(); }

Timeline::Row& Timeline::RowOf(absl::string_view tensor) {
  auto it = rows_.find(tensor);
  if (it == rows_.end()) {
    it = rows_.emplace(std::string(tensor), Row{0, {}}).first;
  }
  return it->second;
}

bool Timeline::Push(Row* row, absl::string_view tensor, Event event,
                    bool exempt) {
  if (!exempt && queue_.size() >= options_.max_queued) {
    ++dropped_;
    return false;
  }
  if (row != nullptr && row->tid == 0) {
    row->tid = next_tid_++;
    queue_.push_back(
        Event{Kind::kRowName, row->tid, event.at, std::string(tensor), {}});
  }
  event.tid = row != nullptr ? row->tid : 0;
  queue_.push_back(std::move(event));
  return true;
}

bool Timeline::TakeWake() {
  const bool wake =
      (writer_wants_ == Wants::kAnyEvent && !queue_.empty()) ||
      (writer_wants_ == Wants::kFullBatch && queue_.size() >= full_batch_);
  if (wake) writer_wants_ = Wants::kNothing;  // one signal per sleep
  return wake;
}

void Timeline::Begin(absl::string_view tensor, absl::string_view phase,
                     absl::Time at, Args args) {
  bool wake;
  {
    MutexLock lock(&mu_);
    if (closing_) {
      ++dropped_;
      return;
    }
    Row& row = RowOf(tensor);
    const bool queued =
        Push(&row, tensor,
             Event{Kind::kBegin, 0, at, std::string(phase), std::move(args)},
             /*exempt=*/false);
    row.open.push_back(queued);
    wake = TakeWake();
  }
  if (wake) cv_.Signal();
}

void Timeline::End(absl::string_view tensor, absl::Time at) {
  bool wake;
  {
    MutexLock lock(&mu_);
    if (closing_) {
      ++dropped_;
      return;
    }
    auto it = rows_.find(tensor);
    if (it == rows_.end() || it->second.open.empty()) return;  // unmatched
    Row& row = it->second;
    const bool begin_queued = row.open.back();
    row.open.pop_back();
    if (!begin_queued) {
      ++dropped_;  // with its Begin
      return;
    }
    // Exempt from max_queued: the queue exceeds it by at most the Begins
    // still open, and the file keeps its B/E pairs.
    Push(&row, tensor, Event{Kind::kEnd, 0, at, {}, {}},
         /*exempt=*/true);
    wake = TakeWake();
  }
  if (wake) cv_.Signal();
}

void Timeline::Instant(absl::string_view tensor, absl::string_view name,
                       absl::Time at, Args args) {
  bool wake;
  {
    MutexLock lock(&mu_);
    if (closing_) {
      ++dropped_;
      return;
    }
    Row& row = RowOf(tensor);
    Push(&row, tensor,
         Event{Kind::kInstant, 0, at, std::string(name), std::move(args)},
         /*exempt=*/false);
    wake = TakeWake();
  }
  if (wake) cv_.Signal();
}

void Timeline::Marker(absl::string_view name, absl::Time at, Args args) {
  bool wake;
  {
    MutexLock lock(&mu_);
    if (closing_) {
      ++dropped_;
      return;
    }
    Push(nullptr, {},
         Event{Kind::kInstant, 0, at, std::string(name), std::move(args)},
         /*exempt=*/false);
    wake = TakeWake();
  }
  if (wake) cv_.Signal();
}

void Timeline::Close() {
  MutexLock close_lock(&close_mu_);
  if (closed_) return;
  closed_ = true;
  {
    MutexLock lock(&mu_);
    closing_ = true;
  }
  cv_.Signal();
  writer_.join();
  const uint64_t dropped_events = dropped();
  if (dropped_events > 0) {
    Log()->warn(
        "timeline '{}': {} events were dropped (the writer fell behind with "
        "{} events queued, or could not write); the trace is incomplete",
        path_, dropped_events, options_.max_queued);
  }
}

uint64_t Timeline::dropped() const {
  MutexLock lock(&mu_);
  return dropped_;
}

void Timeline::WriterMain() {
  std::vector<Event> batch;
  std::string out;
  while (true) {
    bool closing;
    // Taken with the last batch, when closing.
    std::vector<std::pair<int, size_t>> open;  // (tid, Begins still open)
    uint64_t dropped_events = 0;
    {
      MutexLock lock(&mu_);
      // Sleep until an event comes, then let a batch gather.
      while (queue_.empty() && !closing_) {
        writer_wants_ = Wants::kAnyEvent;
        cv_.Wait(&mu_);
      }
      const absl::Time deadline = absl::Now() + options_.flush_interval;
      bool timed_out = false;
      while (!closing_ && queue_.size() < full_batch_ && !timed_out) {
        writer_wants_ = Wants::kFullBatch;
        timed_out = cv_.WaitWithDeadline(&mu_, deadline);
      }
      writer_wants_ = Wants::kNothing;
      batch.swap(queue_);  // queue_ gets the old batch's (cleared) capacity
      closing = closing_;
      if (closing) {
        for (const auto& [tensor, row] : rows_) {
          const size_t n = std::count(row.open.begin(), row.open.end(), true);
          if (n > 0) open.emplace_back(row.tid, n);
        }
        dropped_events = dropped_;
      }
    }
    out.clear();
    size_t events = 0;  // the callers' events in the batch
    for (const Event& event : batch) {
      if (event.kind != Kind::kRowName) ++events;
      if (!write_failed_) Format(event, &out);
    }
    batch.clear();
    if (!closing) {
      Write(out, events);
      continue;
    }
    // Finish: end the open slices, record the drops, close the array.
    const absl::Time end = std::max(absl::Now(), latest_);
    std::sort(open.begin(), open.end());
    for (const auto& [tid, n] : open) {
      for (size_t i = 0; i < n; ++i) {
        Format(Event{Kind::kEnd, tid, end, {}, {}}, &out);
      }
    }
    Format(Event{Kind::kClosed,
                 0,
                 end,
                 "timeline closed",
                 {{"dropped_events", absl::StrCat(dropped_events)}}},
           &out);
    out.append("\n]\n");
    Write(out, events);
    if (std::fclose(file_) != 0 && !write_failed_) {
      Log()->error("cannot close the timeline file '{}': {}", path_,
                   std::strerror(errno));
    }
    file_ = nullptr;
    return;
  }
}

void Timeline::Format(const Event& event, std::string* out) {
  out->append(",\n{");
  if (event.kind == Kind::kRowName) {
    absl::StrAppend(out,
                    "\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":", rank_,
                    ",\"tid\":", event.tid, ",\"args\":{\"name\":");
    AppendJsonString(event.name, out);
    out->append("}}");
    return;
  }
  if (event.kind != Kind::kEnd) {
    out->append("\"name\":");
    AppendJsonString(event.name, out);
    out->push_back(',');
  }
  switch (event.kind) {
    case Kind::kBegin:
      out->append("\"ph\":\"B\"");
      break;
    case Kind::kEnd:
      out->append("\"ph\":\"E\"");
      break;
    case Kind::kInstant:
      out->append("\"ph\":\"i\",\"s\":\"t\"");
      break;
    case Kind::kClosed:
      out->append("\"ph\":\"i\",\"s\":\"p\"");
      break;
    case Kind::kRowName:
      break;
  }
  out->append(",\"ts\":");
  AppendMicros(absl::ToInt64Nanoseconds(event.at - origin_), out);
  absl::StrAppend(out, ",\"pid\":", rank_, ",\"tid\":", event.tid);
  AppendArgs(event.args, out);
  out->push_back('}');
  latest_ = std::max(latest_, event.at);
}

void Timeline::Write(const std::string& bytes, size_t events) {
  if (!write_failed_) {
    if (std::fwrite(bytes.data(), 1, bytes.size(), file_) == bytes.size() &&
        std::fflush(file_) == 0) {
      return;
    }
    const int err = errno;
    write_failed_ = true;
    Log()->error(
        "cannot write the timeline file '{}': {}; the rest of the timeline is "
        "dropped (free some space, or point KOLO_TIMELINE elsewhere)",
        path_, std::strerror(err));
  }
  if (events > 0) {
    MutexLock lock(&mu_);
    dropped_ += events;
  }
}

}  // namespace kolo::worker
