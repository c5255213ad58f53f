// JobTls (launcher/job_tls.h): certificates given or made, and their files.
#include "launcher/job_tls.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/knobs.h"
#include "common/tls.h"
#include "common/tls_generate.h"

namespace kolo::launcher {
namespace {

absl::Status WriteFile0600(const std::string& path, const std::string& text) {
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  const bool written = ::write(fd, text.data(), text.size()) ==
                       static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!written) return absl::InternalError(absl::StrCat("write(", path, ")"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<JobTls>> JobTls::Prepare(
    const LaunchOptions& options, const std::map<std::string, std::string>& env,
    bool local_only) {
  absl::StatusOr<tls::TlsFiles> files =
      tls::TlsFilesFromFlagsOrEnvironment(options.tls_files, InMap(env));
  if (!files.ok()) return files.status();
  if (!options.tls && !files->enabled()) return nullptr;
  auto job = std::unique_ptr<JobTls>(new JobTls());
  if (files->enabled()) {
    absl::StatusOr<tls::TlsMaterial> material = tls::LoadTlsMaterial(*files);
    if (!material.ok()) return material.status();
    job->files_ = *std::move(files);
    job->material_ = *std::move(material);
    return job;
  }
  if (!local_only) {
    return absl::InvalidArgumentError(
        "--tls without certificates makes them on this host, where remote "
        "workers cannot read them: give the job's certificates with "
        "--tls-cert, --tls-key and --tls-ca (paths that hold on every host, "
        "e.g. a mounted secret; docs/security.md)");
  }
  absl::StatusOr<tls::TlsMaterial> made =
      tls::MakeJobMaterial(kThrowawayValidity);
  if (!made.ok()) return made.status();
  job->material_ = *std::move(made);
  if (absl::Status st = job->WriteThrowaway(); !st.ok()) return st;
  return job;
}

absl::Status JobTls::WriteThrowaway() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = absl::StrCat(
      tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/kolo-tls-XXXXXX");
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {  // mode 0700
    return absl::InternalError(absl::StrCat(
        "cannot make a directory for the job's certificates: mkdtemp(", pattern,
        "): ", std::strerror(errno),
        "; set TMPDIR to a writable "
        "directory"));
  }
  dir_ = buf.data();
  files_ = {dir_ + "/cert.pem", dir_ + "/key.pem", dir_ + "/ca.pem"};
  for (const auto& [path, text] : {std::pair{&files_.cert, &material_.cert_pem},
                                   std::pair{&files_.key, &material_.key_pem},
                                   std::pair{&files_.ca, &material_.ca_pem}}) {
    if (absl::Status st = WriteFile0600(*path, *text); !st.ok()) return st;
  }
  return absl::OkStatus();
}

JobTls::~JobTls() {
  if (dir_.empty()) return;
  for (const std::string* path : {&files_.cert, &files_.key, &files_.ca}) {
    ::unlink(path->c_str());
  }
  ::rmdir(dir_.c_str());
}

EnvList JobTls::WorkerEnv() const {
  return {{"KOLO_TLS_CERT", files_.cert},
          {"KOLO_TLS_KEY", files_.key},
          {"KOLO_TLS_CA", files_.ca}};
}

}  // namespace kolo::launcher
