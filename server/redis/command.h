// Redis commands in their wire form (RESP: an array of bulk strings), formatted once when the
// command is built so that the I/O thread only copies bytes into the socket buffer. Includes the
// EVALSHA builder used for every rate-limit decision.
// Pure functions and a plain value type; safe from any thread on distinct objects.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "absl/types/span.h"
#include "server/redis/script_cache.h"

namespace sluice {

// Appends the RESP encoding of the command `args` (name first) to *out.
// REQUIRES: !args.empty().
void AppendRespCommand(absl::Span<const std::string_view> args, std::string* out);

// Appends `EVALSHA sha1 numkeys keys... args...` in RESP form to *out. Returns where in *out the
// first key's bytes start (a batch's routing key, known without parsing the command again), or
// std::string::npos without keys.
size_t AppendEvalShaCommand(std::string_view sha1, absl::Span<const std::string_view> keys,
                          absl::Span<const std::string_view> args, std::string* out);

// One pre-formatted command, for commands that are built once and sent many times, and for
// single commands handed between layers. Batches (command_batch.h) store commands inline
// instead, without one allocation per command.
class RedisCommand {
 public:
  // REQUIRES: !args.empty(). Example: RedisCommand::FromArgs({"INCRBY", key, "5"}).
  static RedisCommand FromArgs(absl::Span<const std::string_view> args);

  // EVALSHA of a registered script. The command remembers `script` so that the connection can
  // load it and retry when Redis answers NOSCRIPT. `script` must outlive the command.
  static RedisCommand EvalSha(const RedisScript& script, absl::Span<const std::string_view> keys,
                              absl::Span<const std::string_view> args);

  // The command's bytes in RESP form.
  std::string_view resp() const { return resp_; }
  // The script an EVALSHA command runs, or nullptr for any other command.
  const RedisScript* script() const { return script_; }

 private:
  RedisCommand(std::string resp, const RedisScript* script)
      : resp_(std::move(resp)), script_(script) {}

  std::string resp_;
  const RedisScript* script_ = nullptr;
};

}  // namespace sluice
