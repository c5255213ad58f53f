// A relay for tests of the TCP transport's encryption: it sits between a
// connector and its acceptor (the connector is given the relay's address),
// passes the handshake as it is, and lets a test edit the connector's bytes
// after it (a flipped bit, a replayed frame). ConnectorHandshakeBytes says
// where the handshake ends.
//
// Thread-safety: the relay runs on its own thread; `tamper` is called there.
// Construct and destroy it on the test's thread.
#ifndef KOLO_TESTS_ALLREDUCE_TCP_TEST_RELAY_H_
#define KOLO_TESTS_ALLREDUCE_TCP_TEST_RELAY_H_

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <utility>

#include "allreduce/tcp/handshake.h"
#include "allreduce/tcp/tcp_transport.h"
#include "common/auth.h"
#include "common/socket_util.h"
#include "common/unique_fd.h"
#include "gtest/gtest.h"
#include "tests/allreduce_tcp_test_mesh.h"

namespace kolo::testing {

// A relay between a connector and its acceptor: passes the handshake as it
// is, and lets `tamper` edit the connector's bytes after it (offsets count
// from the first byte after the handshake).
class Relay {
 public:
  using Tamper = std::function<void(uint64_t offset, std::string& bytes)>;
  Relay(std::string upstream, uint64_t handshake_bytes, Tamper tamper)
      : listener_(Listen()),
        upstream_(std::move(upstream)),
        handshake_bytes_(handshake_bytes),
        tamper_(std::move(tamper)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Relay() {
    stop_ = true;
    thread_.join();
  }
  const std::string& address() const { return listener_.address; }

 private:
  void Run() {
    pollfd lp{listener_.fd.get(), POLLIN, 0};
    while (!stop_ && ::poll(&lp, 1, 20) <= 0) {
    }
    if (stop_) return;
    net::UniqueFd down(::accept4(listener_.fd.get(), nullptr, nullptr, 0));
    auto addr = net::ResolveAddress(upstream_);
    ASSERT_TRUE(addr.ok());
    auto up = net::StartConnect(*addr);
    ASSERT_TRUE(up.ok());
    pollfd cp{up->get(), POLLOUT, 0};
    ::poll(&cp, 1, 5000);
    ASSERT_TRUE(net::FinishConnect(up->get()).ok());
    uint64_t sent = 0;  // connector bytes relayed
    char buf[65536];
    while (!stop_) {
      pollfd p[2] = {{down.get(), POLLIN, 0}, {up->get(), POLLIN, 0}};
      if (::poll(p, 2, 20) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if (p[i].revents == 0) continue;
        ssize_t n = ::recv(p[i].fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
          return;  // one end closed: closing both ends tells the other
        }
        if (n < 0) continue;
        std::string bytes(buf, static_cast<size_t>(n));
        if (i == 0) {
          // Cut at the end of the handshake so tamper sees data only.
          size_t hs = sent < handshake_bytes_
                          ? std::min<uint64_t>(handshake_bytes_ - sent, n)
                          : 0;
          std::string data = bytes.substr(hs);
          if (!data.empty()) tamper_(sent + hs - handshake_bytes_, data);
          bytes = bytes.substr(0, hs) + data;
          sent += static_cast<uint64_t>(n);
        }
        int to = i == 0 ? up->get() : down.get();
        size_t off = 0;
        while (off < bytes.size()) {
          ssize_t w =
              ::send(to, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
          if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            pollfd wp{to, POLLOUT, 0};
            ::poll(&wp, 1, 20);
            continue;
          }
          if (w < 0) return;
          off += static_cast<size_t>(w);
        }
      }
    }
  }

  TestListener listener_;
  std::string upstream_;
  uint64_t handshake_bytes_;
  Tamper tamper_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// What rank `from` of `world` sends in its handshake with rank `to` (a
// lower rank: the higher one connects): Hello and Proof (the field contents
// do not change the sizes).
inline uint64_t ConnectorHandshakeBytes(const TestWorld& world, int from = 1,
                                        int to = 0) {
  TcpOptions o = world.Options(from);
  tcp::Hello h{o.protocol_version,
               o.epoch,
               static_cast<uint32_t>(from),
               static_cast<uint32_t>(to),
               o.job_id,
               o.worker_ids[from],
               auth::RandomBytes(auth::kNonceBytes)};
  return tcp::EncodeMsg(tcp::MsgType::kHello, tcp::EncodeHello(h)).size() +
         tcp::EncodeMsg(tcp::MsgType::kProof,
                        tcp::EncodeString(std::string(auth::kMacBytes, 'm')))
             .size();
}

}  // namespace kolo::testing

#endif  // KOLO_TESTS_ALLREDUCE_TCP_TEST_RELAY_H_
