#include "server/redis/node_call_trace.h"

#include <charconv>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "server/common/failure_reason.h"
#include "server/common/log_text.h"

namespace sluice {
namespace {

// The `index`-th bulk string of a RESP command ("*N\r\n$L\r\n<bytes>\r\n..."); empty if the
// command has fewer.
std::string_view Argument(std::string_view resp, size_t index) {
  size_t at = resp.find("\r\n");
  for (size_t i = 0; at != std::string_view::npos; ++i) {
    at += 2;  // past the previous line's \r\n, at "$L"
    const size_t line_end = resp.find("\r\n", at);
    if (at >= resp.size() || resp[at] != '$' || line_end == std::string_view::npos) {
      return {};
    }
    size_t length = 0;
    const char* digits = resp.data() + at + 1;
    const char* digits_end = resp.data() + line_end;
    if (std::from_chars(digits, digits_end, length).ptr != digits_end ||
        line_end + 2 + length > resp.size()) {
      return {};
    }
    if (i == index) {
      return resp.substr(line_end + 2, length);
    }
    at = line_end + 2 + length;
  }
  return {};
}

bool IsScriptCall(std::string_view name) {
  return name == "EVALSHA" || name == "EVAL" || name == "evalsha" || name == "eval";
}

// One allocation per traced node call: what the spans need, and the callback it wraps.
struct NodeCall {
  absl::InlinedVector<TraceParent, 1> traces;
  std::string node;
  int64_t start_us = 0;
  int64_t commands = 0;
  int64_t keys = 0;
  BatchCallback done;
};

void Record(const NodeCall& call, const absl::Status& status, absl::Span<RedisReply> replies) {
  int64_t error_replies = 0;
  std::string first_error;
  for (const RedisReply& reply : replies) {
    if (reply.is_error()) {
      if (error_replies++ == 0) {
        first_error = LogText(reply.str());
      }
    }
  }
  for (const TraceParent& parent : call.traces) {
    Span span = Tracer::StartChildAt(parent, "redis", SpanKind::kClient, call.start_us);
    span.Add("db.system", "redis");
    span.Add("server.address", call.node);
    span.Add("db.operation.batch.size", call.commands);
    span.Add("sluice.redis.keys", call.keys);
    if (!status.ok()) {
      const std::string_view reason = FailureReasonName(FailureReasonOf(status));
      span.Add("sluice.failure_reason", absl::string_view(reason.data(), reason.size()));
      span.SetError(status.message());
    } else if (error_replies > 0) {
      span.Add("sluice.redis.error_replies", error_replies);
      span.SetError(first_error);
    }
  }
}

}  // namespace

size_t CommandKeys(const CommandBatch& batch, size_t i) {
  const std::string_view resp = batch.resp(i);
  if (IsScriptCall(Argument(resp, 0))) {
    const std::string_view text = Argument(resp, 2);
    size_t keys = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), keys);
    return error == std::errc() && end == text.data() + text.size() ? keys : 0;
  }
  return batch.has_routing_key(i) ? 1 : 0;
}

BatchCallback TraceNodeCall(const CommandBatch& batch, std::string_view node, BatchCallback done) {
  auto call = std::make_unique<NodeCall>();
  call->traces.assign(batch.traces().begin(), batch.traces().end());
  call->node = std::string(node);
  call->start_us = call->traces.front().tracer->NowMicros();
  call->commands = static_cast<int64_t>(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    call->keys += static_cast<int64_t>(CommandKeys(batch, i));
  }
  call->done = std::move(done);
  // Captures one pointer: the wrapper fits in the callback's inline storage.
  return [call = std::move(call)](absl::Status status, absl::Span<RedisReply> replies) mutable {
    // Recorded before `done`, which may move the replies out.
    Record(*call, status, replies);
    std::move(call->done)(std::move(status), replies);
  };
}

}  // namespace sluice
