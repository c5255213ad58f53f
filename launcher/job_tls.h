// JobTls: a kolorun job's TLS (issue 38). kolorun --tls, or certificates
// given (--tls-cert/--tls-key/--tls-ca, else KOLO_TLS_CERT/KOLO_TLS_KEY/
// KOLO_TLS_CA in kolorun's environment), puts the control plane (the
// embedded coordinator's gRPC port, the workers' Sessions, kolo-ctl) on TLS
// with mutual authentication.
// - Files given: they are checked here (common/tls.h), and the same paths
//   go to every worker in KOLO_TLS_* (remote ones too: the paths must hold
//   there, as a Kubernetes Secret mounted everywhere does).
// - --tls alone: kolorun makes a throwaway CA and one certificate from it
//   (common/tls_generate.h: EC P-256, subjectAltName DNS:kolo-job, valid 30
//   days: a job outlives a day, and the CA's key is dropped at once, so no
//   other certificate can ever be signed by it). They are written 0600 in a
//   fresh 0700 directory under $TMPDIR (or /tmp), handed to the local
//   workers in KOLO_TLS_* as the secret is, and removed with the directory
//   when the JobTls is destroyed (kolorun's end, on failure too). Remote
//   workers cannot read them: with remote hosts --tls needs the files.
//
// Thread-safety: one owner (kolorun's main thread).
#ifndef KOLO_LAUNCHER_JOB_TLS_H_
#define KOLO_LAUNCHER_JOB_TLS_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/tls.h"
#include "launcher/args.h"
#include "launcher/command_line.h"

namespace kolo::launcher {

// How long kolorun's own certificates are valid.
inline constexpr absl::Duration kThrowawayValidity = absl::Hours(24 * 30);

class JobTls {
 public:
  // nullptr when the job runs without TLS. `local_only`: every worker runs
  // on this host (no remote hosts, no discovery script).
  static absl::StatusOr<std::unique_ptr<JobTls>> Prepare(
      const LaunchOptions& options,
      const std::map<std::string, std::string>& env, bool local_only);
  ~JobTls();
  JobTls(const JobTls&) = delete;
  JobTls& operator=(const JobTls&) = delete;

  const tls::TlsMaterial& material() const { return material_; }
  const tls::TlsFiles& files() const { return files_; }
  // kolorun made them (and removes them).
  bool throwaway() const { return !dir_.empty(); }
  // KOLO_TLS_CERT, KOLO_TLS_KEY, KOLO_TLS_CA for every worker.
  EnvList WorkerEnv() const;

 private:
  JobTls() = default;
  absl::Status WriteThrowaway();

  tls::TlsFiles files_;
  tls::TlsMaterial material_;
  std::string dir_;  // the 0700 directory of throwaway files; "" if none
};

}  // namespace kolo::launcher

#endif  // KOLO_LAUNCHER_JOB_TLS_H_
