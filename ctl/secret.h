// Where kolo-ctl gets the job secret: --secret-file FILE, else KOLO_SECRET,
// else KOLO_SECRET_FILE, as the workers look for it (KOLO_SECRET before
// KOLO_SECRET_FILE). Never from a command-line value.
//
// Thread-safety: reads the file named; otherwise pure.
#ifndef KOLO_CTL_SECRET_H_
#define KOLO_CTL_SECRET_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/knobs.h"
#include "ctl/options.h"

namespace kolo::ctl {

// The secret, or an error that says where it looked and what to do (a file
// that cannot be read, a secret too short to be a job's: auth.h's checks).
absl::StatusOr<std::string> LoadSecret(const CtlOptions& options,
                                       EnvLookup env);

}  // namespace kolo::ctl

#endif  // KOLO_CTL_SECRET_H_
