// memcached's meta text protocol (memcached 1.6, doc/protocol.txt "Meta Commands"), the part
// Sluice speaks: the commands of a fixed window and the replies they get.
//
//   ma <key> N<ttl> J<hits> D<hits> v   increment by hits, or create the key with the value hits
//                                       and that TTL when it is missing: one atomic step
//                                       (the item lock is held from the miss to the add)
//   ma <key> MD D<hits> v               decrement, floored at 0 (a refund, a give-back); a
//                                       missing key stays missing (NF)
//   mg <key> v                          the count (a check of 0 hits), EN when missing
//   mg <key> v t                        the count and the seconds the item has left (the admin
//                                       API's inspect; "t-1": no expiry)
//   md <key>                            deletes the item: HD, or NF when missing (its reset)
//   mn                                  no-op, answered MN (the breaker's probe)
//
// Replies come in the order of the commands: "VA <size> <flags>\r\n<data>\r\n", "HD", "NF",
// "EN", "NS", "EX", "MN", or an error line ("ERROR", "CLIENT_ERROR <why>", "SERVER_ERROR
// <why>"). The reader bounds what one reply may make it hold: a line of kMaxLineBytes, a value
// of kMaxValueBytes (a count is at most 20 digits; a longer value is someone else's item under
// one of Sluice's keys, consumed and answered as not a number).
//
// Pure functions and a reader owned by one connection: not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace sluice {

// memcached's longest key (KEY_MAX_LENGTH); a key holds no byte at or below ' ' nor 0x7f.
inline constexpr size_t kMemcachedMaxKeyBytes = 250;
// Whether memcached takes `key` as it is in the text protocol (gomemcache's legalKey).
bool IsLegalMemcachedKey(absl::string_view key);

// memcached reads a TTL above 30 days as a Unix time: a window longer than that is given as
// the Unix second it ends at (`now_s` + ttl_s), so that it does not expire at once.
inline constexpr int64_t kMemcachedMaxRelativeTtl = 60 * 60 * 24 * 30;
int64_t MemcachedExpiry(int64_t ttl_s, int64_t now_s);

// Appends one command to *out. REQUIRES: IsLegalMemcachedKey(key).
void AppendIncrementOrCreate(absl::string_view key, uint64_t hits, int64_t expiry,
                             std::string* out);
void AppendDecrement(absl::string_view key, uint64_t hits, std::string* out);
void AppendGetValue(absl::string_view key, std::string* out);
void AppendGetValueAndTtl(absl::string_view key, std::string* out);
void AppendDelete(absl::string_view key, std::string* out);
void AppendNoOp(std::string* out);

struct MetaReply {
  enum class Kind : uint8_t {
    kValue,     // VA: `value` holds the number (`numeric` false if it was not one)
    kNotFound,  // NF, EN: no such item
    kOther,     // HD, NS, EX, MN
    kError,     // ERROR, CLIENT_ERROR, SERVER_ERROR: `error` holds the line (cut to 256 bytes)
  };
  Kind kind = Kind::kOther;
  uint64_t value = 0;
  bool numeric = false;
  // kValue of `mg ... t`: the seconds the item has left, -1 for none; nullopt without the flag.
  std::optional<int64_t> ttl_seconds{};
  std::string error{};
};

// Reads replies from the bytes of one connection, in order.
class MetaReplyReader {
 public:
  static constexpr size_t kMaxLineBytes = 1024;
  static constexpr size_t kMaxValueBytes = 1 << 20;

  // Appends bytes read from the socket.
  void Feed(const char* data, size_t size) { buffer_.append(data, size); }

  enum class Result { kNone, kReply, kError };
  // The next whole reply into *reply: kReply; kNone until more bytes come; kError (error())
  // when the bytes are no reply memcached sends, or pass a bound: the connection must go.
  Result Next(MetaReply* reply);
  const std::string& error() const { return error_; }

 private:
  std::string buffer_;
  size_t read_ = 0;  // bytes of buffer_ consumed
  std::string error_;
};

}  // namespace sluice
