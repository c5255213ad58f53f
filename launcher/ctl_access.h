// CtlAccess: how a person reaches a kolorun job with kolo-ctl. kolorun's
// job secret is random and never on a command line; CtlAccess writes it to
// a private file (a fresh 0700 directory under $TMPDIR or /tmp, the file
// 0600) for the job's lifetime and says the command that reads it. The
// file and directory are removed when the CtlAccess is destroyed. Under TLS
// the command carries the job's certificates as kolo-ctl's flags
// (--tls-cert/--tls-key/--tls-ca, common/tls_flags.h).
//
// Thread-safety: one owner (kolorun's main thread).
// Invariant: path() is empty when the file could not be written (the
// reason is in error()); nothing is left behind either way.
#ifndef KOLO_LAUNCHER_CTL_ACCESS_H_
#define KOLO_LAUNCHER_CTL_ACCESS_H_

#include <string>

#include "common/tls.h"

namespace kolo::launcher {

class CtlAccess {
 public:
  // `tls`: the job's certificate files, or nullptr when it runs without
  // TLS.
  CtlAccess(const std::string& secret, const std::string& job_id,
            const std::string& coordinator, const tls::TlsFiles* tls = nullptr);
  ~CtlAccess();
  CtlAccess(const CtlAccess&) = delete;
  CtlAccess& operator=(const CtlAccess&) = delete;

  const std::string& path() const { return path_; }
  const std::string& error() const { return error_; }
  // "KOLO_SECRET_FILE=<path> kolo-ctl status --coordinator <addr> --job-id
  // <id>", under TLS followed by " --tls-cert <cert> --tls-key <key>
  // --tls-ca <ca>" (paths quoted for a shell where they need it), or ""
  // when there is no file.
  const std::string& command() const { return command_; }

 private:
  std::string dir_, path_, error_, command_;
};

}  // namespace kolo::launcher

#endif  // KOLO_LAUNCHER_CTL_ACCESS_H_
