#include "server/redis/reply.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <charconv>
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

namespace {

// What an array reserves when it is created, at most: the rest of its vector grows as its
// elements really arrive, so a count announced and never sent costs nothing.
constexpr size_t kReserveAtMost = 16;
// Longest line that can announce a length or hold an integer: "-9223372036854775808\r\n" is
// 22 bytes. A longer one hiredis would refuse once its end arrives; it is refused before.
constexpr size_t kMaxNumberLine = 32;

}  // namespace

// hiredis' reader calls these as it parses (read.h), creating a reply's values in order: the
// root, then, for an array, its elements at idx 0, 1, 2... each whole (an array with all its
// own elements) before the next. The root is the reader's root_; every other value is
// appended to its parent's elements_ as it is created, so each value is built where it ends
// up. Null tells hiredis "out of memory": a hook past a limit sets error_ first.
//
// Why appending never moves a value hiredis still points to: hiredis keeps pointers (the
// `obj` of its task stack, reached as task->parent->obj) only to the arrays still being
// filled, which are the root and a chain of last elements: each is its parent's newest
// element, since hiredis creates no sibling after it until it is complete and popped. Growing
// an array P's vector, when P's next element is created, moves P's elements before it, all of
// them complete and off the stack; it does not move P itself, which lives in its own parent's
// vector, and that vector grows only after P is complete. The root is root_, in no vector.
struct RedisReplyReader::Hooks {
  static RedisReplyReader* Reader(const redisReadTask* task) {
    return static_cast<RedisReplyReader*>(task->privdata);
  }

  // The value `task` creates, new and of `type`; null with error_ set if it cannot be.
  static RedisReply* NewValue(const redisReadTask* task, RedisReply::Type type) {
    RedisReplyReader* self = Reader(task);
    RedisReply* value;
    if (task->parent == nullptr) {
      self->root_ = RedisReply();
      value = &self->root_;
    } else {
      std::vector<RedisReply>& siblings = static_cast<RedisReply*>(task->parent->obj)->elements_;
      if (static_cast<size_t>(task->idx) != siblings.size()) {
        // hiredis creates elements in order; anything else would be a bug in it or here.
        self->error_ = "reply elements out of order";
        return nullptr;
      }
      try {
        siblings.emplace_back();
      } catch (const std::bad_alloc&) {
        self->error_ = "out of memory reading a reply";
        return nullptr;
      }
      value = &siblings.back();
    }
    value->type_ = type;
    return value;
  }

  static void* CreateString(const redisReadTask* task, char* str, size_t len) {
    RedisReplyReader* self = Reader(task);
    const RedisReplyLimits& limits = self->limits_;
    if (len > limits.max_string_bytes) {
      self->error_ = absl::StrCat("reply string of ", len, " bytes; at most ",
                                  limits.max_string_bytes, " (RedisReplyLimits::max_string_bytes)");
      return nullptr;
    }
    self->reply_string_bytes_ += len;
    if (self->reply_string_bytes_ > limits.max_reply_bytes) {
      self->error_ = absl::StrCat("reply of at least ", self->reply_string_bytes_,
                                  " bytes; at most ", limits.max_reply_bytes,
                                  " (RedisReplyLimits::max_reply_bytes)");
      return nullptr;
    }
    const RedisReply::Type type = task->type == REDIS_REPLY_ERROR    ? RedisReply::Type::kError
                                  : task->type == REDIS_REPLY_STATUS ? RedisReply::Type::kStatus
                                                                     : RedisReply::Type::kString;
    RedisReply* value = NewValue(task, type);
    if (value == nullptr) {
      return nullptr;
    }
    try {
      value->str_.assign(str, len);
    } catch (const std::bad_alloc&) {
      self->error_ = "out of memory reading a reply";
      return nullptr;
    }
    return value;
  }

  static void* CreateArray(const redisReadTask* task, int elements) {
    RedisReplyReader* self = Reader(task);
    const RedisReplyLimits& limits = self->limits_;
    int nesting = 1;
    for (const redisReadTask* up = task->parent; up != nullptr; up = up->parent) {
      ++nesting;
    }
    if (nesting > limits.max_nesting) {
      self->error_ = absl::StrCat("reply arrays nested ", nesting, " deep; at most ",
                                  limits.max_nesting, " (RedisReplyLimits::max_nesting)");
      return nullptr;
    }
    // hiredis hands over 0 to INT_MAX.
    const auto count = static_cast<size_t>(elements);
    if (count > limits.max_array_elements) {
      self->error_ =
          absl::StrCat("reply array of ", count, " elements; at most ", limits.max_array_elements,
                       " (RedisReplyLimits::max_array_elements)");
      return nullptr;
    }
    // Every element announced must arrive before the reply is whole, so the counts added up
    // are what the reply will hold: checked now, before any of it arrives.
    self->reply_elements_ += count;
    if (self->reply_elements_ > limits.max_reply_elements) {
      self->error_ = absl::StrCat("reply of at least ", self->reply_elements_,
                                  " elements; at most ", limits.max_reply_elements,
                                  " (RedisReplyLimits::max_reply_elements)");
      return nullptr;
    }
    RedisReply* value = NewValue(task, RedisReply::Type::kArray);
    if (value == nullptr) {
      return nullptr;
    }
    try {
      value->elements_.reserve(std::min(count, kReserveAtMost));
    } catch (const std::bad_alloc&) {
      self->error_ = "out of memory reading a reply";
      return nullptr;
    }
    return value;
  }

  static void* CreateInteger(const redisReadTask* task, long long value) {
    RedisReply* created = NewValue(task, RedisReply::Type::kInteger);
    if (created != nullptr) {
      created->integer_ = value;
    }
    return created;
  }

  static void* CreateNil(const redisReadTask* task) {
    return NewValue(task, RedisReply::Type::kNil);
  }

  // hiredis frees only a root (a reply cut short by an error, or the reader's own at its end),
  // which is root_: emptied, not freed.
  static void FreeObject(void* object) { *static_cast<RedisReply*>(object) = RedisReply(); }

  static redisReplyObjectFunctions* Functions() {
    static redisReplyObjectFunctions functions = {&CreateString, &CreateArray, &CreateInteger,
                                                  &CreateNil, &FreeObject};
    return &functions;
  }
};

RedisReplyReader::RedisReplyReader(RedisReplyLimits limits)
    : limits_(limits), reader_(redisReaderCreateWithFunctions(Hooks::Functions())) {
  if (reader_ == nullptr) {
    throw std::bad_alloc();
  }
  reader_->privdata = this;
}

RedisReplyReader::~RedisReplyReader() {
  if (reader_ != nullptr) {
    redisReaderFree(reader_);
  }
}

bool RedisReplyReader::Feed(const char* data, size_t size) {
  if (reader_ == nullptr) {
    return true;  // failed: Next says why
  }
  return redisReaderFeed(reader_, data, size) == REDIS_OK;
}

RedisReplyReader::Result RedisReplyReader::Next() {
  if (reader_ == nullptr) {
    return Result::kError;
  }
  void* reply = nullptr;
  if (redisReaderGetReply(reader_, &reply) != REDIS_OK) {
    return Fail(reader_->errstr);
  }
  if (reply != nullptr) {
    reply_elements_ = 0;
    reply_string_bytes_ = 0;
    return Result::kReply;
  }
  if (!CheckUnfinished()) {
    return Fail(error_);
  }
  return Result::kNone;
}

bool RedisReplyReader::CheckUnfinished() {
  // Everything buffered now is the one value hiredis stopped at for want of more bytes (each
  // value before it is created as soon as it is whole); its type byte is consumed, so the
  // buffer starts at its line. The reply holds its strings so far, plus what this value will
  // add: a bulk string's announced length, or a status or error line so far. Counted so,
  // a reply is judged the same however the stream is cut.
  const size_t buffered = reader_->len - reader_->pos;
  if (reader_->ridx < 0 || buffered == 0) {
    return true;
  }
  const redisReadTask& task = reader_->rstack[reader_->ridx];
  const std::string_view rest(reader_->buf + reader_->pos, buffered);
  size_t adds = 0;  // string bytes the value will add
  if (task.type == REDIS_REPLY_STATUS || task.type == REDIS_REPLY_ERROR) {
    adds = rest.back() == '\r' ? buffered - 1 : buffered;  // no "\r\n" yet, or hiredis had it
    if (adds > limits_.max_string_bytes) {
      error_ = absl::StrCat("reply line of more than ", limits_.max_string_bytes,
                            " bytes; at most ", limits_.max_string_bytes,
                            " (RedisReplyLimits::max_string_bytes)");
      return false;
    }
  } else {
    // A bulk string's length line, an array's count or an integer.
    const size_t line_end = rest.substr(0, kMaxNumberLine).find("\r\n");
    if (line_end == std::string_view::npos) {
      if (buffered >= kMaxNumberLine) {
        error_ = absl::StrCat("reply length or integer line of more than ", kMaxNumberLine - 2,
                              " bytes");
        return false;
      }
      return true;
    }
    if (task.type != REDIS_REPLY_STRING) {
      return true;
    }
    // hiredis has parsed the length (an unparsable one is its error) and waits for the
    // string's bytes: the length is 0 to SIZE_MAX.
    uint64_t length = 0;
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + line_end, length);
    if (ec != std::errc() || end != rest.data() + line_end) {
      return true;
    }
    if (length > limits_.max_string_bytes) {
      error_ = absl::StrCat("reply string of ", length, " bytes; at most ",
                            limits_.max_string_bytes, " (RedisReplyLimits::max_string_bytes)");
      return false;
    }
    adds = static_cast<size_t>(length);
  }
  if (reply_string_bytes_ + adds > limits_.max_reply_bytes) {
    error_ = absl::StrCat("reply of at least ", reply_string_bytes_ + adds, " bytes; at most ",
                          limits_.max_reply_bytes, " (RedisReplyLimits::max_reply_bytes)");
    return false;
  }
  return true;
}

RedisReplyReader::Result RedisReplyReader::Fail(std::string_view why) {
  if (error_.empty()) {
    error_ = std::string(why);
  }
  // Frees the buffer and, through FreeObject, the reply cut short.
  redisReaderFree(reader_);
  reader_ = nullptr;
  root_ = RedisReply();
  reply_elements_ = 0;
  reply_string_bytes_ = 0;
  return Result::kError;
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

namespace {

// Appends `reply` to `out` as DebugString would, escaped and cut (LogString).
void AppendForLog(const RedisReply& reply, size_t max_bytes, std::string* out) {
  const size_t room = max_bytes > out->size() ? max_bytes - out->size() : 0;
  switch (reply.type()) {
    case RedisReply::Type::kNil:
      out->append("(nil)");
      return;
    case RedisReply::Type::kStatus:
      absl::StrAppend(out, "+", LogText(reply.str(), room));
      return;
    case RedisReply::Type::kError:
      absl::StrAppend(out, "-", LogText(reply.str(), room));
      return;
    case RedisReply::Type::kInteger:
      absl::StrAppend(out, reply.integer());
      return;
    case RedisReply::Type::kString:
      absl::StrAppend(out, "\"", LogText(reply.str(), room), "\"");
      return;
    case RedisReply::Type::kArray: {
      const std::vector<RedisReply>& elements = reply.elements();
      out->push_back('[');
      for (size_t i = 0; i < elements.size(); ++i) {
        if (out->size() >= max_bytes) {
          absl::StrAppend(out, i == 0 ? "" : ", ", "...(", elements.size() - i, " more)");
          break;
        }
        if (i > 0) {
          out->append(", ");
        }
        AppendForLog(elements[i], max_bytes, out);
      }
      out->push_back(']');
      return;
    }
  }
}

}  // namespace

std::string RedisReply::LogString(size_t max_bytes) const {
  std::string out;
  AppendForLog(*this, max_bytes, &out);
  return out;
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
    return WithFailureReason(absl::InternalError(absl::StrCat("redis refused: ", LogText(error))),
                             FailureReason::kArgument);
  }
  absl::Status status = absl::UnavailableError(absl::StrCat("redis: ", LogText(error)));
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
