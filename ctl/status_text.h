// kolo-ctl's human output: a StatusReply as text. Four blocks: the job (id,
// phase, epoch, elastic bounds, resets, plans, why it ended), a table of the
// workers, the pending tensors with the ranks that have NOT announced them
// (ctl/pending.h) and which of them stalled, and the membership history (one
// line per epoch: when it formed, why, who joined, left or was lost).
//
// The output depends only on its arguments (no clock, no environment), so
// tests compare it line by line.
//
// Thread-safety: pure function.
#ifndef KOLO_CTL_STATUS_TEXT_H_
#define KOLO_CTL_STATUS_TEXT_H_

#include <string>

#include "ctl/format_context.h"
#include "proto/kolo.pb.h"

namespace kolo::ctl {

// Every line ends in '\n'.
std::string FormatStatusText(const proto::StatusReply& reply,
                             const FormatContext& context);

}  // namespace kolo::ctl

#endif  // KOLO_CTL_STATUS_TEXT_H_
