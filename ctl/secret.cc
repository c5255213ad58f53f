#include "ctl/secret.h"

#include <optional>

#include "absl/status/status.h"
#include "common/auth.h"

namespace kolo::ctl {

absl::StatusOr<std::string> LoadSecret(const CtlOptions& options,
                                       EnvLookup env) {
  if (!options.secret_file.empty()) {
    return auth::LoadSecretFile(options.secret_file);
  }
  if (std::optional<std::string> s = env("KOLO_SECRET");
      s.has_value() && !s->empty()) {
    if (absl::Status st = auth::CheckSecretStrength(*s, "KOLO_SECRET");
        !st.ok()) {
      return st;
    }
    return *s;
  }
  if (std::optional<std::string> f = env("KOLO_SECRET_FILE");
      f.has_value() && !f->empty()) {
    return auth::LoadSecretFile(*f);
  }
  return absl::FailedPreconditionError(
      "no job secret: the coordinator answers only callers that know the "
      "job's secret; pass --secret-file FILE (the file the job was started "
      "with), or set KOLO_SECRET or KOLO_SECRET_FILE");
}

}  // namespace kolo::ctl
