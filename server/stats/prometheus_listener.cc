#include "server/stats/prometheus_listener.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/thread.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "server/service/http_reply.h"

namespace sluice {
namespace {

constexpr int kIoTimeoutSeconds = 10;
constexpr size_t kMaxHeaderBytes = 8 << 10;
constexpr size_t kMaxBodyBytes = 1 << 10;

constexpr absl::string_view kPageType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace

PrometheusListener::PrometheusListener(std::string path, std::function<std::string()> render,
                                       absl::Duration answer_timeout)
    : path_(std::move(path)),
      answer_timeout_(answer_timeout),
      pages_(std::make_unique<ScrapeCache>(std::move(render), ScrapeCache::Options{})) {}

PrometheusListener::~PrometheusListener() { Stop(); }

absl::Status PrometheusListener::Start(const std::string& address) {
  static const int kThreads = evthread_use_pthreads();
  (void)kThreads;
  base_ = event_base_new();
  http_ = evhttp_new(base_);
  evhttp_set_allowed_methods(http_, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
                                        EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                        EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
  evhttp_set_max_body_size(http_, static_cast<ev_ssize_t>(kMaxBodyBytes));
  evhttp_set_max_headers_size(http_, static_cast<ev_ssize_t>(kMaxHeaderBytes));
  evhttp_set_timeout(http_, kIoTimeoutSeconds);
  evhttp_set_gencb(http_, &PrometheusListener::Dispatch, this);
  connections_ = std::make_unique<HttpConnections>(
      base_, http_,
      HttpConnectionLimits{.max_connections = kMaxConnections,
                           .request_timeout = absl::Seconds(kIoTimeoutSeconds),
                           .answer_timeout = answer_timeout_});
  mailbox_ = std::make_unique<LoopMailbox>(base_);
  absl::StatusOr<int> port = connections_->Listen(address, "--prometheus_address");
  if (!port.ok()) {
    Release();
    return port.status();
  }
  port_ = *port;
  thread_ = std::thread([this] {
    connections_->BindToThisThread();
    event_base_loop(base_, EVLOOP_NO_EXIT_ON_EMPTY);
  });
  return absl::OkStatus();
}

void PrometheusListener::Stop() {
  if (base_ == nullptr) {
    return;
  }
  event_base_loopexit(base_, nullptr);
  if (thread_.joinable()) {
    thread_.join();
  }
  Release();
}

void PrometheusListener::Release() {
  pages_.reset();  // first: its renders post to the mailbox
  connections_->Shutdown();
  evhttp_free(http_);
  connections_.reset();
  mailbox_.reset();
  event_base_free(base_);
  http_ = nullptr;
  base_ = nullptr;
}

void PrometheusListener::Dispatch(evhttp_request* req, void* arg) {
  auto* self = static_cast<PrometheusListener*>(arg);
  self->connections_->RequestArrived(req);
  const char* uri = evhttp_request_get_uri(req);
  absl::string_view path = uri != nullptr ? uri : "/";
  path = path.substr(0, path.find('?'));
  if (path != self->path_) {
    Reply(req, 404, "Not Found", "text/plain",
          absl::StrCat("not found; metrics are at ", self->path_, "\n"));
    return;
  }
  const evhttp_cmd_type method = evhttp_request_get_command(req);
  if (method != EVHTTP_REQ_GET && method != EVHTTP_REQ_HEAD) {
    evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
    Reply(req, 405, "Method Not Allowed", "text/plain", "use GET\n");
    return;
  }
  // Rendered off this thread, shared by the scrapes that ask meanwhile, sent from the loop.
  self->pages_->Get([self, req](ScrapeCache::Page page) {
    self->mailbox_->Post([req, page = std::move(page)] { SendSharedPage(req, kPageType, page); });
  });
}

}  // namespace sluice
