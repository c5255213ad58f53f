#include "common/check.h"

#include <cstdio>
#include <cstdlib>

namespace kolo::internal {

CheckFailure::CheckFailure(const char* file, int line, const char* condition) {
  stream_ << "kolo internal error (a bug; please report it): " << file << ":"
          << line << ": check failed: " << condition << ": ";
}

CheckFailure::~CheckFailure() {
  std::string msg = stream_.str();
  std::fprintf(stderr, "%s\n", msg.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace kolo::internal
