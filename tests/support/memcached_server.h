// Test helper: a real memcached child process (Debian's memcached 1.6) on a free 127.0.0.1
// port, in the foreground, that a test can kill, restart on the same port, and pause (SIGSTOP,
// a hung server) and resume. Command() sends raw text-protocol lines on a fresh blocking
// connection for setup and assertions, as RedisServer::Command does for Redis.
//
// Not thread-safe: one thread drives a server object. Distinct servers are independent.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/support/process.h"

namespace sluice::testing {

struct MemcachedServerOptions {
  int port = 0;  // 0 picks FreePort()
  std::string binary = "memcached";
  // More command-line arguments, e.g. {"-m", "1"} (MiB of memory).
  std::vector<std::string> arguments{};
  std::chrono::milliseconds start_timeout{10000};
};

class MemcachedServer {
 public:
  // Starts the server and waits until it accepts connections; the error holds its log.
  static absl::StatusOr<std::unique_ptr<MemcachedServer>> Start(
      MemcachedServerOptions options = {});
  ~MemcachedServer();
  MemcachedServer(const MemcachedServer&) = delete;
  MemcachedServer& operator=(const MemcachedServer&) = delete;

  int port() const { return port_; }
  // "127.0.0.1:<port>".
  std::string address() const;
  pid_t pid() const;
  bool running();

  // SIGKILL, at once, like a crash (every item is gone: memcached keeps nothing).
  void Kill();
  // Stops the server if it runs and starts it again on the same port, empty.
  absl::Status Restart();
  // SIGSTOP; returns once every thread of the server has stopped.
  void Pause();
  void Resume();

  // Sends `text` (whole lines, CRLF-ended) and returns what the server answered until `until`
  // ends the answer (e.g. "END\r\n") or `timeout` passes.
  absl::StatusOr<std::string> Command(const std::string& text, const std::string& until,
                                      std::chrono::milliseconds timeout = std::chrono::seconds(2));
  // The number stored under `key` (mg), or -1 when it is missing.
  int64_t Count(const std::string& key);

 private:
  explicit MemcachedServer(MemcachedServerOptions options);
  absl::Status Launch();

  MemcachedServerOptions options_;
  TempDir dir_;
  int port_ = 0;
  std::unique_ptr<ChildProcess> process_;
  bool paused_ = false;
};

}  // namespace sluice::testing
