// The unit of work a RedisClient executes: commands that are written back-to-back on one
// connection (so pipelined, and so that e.g. [ASKING, EVALSHA ...] stays together) and answered
// together. All commands live in one buffer, already in RESP form, plus one small entry each:
// a batch of N commands costs two allocations, not N. Each entry also records where the
// command's routing key lies (see routing_key.h), so that a cluster layer can find every
// command's hash slot without parsing it again.
//
// A plain value type: movable and copyable, not synchronized. Build it on one thread, then
// hand it to RedisClient::Execute, which takes ownership.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "server/redis/command.h"
#include "server/redis/reply.h"
#include "server/redis/script_cache.h"
#include "server/trace/tracer.h"

namespace sluice {

// Receives the outcome of one batch, exactly once. On OK, `replies` has one reply per command,
// in command order; a command Redis refused is an error reply there (e.g. WRONGTYPE, or MOVED
// for a cluster layer to handle), never NOSCRIPT. On error (kUnavailable, kDeadlineExceeded,
// ...) `replies` is empty. The span is valid only during the call; the callee may move replies
// out of it.
using BatchCallback =
    absl::AnyInvocable<void(absl::Status status, absl::Span<RedisReply> replies) &&>;

class CommandBatch {
 public:
  CommandBatch() = default;

  // Preallocates room for `commands` commands of `bytes` RESP bytes in total.
  void Reserve(size_t commands, size_t bytes);

  // Appends the command `args` (name first). REQUIRES: !args.empty().
  // Example: batch.Add({"SET", key, value}).
  CommandBatch& Add(absl::Span<const std::string_view> args);

  // Appends EVALSHA of `script`; NOSCRIPT is healed by the connection. `script` must outlive
  // the batch's execution (scripts live as long as their ScriptCache).
  CommandBatch& AddEvalSha(const RedisScript& script, absl::Span<const std::string_view> keys,
                           absl::Span<const std::string_view> args);

  // Appends a copy of a pre-formatted command.
  CommandBatch& Add(const RedisCommand& command);

  // Appends a command already in RESP form, e.g. resp(i) of another batch when a cluster layer
  // retries one command elsewhere after MOVED. `script` is the script an EVALSHA runs, else
  // nullptr. REQUIRES: `resp` is exactly one complete RESP command.
  CommandBatch& AddFormatted(std::string_view resp, const RedisScript* script);

  // Appends a copy of the i-th command of `other` (its bytes, script and routing key), without
  // parsing it again. REQUIRES: i < other.size(); `other` is not *this.
  CommandBatch& AddFrom(const CommandBatch& other, size_t i);

  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  // Total RESP bytes.
  size_t bytes() const { return buffer_.size(); }

  // The i-th command in RESP form. REQUIRES: i < size().
  std::string_view resp(size_t i) const {
    return std::string_view(buffer_).substr(entries_[i].offset, entries_[i].length);
  }
  // The script the i-th command runs with EVALSHA, or nullptr. REQUIRES: i < size().
  const RedisScript* script(size_t i) const { return entries_[i].script; }

  // Whether the i-th command names a key that routes it in a cluster (see routing_key.h: for
  // EVALSHA that is keys[0]; PING or SCRIPT LOAD have none). REQUIRES: i < size().
  bool has_routing_key(size_t i) const { return entries_[i].key_offset != 0; }
  // The i-th command's routing key; empty if it has none. REQUIRES: i < size().
  std::string_view routing_key(size_t i) const {
    return std::string_view(buffer_).substr(entries_[i].offset + entries_[i].key_offset,
                                            entries_[i].key_length);
  }

  // The traced decisions this batch works for: each gets a span for every node call that
  // carries the batch's commands (node_call_trace.h). Empty (the common case): no span.
  void AddTrace(const TraceParent& trace) {
    if (trace.active()) {
      traces_.push_back(trace);
    }
  }
  const std::vector<TraceParent>& traces() const { return traces_; }
  // Takes `other`'s traces too (a cluster's sub-batch works for its whole batch's decisions).
  void CopyTracesFrom(const CommandBatch& other) { traces_ = other.traces_; }

  void Clear();

 private:
  struct Entry {
    size_t offset;
    size_t length;
    // The routing key, relative to `offset`; key_offset 0 means none (a command starts with
    // '*', so no key can start there).
    uint32_t key_offset;
    uint32_t key_length;
    const RedisScript* script;
  };

  // Records the command appended to buffer_ since `start`, locating its routing key.
  void Commit(size_t start, const RedisScript* script);
  // The same when the routing key is known: `key_at` in buffer_ (npos: none), `key_length` long.
  void CommitWithKey(size_t start, const RedisScript* script, size_t key_at, size_t key_length);

  std::string buffer_;
  absl::InlinedVector<Entry, 2> entries_;
  std::vector<TraceParent> traces_;
};

}  // namespace sluice
