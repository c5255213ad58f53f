// kolorun's host lists: -H's "host:slots,..." (ParseHosts) and --hostfile
// FILE (also -hostfile): the hosts and their slots from a file in
// horovodrun's and Open MPI's format, one host a line:
//
//   # comment            blank lines and '#' comments are skipped
//   node1 slots=4        the usual form (max_slots=M may follow; ignored)
//   node2:2              -H's form
//   node3                default_slots (kolorun's --slots-per-host, 1)
//
// Pure: ParseHostfile works on the text; ReadHostfile reads the file first.
// Thread-safety: all functions are thread-safe.
// Invariants of a result: not empty; every name is non-empty and has no
// white space; every slot count is >= 1.
#ifndef KOLO_LAUNCHER_HOSTFILE_H_
#define KOLO_LAUNCHER_HOSTFILE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "launcher/args.h"

namespace kolo::launcher {

// Parses -H's "a:2,b,c:1" (slots default to `default_slots`; errors quote
// the text, kInvalidArgument).
absl::StatusOr<std::vector<HostSlots>> ParseHosts(absl::string_view text,
                                                  int default_slots = 1);

// Parses `text`, the contents of the hostfile `path` (named in errors, with
// the line number, the line and what was expected; kInvalidArgument).
absl::StatusOr<std::vector<HostSlots>> ParseHostfile(absl::string_view path,
                                                     absl::string_view text,
                                                     int default_slots = 1);

// Reads `path` with `read_file` and parses it.
absl::StatusOr<std::vector<HostSlots>> ReadHostfile(const std::string& path,
                                                    const ReadFileFn& read_file,
                                                    int default_slots = 1);

}  // namespace kolo::launcher

#endif  // KOLO_LAUNCHER_HOSTFILE_H_
