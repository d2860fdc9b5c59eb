// Answers on libevent's evhttp, shared by the HTTP server and the Prometheus listener: the
// length is always set, a HEAD answer gets no body (libevent 2.1 would send one), and the
// connection's bookkeeping (HttpConnections::AnswerStarting) learns that the answer is on its
// way. Call on the thread of the request's loop.
#pragma once

#include <memory>
#include <string>

#include "absl/strings/string_view.h"

struct evbuffer;
struct evhttp_request;

namespace sluice {

// Sends `body` (drained) with its type and length.
void SendBuffer(evhttp_request* req, int code, absl::string_view reason,
                absl::string_view content_type, evbuffer* body);

// Sends a copy of `body`.
void Reply(evhttp_request* req, int code, absl::string_view reason,
           absl::string_view content_type, absl::string_view body);

// Sends `page` without copying it (the answer refers to the page and keeps it alive until
// written, or until the connection goes), then a copy of `tail`, with 200 OK.
void SendSharedPage(evhttp_request* req, absl::string_view content_type,
                    const std::shared_ptr<const std::string>& page, absl::string_view tail = "");

}  // namespace sluice
