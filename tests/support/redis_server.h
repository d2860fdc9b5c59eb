// Test helper: a real redis-server child process on a free 127.0.0.1 port, with its own
// temporary directory and no persistence, that a test can kill, restart on the same port, and
// pause (SIGSTOP, a hung Redis) and resume. Command() runs one command on a fresh blocking
// connection for test setup and assertions. A cluster launcher builds on it by passing
// cluster-enabled and friends through RedisServerOptions::extra_config, one server per node.
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

struct RedisServerOptions {
  // 0 picks FreePort().
  int port = 0;
  // requirepass: the default user's password. Command() authenticates with it.
  std::string password{};
  // ACL users, each a redis.conf `user` line without the keyword, e.g.
  // "alice on >secret ~* &* +@all".
  std::vector<std::string> acl_users{};
  // More redis.conf lines, e.g. "cluster-enabled yes".
  std::vector<std::string> extra_config{};
  std::string binary = "redis-server";
  // The address the server binds, and that address() and Command() use.
  std::string host = "127.0.0.1";
  // A command the server runs under, e.g. {"ip", "netns", "exec", "<name>"} to start it in a
  // network namespace. It must exec the server, so that the child's pid is the server's.
  std::vector<std::string> launcher{};
  // How long Start and Restart wait for the server to answer PING.
  std::chrono::milliseconds start_timeout{15000};
};

class RedisServer {
 public:
  // Starts the server and waits until it answers PING. The error includes the server's log.
  static absl::StatusOr<std::unique_ptr<RedisServer>> Start(RedisServerOptions options = {});

  // Stops the server (resuming it first if paused).
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  // "<host>:<port>".
  std::string address() const;
  // The server's working directory (its redis.conf and redis.log live there).
  const std::string& dir() const { return dir_.path(); }
  pid_t pid() const;
  bool running();

  // Stops the server if it runs (SIGTERM) and starts it again on the same port and directory,
  // waiting until it answers. Data and loaded scripts are gone (nothing is persisted).
  absl::Status Restart();
  // SIGKILL, at once, like a crash. Restart() brings it back.
  void Kill();
  // SIGSTOP / SIGCONT: connections stay open but nothing is answered while paused.
  void Pause();
  void Resume();

  // Runs one command on a new blocking connection (authenticated with `password` if set) and
  // returns the reply as text: a status or string as is, an integer in decimal, nil as
  // "(nil)", an array as its elements joined by '\n'. An error reply is kUnknown with the
  // error text; an I/O failure or timeout is kUnavailable.
  absl::StatusOr<std::string> Command(const std::vector<std::string>& args,
                                      std::chrono::milliseconds timeout = std::chrono::seconds(5));

  // The server's output so far.
  std::string ReadLog() const;

 private:
  explicit RedisServer(RedisServerOptions options);
  absl::Status Launch();

  RedisServerOptions options_;
  TempDir dir_;
  int port_ = 0;
  std::string config_path_;
  std::unique_ptr<ChildProcess> process_;
  bool paused_ = false;
};

}  // namespace sluice::testing
