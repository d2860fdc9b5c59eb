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
#include "server/common/log_text.h"

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

  // A compact, readable rendering for test failures, e.g. [1, "a", (nil), -ERR x]: the whole
  // reply, its bytes as they are.
  std::string DebugString() const;
  // The same for logs and status messages, fit for one line whatever the reply holds: bytes
  // that are not printable escaped and each string cut as LogText does
  // (server/common/log_text.h), and the rendering stopped after about `max_bytes`, saying how
  // many elements it left out.
  std::string LogString(size_t max_bytes = kLogTextMaxBytes) const;

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

// How much one reply may hold. RedisReplyReader checks each limit as soon as the bytes that
// announce it arrive (an array's count, a bulk string's length), before allocating for it, and
// refuses the stream past any of them: a protocol error, which fails the connection and so the
// commands waiting on it (the failure policy answers their decisions, within their budget).
// Without them an 11-byte reply (`*10000000\r\n`) made the reader allocate gigabytes.
//
// The defaults fit the largest replies Sluice reads, with room to spare; what a reply can cost in
// memory is then bounded by what really arrived, whatever it announces: at most about 150 bytes
// per value received (a RedisReply is 72 bytes, and a vector grown by doubling holds up to
// twice what it uses; a value takes at least 3 bytes on the wire) plus its strings' bytes. At
// the defaults one reply holds at most about 220 MB (1,048,576 values and 64 MiB of strings),
// and only if a peer really sends that much.
// A plain struct: copy it freely.
struct RedisReplyLimits {
  // Most elements one array may announce. The largest Sluice reads: CLUSTER SLOTS, one entry
  // per slot range, so at most 16,384 (kClusterSlots: every slot its own range); a node entry
  // holds 3 or 4, SENTINEL get-master-addr-by-name 2, ROLE 3, a Pub/Sub message 3, a script in
  // its text form 5 (its packed form is one string).
  size_t max_array_elements = size_t{1} << 16;
  // Most values one whole reply may hold inside its arrays, at every depth (the sum of its
  // arrays' counts). The largest: CLUSTER SLOTS of 16,384 single-slot ranges, each
  // [first, last, node...], each node [ip, port, id, metadata] with Redis 7's metadata array
  // of up to 4 (hostname and ip): 3 + 9 per node, so 491,520 with a master and two replicas per
  // range, 933,888 with five replicas. A real cluster has far fewer ranges.
  size_t max_reply_elements = size_t{1} << 20;
  // Most arrays nested one in another, the reply itself being the first. The deepest Sluice
  // reads: CLUSTER SLOTS in Redis 7, 4 (reply, range, node, the node's metadata). hiredis 0.14
  // refuses more than 8 by itself ("No support for nested multi bulk replies with depth > 7"),
  // so a value above 8 changes nothing.
  int max_nesting = 6;
  // Longest bulk string, status or error line, in bytes. The longest Sluice reads: a batch or
  // group script's reply, 40 bytes per key (lua/README.md), so 16 MiB is 419,430 keys in one
  // call, far beyond --redis_max_batch and --max_descriptors of any sane setting (defaults 16
  // and 64: 640 and 2,560 bytes); SCRIPT LOAD's digest is 40 bytes, a host name at most 255.
  size_t max_string_bytes = size_t{16} << 20;
  // Most bytes of strings one reply may hold: those received so far, plus what the value being
  // read will add (a bulk string's announced length, a status or error line so far), which is
  // all the reader buffers of the reply. The largest: a script reply of max_string_bytes, or
  // CLUSTER SLOTS of 16,384 ranges (up to about 170 bytes of strings per node with Redis 7's
  // metadata: 8.4 MB with three nodes a range).
  size_t max_reply_bytes = size_t{64} << 20;
};

// Reads RESP2 replies from a byte stream into RedisReply values directly: hiredis' parser with
// its object hooks building our values in place, so no hiredis reply is allocated or copied. A
// reply's only allocations are its long strings and its arrays' element vectors, which grow as
// elements really arrive (never sized from an announced count), within RedisReplyLimits.
// Not thread-safe; one per connection.
class RedisReplyReader {
 public:
  explicit RedisReplyReader(RedisReplyLimits limits = {});
  ~RedisReplyReader();
  RedisReplyReader(const RedisReplyReader&) = delete;
  RedisReplyReader& operator=(const RedisReplyReader&) = delete;

  // Appends bytes read from the connection. False: out of memory (Next then says so). After
  // Next returned kError the bytes are dropped. The caller calls Next until kNone after each
  // Feed (as RedisWire and RedisSyncClient do): the limits are checked on what is buffered
  // there, so the buffer never holds more than a reply's limits plus one Feed.
  bool Feed(const char* data, size_t size);

  enum class Result { kReply, kNone, kError };
  // kReply: the next whole reply is *reply() until the next call, and the caller may move from
  // it. kNone: no whole reply buffered yet. kError: the stream is not RESP, or a reply is past
  // a limit (error() says which, e.g. "reply array of 10000000 elements; at most 65536
  // (RedisReplyLimits::max_array_elements)"); what was buffered is freed, and every later call
  // returns kError again.
  Result Next();
  RedisReply* reply() { return &root_; }
  // Why Next returned kError: hiredis' message, or ours naming the limit. Our text only (a
  // number or a byte hiredis escaped), never the reply's own bytes.
  const std::string& error() const { return error_; }

  const RedisReplyLimits& limits() const { return limits_; }

 private:
  struct Hooks;
  // After a kNone: whether the reply being read can still fit, from what is buffered of it (a
  // bulk string's announced length, a line too long to be a number); else sets error_.
  bool CheckUnfinished();
  // Records `why` unless a hook has already, frees the reader and what it held.
  Result Fail(std::string_view why);

  const RedisReplyLimits limits_;
  // hiredis' reader (its `privdata` is this object); null once failed.
  redisReader* reader_;
  // The reply being built (its root).
  RedisReply root_;
  // The reply being read so far: its arrays' announced counts added up, and its strings' bytes.
  size_t reply_elements_ = 0;
  size_t reply_string_bytes_ = 0;
  std::string error_;
};

// Whether an error reply refuses a command for its arguments or for the data they met
// (IsArgumentError): a script's own argument check ("ERR sluice ..."), a Lua error in a script,
// WRONGTYPE, an integer out of range or overflowing, a wrong argument count or syntax.
bool IsArgumentError(std::string_view error);

// An error reply as a status, with the error's text as LogText shows it (escaped, cut to
// kLogTextMaxBytes: a Redis may answer with an error line of any length). An argument error
// (IsArgumentError) is kInternal, "redis refused: <error>", with FailureReason::kArgument. Any
// other is kUnavailable, "redis: <error>", with the FailureReason of the errors a node gives
// when it cannot take a command right now: OOM (maxmemory reached under noeviction), READONLY
// (a replica, e.g. mid-failover), LOADING (loading its dataset); else kOther.
// REQUIRES: reply.is_error().
absl::Status ErrorReplyStatus(const RedisReply& reply);

}  // namespace sluice
