#include "server/redis/reply.h"

#include <hiredis/hiredis.h>

#include <ostream>

#include "absl/strings/str_cat.h"
#include "server/common/failure_reason.h"

namespace sluice {

RedisReply RedisReply::Integer(int64_t value) {
  RedisReply reply;
  reply.type_ = Type::kInteger;
  reply.integer_ = value;
  return reply;
}

RedisReply RedisReply::Array(std::vector<RedisReply> elements) {
  RedisReply reply;
  reply.type_ = Type::kArray;
  reply.elements_ = std::move(elements);
  return reply;
}

RedisReply RedisReply::FromHiredis(const redisReply& reply) {
  switch (reply.type) {
    case REDIS_REPLY_STATUS:
      return Status(std::string(reply.str, reply.len));
    case REDIS_REPLY_ERROR:
      return Error(std::string(reply.str, reply.len));
    case REDIS_REPLY_STRING:
      return String(std::string(reply.str, reply.len));
    case REDIS_REPLY_INTEGER:
      return Integer(reply.integer);
    case REDIS_REPLY_ARRAY: {
      std::vector<RedisReply> elements;
      elements.reserve(reply.elements);
      for (size_t i = 0; i < reply.elements; ++i) {
        elements.push_back(FromHiredis(*reply.element[i]));
      }
      return Array(std::move(elements));
    }
    case REDIS_REPLY_NIL:
    default:
      // hiredis 0.14 speaks RESP2 only, so there is nothing else; nil is the safe reading.
      return Nil();
  }
}

std::string_view RedisReply::ErrorCode() const {
  if (type_ != Type::kError) {
    return {};
  }
  std::string_view text = str_;
  return text.substr(0, text.find(' '));
}

std::string RedisReply::DebugString() const {
  switch (type_) {
    case Type::kNil:
      return "(nil)";
    case Type::kStatus:
      return absl::StrCat("+", str_);
    case Type::kError:
      return absl::StrCat("-", str_);
    case Type::kInteger:
      return absl::StrCat(integer_);
    case Type::kString:
      return absl::StrCat("\"", str_, "\"");
    case Type::kArray: {
      std::string out = "[";
      for (size_t i = 0; i < elements_.size(); ++i) {
        absl::StrAppend(&out, i == 0 ? "" : ", ", elements_[i].DebugString());
      }
      out += "]";
      return out;
    }
  }
  return "?";
}

bool operator==(const RedisReply& a, const RedisReply& b) {
  return a.type_ == b.type_ && a.integer_ == b.integer_ && a.str_ == b.str_ &&
         a.elements_ == b.elements_;
}

void PrintTo(const RedisReply& reply, std::ostream* os) { *os << reply.DebugString(); }

bool IsArgumentError(std::string_view error) {
  const std::string_view code = error.substr(0, error.find(' '));
  if (code == "WRONGTYPE") {
    return true;
  }
  if (code != "ERR") {
    return false;
  }
  // A Sluice script's own check ("ERR sluice <script>: ..."), a Lua error in a script, and what
  // a command says of an argument or of the value it met.
  for (std::string_view prefix :
       {"ERR sluice ", "ERR user_script:", "ERR wrong number of arguments", "ERR syntax error"}) {
    if (error.substr(0, prefix.size()) == prefix) {
      return true;
    }
  }
  for (std::string_view part : {"is not an integer or out of range",
                                "increment or decrement would overflow", "is not a valid float"}) {
    if (error.find(part) != std::string_view::npos) {
      return true;
    }
  }
  return false;
}

absl::Status ErrorReplyStatus(const RedisReply& reply) {
  const std::string& error = reply.str();
  if (IsArgumentError(error)) {
    return WithFailureReason(absl::InternalError(absl::StrCat("redis refused: ", error)),
                             FailureReason::kArgument);
  }
  absl::Status status = absl::UnavailableError(absl::StrCat("redis: ", error));
  const std::string_view code = std::string_view(error).substr(0, error.find(' '));
  if (code == "OOM") {
    return WithFailureReason(std::move(status), FailureReason::kOutOfMemory);
  }
  if (code == "READONLY") {
    return WithFailureReason(std::move(status), FailureReason::kReadOnly);
  }
  if (code == "LOADING") {
    return WithFailureReason(std::move(status), FailureReason::kLoading);
  }
  return WithFailureReason(std::move(status), FailureReason::kOther);
}

}  // namespace sluice
