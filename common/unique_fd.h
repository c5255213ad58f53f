// UniqueFd: owns one file descriptor and closes it on destruction (RAII).
//
// Thread-safety: a plain value; not shared between threads.
// Invariant: get() is -1 or an open descriptor owned by this object.
#ifndef KOLO_COMMON_UNIQUE_FD_H_
#define KOLO_COMMON_UNIQUE_FD_H_

#include <unistd.h>

#include <utility>

namespace kolo::net {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // Gives the descriptor up (the caller closes it); -1 if none.
  int Release() { return std::exchange(fd_, -1); }

 private:
  int fd_ = -1;
};

}  // namespace kolo::net

#endif  // KOLO_COMMON_UNIQUE_FD_H_
