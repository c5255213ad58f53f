// MetricsHttpServer over cpp-httplib (see metrics_http.h).
#include "coordinator/metrics_http.h"

#include <chrono>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "httplib.h"

namespace kolo::coordinator {
namespace {

class HttpServer : public MetricsHttpServer {
 public:
  HttpServer() = default;
  ~HttpServer() override {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }

  absl::Status Bind(const std::string& address, int port,
                    std::function<std::string()> render) {
    // One request at a time: a scrape every few seconds needs no more.
    server_.new_task_queue = [] { return new httplib::ThreadPool(1); };
    server_.set_read_timeout(5, 0);
    server_.set_write_timeout(5, 0);
    server_.Get(
        "/metrics", [render = std::move(render)](const httplib::Request&,
                                                 httplib::Response& res) {
          res.set_content(render(), "text/plain; version=0.0.4; charset=utf-8");
        });
    if (port == 0) {
      port_ = server_.bind_to_any_port(address);
    } else if (server_.bind_to_port(address, port)) {
      port_ = port;
    }
    if (port_ <= 0) {
      return absl::UnavailableError(absl::StrCat(
          "cannot serve metrics on ", address, ":", port,
          " (in use, or not an address of this host); pick another with "
          "--metrics-port and --metrics-address"));
    }
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // httplib 0.11's stop() does nothing before the server runs (and has no
    // wait_until_ready): wait for it, so that the destructor's stop() ends it.
    for (int i = 0; i < 2000 && !server_.is_running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return absl::OkStatus();
  }

  int port() const override { return port_; }

 private:
  httplib::Server server_;
  int port_ = -1;
  std::thread thread_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& address, int port, std::function<std::string()> render) {
  auto server = std::make_unique<HttpServer>();
  if (absl::Status st = server->Bind(address, port, std::move(render));
      !st.ok()) {
    return st;
  }
  GetLogger("coordinator")
      ->info("metrics on http://{}:{}/metrics", address, server->port());
  return server;
}

}  // namespace kolo::coordinator
