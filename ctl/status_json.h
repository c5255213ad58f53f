// kolo-ctl's --json output: a StatusReply as one JSON object, with the same
// content as the text (ctl/status_text.h) plus the computed parts (missing
// ranks, stalled), keys in a fixed order:
//   {"time_unix_ms", "coordinator",
//    "job": {"id", "phase", "epoch", "incarnation" (16 hex digits: a 64-bit
//            number does not survive JSON parsers that use doubles),
//            "expected_size", "members", "plans", "elastic", "min_size",
//            "max_size" (0: no cap), "resets", "end_reason",
//            "failed_worker"},
//    "workers": [{"worker_id", "incarnation", "rank" (-1: none yet), "host",
//                 "data_address", "state", "heard_ms_ago", "pid"}],
//    "pending": [{"name", "seconds", "stalled", "submitted_ranks",
//                 "missing": [{"rank", "worker_id"}]}],
//    "stall_check_seconds",
//    "lost": [{"worker_id", "rank", "host", "cause"}],
//    "history": [{"epoch", "formed_unix_ms", "cause", "members", "joined",
//                 "left", "lost": [...]}]}
// A failed poll of --watch is {"time_unix_ms", "coordinator", "error"}.
//
// Thread-safety: pure functions.
#ifndef KOLO_CTL_STATUS_JSON_H_
#define KOLO_CTL_STATUS_JSON_H_

#include <string>

#include "ctl/format_context.h"
#include "nlohmann/json.hpp"
#include "proto/kolo.pb.h"

namespace kolo::ctl {

nlohmann::ordered_json StatusToJson(const proto::StatusReply& reply,
                                    const FormatContext& context);

// The object for a poll that failed with `error`.
nlohmann::ordered_json ErrorToJson(const std::string& error,
                                   const FormatContext& context);

}  // namespace kolo::ctl

#endif  // KOLO_CTL_STATUS_JSON_H_
