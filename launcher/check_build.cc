// kolorun --check-build: see launcher/check_build.h. CMake defines
// KOLO_HAVE_CUDA (1 when built with CUDA and NCCL; nccl.h then gives the
// version) and KOLO_WITH_PYTHON_SETTING (the KOLO_WITH_PYTHON option).
#include "launcher/check_build.h"

#include <cstdio>
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

}  // namespace

std::string CheckBuildText() {
#if KOLO_HAVE_CUDA
  const bool nccl = true;
  const std::string nccl_version =
      absl::StrCat(" ", NCCL_MAJOR, ".", NCCL_MINOR, ".", NCCL_PATCH);
#else
  const bool nccl = false;
  const std::string nccl_version;
#endif
  return absl::StrCat(
      "kolo v", kVersionString, ":\n\n",  //
      "Available Frameworks:\n",          //
      "    [?] PyTorch (kolo.torch; this build had KOLO_WITH_PYTHON=",
      KOLO_WITH_PYTHON_SETTING,
      ": python3 -c 'import kolo.torch' tells whether it is installed)\n\n",
      "Available Controllers:\n",        //
      "    [X] kolo coordinator\n\n",    //
      "Available Tensor Operations:\n",  //
      "    [X] TCP ring\n",              //
      "    [X] shared memory\n",         //
      "    ", Box(nccl), " NCCL", nccl_version, "\n");
}

void PrintCheckBuild(std::FILE* out) {
  std::fputs(CheckBuildText().c_str(), out);
}

}  // namespace kolo::launcher
