// kolorun --check-build: see launcher/check_build.h. CMake defines
// KOLO_HAVE_CUDA (1 when built with CUDA and NCCL; nccl.h then gives the
// version) and KOLO_WITH_PYTHON_SETTING (the KOLO_WITH_PYTHON option).
#include "launcher/check_build.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/version.h"

#if KOLO_HAVE_CUDA
#include <nccl.h>
#endif

#ifndef KOLO_WITH_PYTHON_SETTING
#define KOLO_WITH_PYTHON_SETTING "unknown"
#endif

namespace kolo::launcher {
namespace {

const char* Box(bool on) { return on ? "[X]" : "[ ]"; }

TorchState ProbeTorch() {
  // timeout(1) bounds a python3 that hangs on import; its status 124 and
  // the shell's 126/127 (no python3, no timeout) say nothing about kolo.
  const int rc =
      std::system("timeout 60 python3 -c 'import kolo.torch' >/dev/null 2>&1");
  if (rc == -1 || !WIFEXITED(rc)) return TorchState::kUnknown;
  const int code = WEXITSTATUS(rc);
  if (code == 0) return TorchState::kYes;
  if (code == 124 || code == 126 || code == 127) return TorchState::kUnknown;
  return TorchState::kNo;
}

std::string TorchLine(TorchState torch) {
  switch (torch) {
    case TorchState::kYes:
      return "    [X] PyTorch (kolo.torch)\n";
    case TorchState::kNo:
      return absl::StrCat(
          "    [ ] PyTorch (python3 -c 'import kolo.torch' fails; this build "
          "had KOLO_WITH_PYTHON=",
          KOLO_WITH_PYTHON_SETTING, ")\n");
    case TorchState::kUnknown:
      break;
  }
  return "    [?] PyTorch (python3 could not be run to import kolo.torch)\n";
}

}  // namespace

std::string CheckBuildText(TorchState torch) {
#if KOLO_HAVE_CUDA
  const bool nccl = true;
  const std::string nccl_version =
      absl::StrCat(" ", NCCL_MAJOR, ".", NCCL_MINOR, ".", NCCL_PATCH);
#else
  const bool nccl = false;
  const std::string nccl_version;
#endif
  return absl::StrCat("kolo v", kVersionString, ":\n\n",  //
                      "Available Frameworks:\n",          //
                      TorchLine(torch), "\n",
                      "Available Controllers:\n",        //
                      "    [X] kolo coordinator\n\n",    //
                      "Available Tensor Operations:\n",  //
                      "    [X] TCP ring\n",              //
                      "    [X] shared memory\n",         //
                      "    ", Box(nccl), " NCCL", nccl_version, "\n");
}

void PrintCheckBuild(std::FILE* out) {
  std::fputs(CheckBuildText(ProbeTorch()).c_str(), out);
}

}  // namespace kolo::launcher
