// MetricsHttpServer: the coordinator's /metrics page over HTTP
// (kolo-coordinator and kolorun --metrics-port, --metrics-address), served
// by Debian's cpp-httplib on a thread of its own. GET /metrics answers the
// text of the `render` callback (Prometheus' text format, version 0.0.4);
// any other path is 404. The page is read-only and not authenticated: it
// listens on 127.0.0.1 unless told otherwise (docs/observability.md).
//
// Thread-safety: `render` is called on the server's thread, one request at
// a time; it must be safe to call from there (CoordinatorServer::Metrics
// is). port() may be called from any thread.
// Lifetime: the destructor stops the server and joins its thread; the
// owner keeps what `render` uses alive until then.
#ifndef KOLO_COORDINATOR_METRICS_HTTP_H_
#define KOLO_COORDINATOR_METRICS_HTTP_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace kolo::coordinator {

class MetricsHttpServer {
 public:
  // Binds `address`:`port` (0: a free port) and starts serving. Fails with
  // a message naming the address when it cannot bind.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& address, int port,
      std::function<std::string()> render);
  virtual ~MetricsHttpServer() = default;

  // The bound port.
  virtual int port() const = 0;
};

}  // namespace kolo::coordinator

#endif  // KOLO_COORDINATOR_METRICS_HTTP_H_
