#include "ctl/run.h"

#include <string>

#include "ctl/names.h"
#include "ctl/status_json.h"
#include "ctl/status_text.h"

namespace kolo::ctl {
namespace {

// Prints one poll's outcome; returns whether it succeeded.
bool PrintPoll(const CtlOptions& o, const RunIo& io) {
  absl::StatusOr<proto::StatusReply> reply = io.poll();
  FormatContext ctx;
  ctx.now = io.clock();
  ctx.stall_check = o.knobs.stall_check;
  ctx.coordinator = o.coordinator;
  std::ostream& out = *io.out;
  if (o.json) {
    if (reply.ok()) {
      out << StatusToJson(*reply, ctx).dump() << "\n";
    } else if (o.watch) {
      out << ErrorToJson(std::string(reply.status().message()), ctx).dump()
          << "\n";
    }
  } else {
    if (o.watch) {
      out << kClearScreen << "kolo-ctl status --watch: every "
          << absl::FormatDuration(o.interval) << ", "
          << FormatUnixMillis(absl::ToUnixMillis(ctx.now))
          << " UTC (Ctrl-C stops)\n\n";
    }
    if (reply.ok()) {
      out << FormatStatusText(*reply, ctx);
    } else if (o.watch) {
      out << "kolo-ctl: " << reply.status().message() << "\n";
    }
  }
  out.flush();
  if (!reply.ok() && !o.watch) {
    *io.err << "kolo-ctl: " << reply.status().message() << "\n";
  }
  return reply.ok();
}

}  // namespace

int RunStatus(const CtlOptions& options, const RunIo& io) {
  if (!options.watch) return PrintPoll(options, io) ? 0 : 1;
  while (true) {
    PrintPoll(options, io);
    if (!io.wait(options.interval)) return 0;
  }
}

}  // namespace kolo::ctl
