// DataListener: the TCP socket this worker's data plane listens on, and the
// address ("ip:port") advertised to the coordinator in Hello.
//
// The IP is chosen by ChooseDataIp: KOLO_ADDR if set, else the IPv4 address
// of KOLO_IFACE, else the local address of the route to the coordinator — the
// interface the peers can most likely reach (a wrong interface is Horovod's
// most common hang). The port is picked by the kernel (bind to port 0).
//
// Thread-safety: immutable after Open; the socket is closed by the destructor
// (RAII). Accepting connections is the data plane's job (next issue).
#ifndef KOLO_WORKER_LIB_DATA_LISTENER_H_
#define KOLO_WORKER_LIB_DATA_LISTENER_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "worker_lib/config.h"

namespace kolo::worker {

// The IP to advertise, from the config (see above).
absl::StatusOr<std::string> ChooseDataIp(const WorkerConfig& config);

class DataListener {
 public:
  // Binds a listening TCP socket to `ip`, port 0. `source` names where the IP
  // came from (e.g. "KOLO_ADDR") for error messages.
  static absl::StatusOr<std::unique_ptr<DataListener>> Open(
      const std::string& ip, const std::string& source);
  // Takes ownership of the listening socket `fd`. Use Open().
  DataListener(int fd, int port, std::string address)
      : fd_(fd), port_(port), address_(std::move(address)) {}
  ~DataListener();
  DataListener(const DataListener&) = delete;
  DataListener& operator=(const DataListener&) = delete;

  int fd() const { return fd_; }
  int port() const { return port_; }
  // "ip:port", or "[ip6]:port".
  const std::string& address() const { return address_; }

 private:
  const int fd_;
  const int port_;
  const std::string address_;
};

}  // namespace kolo::worker

#endif  // KOLO_WORKER_LIB_DATA_LISTENER_H_
