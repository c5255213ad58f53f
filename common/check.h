// KOLO_CHECK(cond) << "message": for invariants whose failure is a kolo bug.
// Prints the file, line, condition and message to stderr and aborts.
// (Debian's Abseil 20220623 predates absl/log, so kolo has its own.)
#ifndef KOLO_COMMON_CHECK_H_
#define KOLO_COMMON_CHECK_H_

#include <sstream>

namespace kolo::internal {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

// Makes `cond ? (void)0 : Voidify() & stream` well-formed.
struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace kolo::internal

#define KOLO_CHECK(cond)              \
  (cond)                              \
      ? (void)0                       \
      : ::kolo::internal::Voidify() & \
            ::kolo::internal::CheckFailure(__FILE__, __LINE__, #cond).stream()

#endif  // KOLO_COMMON_CHECK_H_
