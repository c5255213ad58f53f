// Test helpers for the TCP transport: per-rank listening sockets on
// 127.0.0.1, options for an N-rank world, a mesh of N transports created in N
// threads, and a capture of the "transport" logger.
//
// Thread-safety: LogCapture's text() is safe from any thread; the rest is
// used from the test's main thread.
#ifndef KOLO_TESTS_ALLREDUCE_TCP_TEST_MESH_H_
#define KOLO_TESTS_ALLREDUCE_TCP_TEST_MESH_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "allreduce/tcp/tcp_transport.h"
#include "common/log.h"
#include "common/unique_fd.h"
#include "gtest/gtest.h"
#include "tests/testing/captured_log.h"
#include "tests/testing/timeouts.h"

namespace kolo::testing {

struct TestListener {
  net::UniqueFd fd;
  std::string address;
};

// A non-blocking listening socket on 127.0.0.1, port chosen by the kernel.
inline TestListener Listen() {
  TestListener l;
  l.fd = net::UniqueFd(
      ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  EXPECT_TRUE(l.fd.valid());
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  EXPECT_EQ(::bind(l.fd.get(), reinterpret_cast<sockaddr*>(&a), len), 0);
  EXPECT_EQ(::listen(l.fd.get(), 64), 0);
  EXPECT_EQ(::getsockname(l.fd.get(), reinterpret_cast<sockaddr*>(&a), &len),
            0);
  l.address = absl::StrCat("127.0.0.1:", ntohs(a.sin_port));
  return l;
}

// An N-rank world on loopback: listeners and the options of every rank.
class TestWorld {
 public:
  explicit TestWorld(int n) : listeners_(n) {
    for (int r = 0; r < n; ++r) {
      listeners_[r] = Listen();
      worker_ids_.push_back(absl::StrCat("w", r));
      addresses_.push_back(listeners_[r].address);
    }
  }
  int size() const { return static_cast<int>(listeners_.size()); }
  const TestListener& listener(int r) const { return listeners_[r]; }

  TcpOptions Options(int rank) const {
    TcpOptions o;
    o.rank = rank;
    o.size = size();
    o.epoch = 4;
    o.job_id = "job-1";
    o.worker_ids = worker_ids_;
    o.addresses = addresses_;
    o.secret = "s3cret";
    o.listen_fd = listeners_[rank].fd.get();
    o.timeout = Scaled(absl::Seconds(30));
    o.connect_timeout = Scaled(absl::Seconds(20));
    return o;
  }

  // Creates every rank's transport, one thread each; `tweak` may edit the
  // options first. Fails the test if any Create fails.
  std::vector<std::unique_ptr<TcpTransport>> CreateAll(
      const std::function<void(TcpOptions&)>& tweak = {}) const {
    std::vector<std::unique_ptr<TcpTransport>> out(size());
    std::vector<absl::Status> status(size());
    std::vector<std::thread> threads;
    for (int r = 0; r < size(); ++r) {
      threads.emplace_back([&, r] {
        TcpOptions o = Options(r);
        if (tweak) tweak(o);
        auto t = TcpTransport::Create(o);
        if (t.ok()) {
          out[r] = std::move(*t);
        } else {
          status[r] = t.status();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < size(); ++r) {
      EXPECT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
    }
    return out;
  }

 private:
  std::vector<TestListener> listeners_;
  std::vector<std::string> worker_ids_;
  std::vector<std::string> addresses_;
};

// Runs fn(rank, transport) for every rank in its own thread.
inline void RunRanks(std::vector<std::unique_ptr<TcpTransport>>& ts,
                     const std::function<void(int, TcpTransport&)>& fn) {
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ts.size(); ++r) {
    threads.emplace_back([&, r] { fn(static_cast<int>(r), *ts[r]); });
  }
  for (auto& t : threads) t.join();
}

// The bytes rank `src` sends rank `dst` in a message of `len` bytes: a
// pattern that differs per position, pair and length.
inline uint8_t Pattern(size_t i, int src, int dst, size_t len) {
  return static_cast<uint8_t>(i * 131 + i / 251 + src * 7 + dst * 13 + len);
}

inline std::vector<uint8_t> Filled(size_t len, int src, int dst) {
  std::vector<uint8_t> v(len);
  for (size_t i = 0; i < len; ++i) v[i] = Pattern(i, src, dst, len);
  return v;
}

// Index of the first byte of `v` that is not Filled's, or -1.
inline int64_t FirstWrong(const std::vector<uint8_t>& v, int src, int dst) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] != Pattern(i, src, dst, v.size())) return static_cast<int64_t>(i);
  }
  return -1;
}

// Every rank sends every other rank a Filled message of each of `sizes` (one
// operation per size) and checks, byte for byte, what it received.
inline void ExchangeEverySize(std::vector<std::unique_ptr<TcpTransport>>& ts,
                              const std::vector<size_t>& sizes) {
  const int n = static_cast<int>(ts.size());
  RunRanks(ts, [&](int rank, TcpTransport& t) {
    uint64_t seq = 0;
    for (size_t len : sizes) {
      t.BeginOperation(++seq);
      std::vector<std::vector<uint8_t>> out(n), in(n);
      std::vector<OpId> ops;
      for (int peer = 0; peer < n; ++peer) {
        if (peer == rank) continue;
        in[peer].assign(len, 0xEE);
        out[peer] = Filled(len, rank, peer);
        auto r = t.StartRecv(peer, in[peer].data(), len);
        ASSERT_TRUE(r.ok()) << r.status();
        ops.push_back(*r);
        auto s = t.StartSend(peer, out[peer].data(), len);
        ASSERT_TRUE(s.ok()) << s.status();
        ops.push_back(*s);
      }
      ASSERT_TRUE(t.WaitAll(ops).ok()) << "rank " << rank << " len " << len;
      for (int peer = 0; peer < n; ++peer) {
        if (peer == rank) continue;
        EXPECT_EQ(FirstWrong(in[peer], peer, rank), -1)
            << "rank " << rank << " from " << peer << " len " << len;
      }
    }
  });
}

// Captures what the "transport" logger prints while it lives (its level
// unchanged).
class LogCapture : public CapturedLog {
 public:
  LogCapture() : CapturedLog("transport", std::nullopt) {}
};

}  // namespace kolo::testing

#endif  // KOLO_TESTS_ALLREDUCE_TCP_TEST_MESH_H_
