// kolorun -cb / --check-build: what this build of kolo has, in the shape of
// horovodrun's check-build report (a [X] or [ ] per item).
// Thread-safety: writes to `out` only; safe from any thread given its own
// FILE.
#ifndef KOLO_LAUNCHER_CHECK_BUILD_H_
#define KOLO_LAUNCHER_CHECK_BUILD_H_

#include <cstdio>
#include <string>

namespace kolo::launcher {

// The report, as text.
std::string CheckBuildText();

// Prints CheckBuildText() to `out` (stdout by default).
void PrintCheckBuild(std::FILE* out = stdout);

}  // namespace kolo::launcher

#endif  // KOLO_LAUNCHER_CHECK_BUILD_H_
