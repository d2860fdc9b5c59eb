#include "server/service/http_reply.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include <string>

#include "server/service/http_connections.h"

namespace sluice {

void SendBuffer(evhttp_request* req, int code, absl::string_view reason,
                absl::string_view content_type, evbuffer* body) {
  evkeyvalq* headers = evhttp_request_get_output_headers(req);
  evhttp_add_header(headers, "Content-Type", std::string(content_type).c_str());
  evhttp_add_header(headers, "Content-Length",
                    std::to_string(evbuffer_get_length(body)).c_str());
  if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) {
    evbuffer_drain(body, evbuffer_get_length(body));
  }
  HttpConnections::AnswerStarting(req);
  evhttp_send_reply(req, code, std::string(reason).c_str(), body);
}

void Reply(evhttp_request* req, int code, absl::string_view reason,
           absl::string_view content_type, absl::string_view body) {
  evbuffer* buf = evbuffer_new();
  evbuffer_add(buf, body.data(), body.size());
  SendBuffer(req, code, reason, content_type, buf);
  evbuffer_free(buf);
}

void SendSharedPage(evhttp_request* req, absl::string_view content_type,
                    const std::shared_ptr<const std::string>& page, absl::string_view tail) {
  evbuffer* buf = evbuffer_new();
  if (page != nullptr && !page->empty()) {
    auto* kept = new std::shared_ptr<const std::string>(page);
    auto release = [](const void*, size_t, void* held) {
      delete static_cast<std::shared_ptr<const std::string>*>(held);
    };
    if (evbuffer_add_reference(buf, (*kept)->data(), (*kept)->size(), release, kept) != 0) {
      delete kept;
      evbuffer_add(buf, page->data(), page->size());
    }
  }
  evbuffer_add(buf, tail.data(), tail.size());
  SendBuffer(req, 200, "OK", content_type, buf);
  evbuffer_free(buf);
}

}  // namespace sluice
