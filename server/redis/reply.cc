#include "server/redis/reply.h"

#include <hiredis/hiredis.h>

#include <new>
#include <ostream>
#include <stdexcept>

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

// hiredis' reader calls these as it parses (read.h). A reply's root is the reader's root_; an
// array's elements are created in place, each in the slot its index names, so every object is
// a RedisReply that lives where it ends up. Null tells hiredis "out of memory".
struct RedisReplyReader::Hooks {
  // The slot of the object `task` creates, emptied of what it held.
  static RedisReply* Slot(const redisReadTask* task, RedisReply::Type type) {
    RedisReply* slot;
    if (task->parent == nullptr) {
      slot = &static_cast<RedisReplyReader*>(task->privdata)->root_;
    } else {
      auto* parent = static_cast<RedisReply*>(task->parent->obj);
      slot = &parent->elements_[static_cast<size_t>(task->idx)];
    }
    slot->type_ = type;
    slot->integer_ = 0;
    slot->str_.clear();
    slot->elements_.clear();
    return slot;
  }
  static void* CreateString(const redisReadTask* task, char* str, size_t len) {
    const RedisReply::Type type = task->type == REDIS_REPLY_ERROR    ? RedisReply::Type::kError
                                  : task->type == REDIS_REPLY_STATUS ? RedisReply::Type::kStatus
                                                                     : RedisReply::Type::kString;
    RedisReply* slot = Slot(task, type);
    try {
      slot->str_.assign(str, len);
    } catch (const std::bad_alloc&) {
      return nullptr;
    }
    return slot;
  }
  static void* CreateArray(const redisReadTask* task, int elements) {
    RedisReply* slot = Slot(task, RedisReply::Type::kArray);
    try {
      // Sized once: the elements are then created in place and never move.
      slot->elements_.resize(static_cast<size_t>(elements));
    } catch (const std::bad_alloc&) {
      return nullptr;
    } catch (const std::length_error&) {
      return nullptr;
    }
    return slot;
  }
  static void* CreateInteger(const redisReadTask* task, long long value) {
    RedisReply* slot = Slot(task, RedisReply::Type::kInteger);
    slot->integer_ = value;
    return slot;
  }
  static void* CreateNil(const redisReadTask* task) {
    return Slot(task, RedisReply::Type::kNil);
  }
  // hiredis frees only a root (a reply cut short by a protocol error, or the reader's own at
  // its end), which is root_: emptied, not freed.
  static void FreeObject(void* object) { *static_cast<RedisReply*>(object) = RedisReply(); }

  static redisReplyObjectFunctions* Functions() {
    static redisReplyObjectFunctions functions = {&CreateString, &CreateArray, &CreateInteger,
                                                  &CreateNil, &FreeObject};
    return &functions;
  }
};

RedisReplyReader::RedisReplyReader()
    : reader_(redisReaderCreateWithFunctions(Hooks::Functions())) {
  if (reader_ == nullptr) {
    throw std::bad_alloc();
  }
  reader_->privdata = this;
}

RedisReplyReader::~RedisReplyReader() { redisReaderFree(reader_); }

bool RedisReplyReader::Feed(const char* data, size_t size) {
  return redisReaderFeed(reader_, data, size) == REDIS_OK;
}

RedisReplyReader::Result RedisReplyReader::Next() {
  void* reply = nullptr;
  if (redisReaderGetReply(reader_, &reply) != REDIS_OK) {
    return Result::kError;
  }
  return reply == nullptr ? Result::kNone : Result::kReply;
}

std::string_view RedisReplyReader::error() const { return reader_->errstr; }

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
