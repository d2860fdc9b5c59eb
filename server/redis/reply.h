// An owned Redis reply (RESP2: nil, status, error, integer, bulk string, array), converted from
// hiredis' redisReply so that nothing above this layer sees hiredis types or their lifetimes.
// A plain value type: copyable, movable, no shared state; distinct objects may be used from
// different threads, one object needs external synchronization like any std container.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"

struct redisReply;  // hiredis/hiredis.h
struct redisReader;
struct redisReadTask;

namespace sluice {

class RedisReply {
 public:
  enum class Type : uint8_t { kNil, kStatus, kError, kInteger, kString, kArray };

  // A nil reply.
  RedisReply() = default;

  static RedisReply Nil() { return RedisReply(); }
  static RedisReply Status(std::string text) { return RedisReply(Type::kStatus, std::move(text)); }
  // `text` is the whole error line without the leading '-', e.g. "NOSCRIPT No matching script".
  static RedisReply Error(std::string text) { return RedisReply(Type::kError, std::move(text)); }
  static RedisReply String(std::string bytes) {
    return RedisReply(Type::kString, std::move(bytes));
  }
  static RedisReply Integer(int64_t value);
  static RedisReply Array(std::vector<RedisReply> elements);

  // A deep copy of a hiredis reply; `reply` keeps its owner (the reader's caller frees it after
  // the callback).
  static RedisReply FromHiredis(const redisReply& reply);

  Type type() const { return type_; }
  bool is_nil() const { return type_ == Type::kNil; }
  bool is_status() const { return type_ == Type::kStatus; }
  bool is_error() const { return type_ == Type::kError; }
  bool is_integer() const { return type_ == Type::kInteger; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }

  // REQUIRES: is_integer(). Otherwise 0.
  int64_t integer() const { return integer_; }
  // The text of a status or error, or the bytes of a bulk string; empty for other types.
  const std::string& str() const { return str_; }
  // The elements of an array; empty for other types.
  const std::vector<RedisReply>& elements() const { return elements_; }
  std::vector<RedisReply>& mutable_elements() { return elements_; }

  // The first word of an error reply ("NOSCRIPT", "MOVED", "ASK", "WRONGTYPE", "ERR"), which
  // is how Redis names its errors; empty if this is not an error.
  std::string_view ErrorCode() const;

  // A compact, readable rendering for logs and test failures, e.g. [1, "a", (nil), -ERR x].
  std::string DebugString() const;

  friend bool operator==(const RedisReply& a, const RedisReply& b);
  friend bool operator!=(const RedisReply& a, const RedisReply& b) { return !(a == b); }

 private:
  friend class RedisReplyReader;  // builds replies in place

  RedisReply(Type type, std::string str) : type_(type), str_(std::move(str)) {}

  Type type_ = Type::kNil;
  int64_t integer_ = 0;
  std::string str_;
  std::vector<RedisReply> elements_;
};

// For gtest and logs.
void PrintTo(const RedisReply& reply, std::ostream* os);

// Reads RESP2 replies from a byte stream into RedisReply values directly: hiredis' parser with
// its object hooks building our values in place, so no hiredis reply is allocated or copied. A
// reply's only allocations are its long strings (and arrays' element vectors).
// Not thread-safe; one per connection.
class RedisReplyReader {
 public:
  RedisReplyReader();
  ~RedisReplyReader();
  RedisReplyReader(const RedisReplyReader&) = delete;
  RedisReplyReader& operator=(const RedisReplyReader&) = delete;

  // Appends bytes read from the connection. False: out of memory.
  bool Feed(const char* data, size_t size);

  enum class Result { kReply, kNone, kError };
  // kReply: the next whole reply is *reply() until the next call, and the caller may move from
  // it. kNone: no whole reply buffered yet. kError: the stream is not RESP (error() says why);
  // the reader is unusable from then on.
  Result Next();
  RedisReply* reply() { return &root_; }
  std::string_view error() const;

 private:
  struct Hooks;
  // hiredis' reader (its `privdata` is this object), and the reply it builds (its root).
  redisReader* reader_;
  RedisReply root_;
};

// Whether an error reply refuses a command for its arguments or for the data they met
// (IsArgumentError): a script's own argument check ("ERR sluice ..."), a Lua error in a script,
// WRONGTYPE, an integer out of range or overflowing, a wrong argument count or syntax.
bool IsArgumentError(std::string_view error);

// An error reply as a status. An argument error (IsArgumentError) is kInternal, "redis refused:
// <error>", with FailureReason::kArgument. Any other is kUnavailable, "redis: <error>", with the
// FailureReason of the errors a node gives when it cannot take a command right now: OOM
// (maxmemory reached under noeviction), READONLY (a replica, e.g. mid-failover), LOADING
// (loading its dataset); else kOther.
// REQUIRES: reply.is_error().
absl::Status ErrorReplyStatus(const RedisReply& reply);

}  // namespace sluice
