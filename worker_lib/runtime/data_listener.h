// DataListener: the TCP socket this worker's data plane listens on, and the
// address ("ip:port") advertised to the coordinator in Hello.
//
// The IP is chosen by ChooseDataIp: KOLO_ADDR if set, else the IPv4 address
// of KOLO_IFACE, else the local address of the route to the coordinator — the
// interface the peers can most likely reach (a wrong interface is Horovod's
// most common hang). The port is picked by the kernel (bind to port 0).
//
// Connections are accepted all the time, between epochs too, by the
// listener's tcp::Acceptor (allreduce/tcp/acceptor.h): it drops those that do
// not prove the job secret within the handshake deadline and hands the rest
// to each epoch's mesh (DataPlane::Connect), so that strangers never fill the
// kernel's backlog ahead of a recovery's connections (issue 39).
//
// Thread-safety: immutable after Open (the acceptor is thread-safe); the
// destructor stops the acceptor, then closes the socket (RAII).
#ifndef KOLO_WORKER_LIB_RUNTIME_DATA_LISTENER_H_
#define KOLO_WORKER_LIB_RUNTIME_DATA_LISTENER_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "allreduce/tcp/acceptor.h"
#include "worker_lib/config.h"

namespace kolo::worker {

// The IP to advertise, from the config (see above).
absl::StatusOr<std::string> ChooseDataIp(const WorkerConfig& config);

class DataListener {
 public:
  // Binds a listening TCP socket to `ip`, port 0, and starts accepting.
  // `source` names where the IP came from (e.g. "KOLO_ADDR") for error
  // messages; `acceptor` sets the handshake deadline and the most
  // connections held (its owner names the worker in log lines).
  static absl::StatusOr<std::unique_ptr<DataListener>> Open(
      const std::string& ip, const std::string& source,
      tcp::AcceptorOptions acceptor = {});
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
  // Accepts from fd() all the time; what each epoch's mesh takes from.
  tcp::Acceptor* acceptor() const { return acceptor_.get(); }

 private:
  const int fd_;
  const int port_;
  const std::string address_;
  std::unique_ptr<tcp::Acceptor> acceptor_;  // set by Open
};

}  // namespace kolo::worker

#endif  // KOLO_WORKER_LIB_RUNTIME_DATA_LISTENER_H_
