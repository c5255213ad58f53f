// kolorun -cb / --check-build: what this build of kolo has, in the shape of
// horovodrun's check-build report (a [X] or [ ] per item).
// Thread-safety: CheckBuildText is pure; PrintCheckBuild starts a process
// and writes to `out` only.
#ifndef KOLO_LAUNCHER_CHECK_BUILD_H_
#define KOLO_LAUNCHER_CHECK_BUILD_H_

#include <cstdio>
#include <string>

namespace kolo::launcher {

// Whether Python's kolo.torch imports here: kYes, kNo, or kUnknown (the
// probe could not run).
enum class TorchState { kYes, kNo, kUnknown };

// The report, as text, given what the probe found about kolo.torch.
std::string CheckBuildText(TorchState torch);

// Runs `python3 -c 'import kolo.torch'` (as horovodrun imports its
// frameworks; PATH's python3, at most 60 s) and prints CheckBuildText() of
// the answer to `out` (stdout by default).
void PrintCheckBuild(std::FILE* out = stdout);

}  // namespace kolo::launcher

#endif  // KOLO_LAUNCHER_CHECK_BUILD_H_
