// Test helpers for running real servers (redis-server, sluice) as child processes on loopback.
// Not thread-safe per object; distinct objects may be used from different threads.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace sluice::testing {

// A TCP port on 127.0.0.1 that was free when asked. Ports are handed out from a per-process
// sequence offset by the pid, and each is checked by binding it, so concurrent test binaries
// rarely collide.
int FreePort();

// A TCP socket listening on 127.0.0.1, on a port the kernel chose: for a test's own fake peers.
struct LoopbackListener {
  int fd = -1;  // the caller closes it
  int port = 0;
};
LoopbackListener ListenOnLoopback(int backlog);

// A TCP socket listening on 127.0.0.1:`port` while it lives, so nothing else can bind it: for a
// test that a server reports an address already taken.
class HeldPort {
 public:
  explicit HeldPort(int port);
  ~HeldPort();
  HeldPort(const HeldPort&) = delete;
  HeldPort& operator=(const HeldPort&) = delete;

  // Whether the port was bound and is listened on.
  bool ok() const { return ok_; }

 private:
  int fd_ = -1;
  bool ok_ = false;
};

// A TCP connection to 127.0.0.1:port, or -1.
int ConnectToLoopback(int port);

// True once something accepts TCP connections on 127.0.0.1:port, polling until `timeout`.
bool WaitForPort(int port, std::chrono::milliseconds timeout);

// Runs `command` with /bin/sh, waits, and returns its exit status (-1 if it did not exit
// normally) and its stdout and stderr together.
std::pair<int, std::string> RunCommand(const std::string& command);

// "<body>\n<status code>" of an HTTP GET of http://127.0.0.1:<port><path> (curl).
std::string HttpGet(int port, const std::string& path);

// The value of the sample `series` on a Prometheus text page (a metric name, with its labels
// as the page prints them: `x_total{reason="a"}`), or -1 when the page has none.
double MetricValue(const std::string& page, const std::string& series);
// The sum of every sample whose series begins with `prefix` (`name{` sums a metric over its
// label sets); 0 when there is none.
double MetricSum(const std::string& page, const std::string& prefix);

// A child process whose stdout and stderr go to a log file. The destructor sends SIGTERM,
// waits up to five seconds, then SIGKILLs, so a failing test never leaks a server.
class ChildProcess {
 public:
  // Starts argv[0] (searched in PATH) with the given arguments; `log_path` receives its output.
  ChildProcess(std::vector<std::string> argv, std::string log_path,
               std::vector<std::string> env = {});
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool running();
  // Sends `signal` and waits for the exit; returns the exit status as from waitpid, or -1 on
  // timeout.
  int Stop(int signal, std::chrono::milliseconds timeout);
  // Kills the process at once (SIGKILL) and reaps it.
  void Kill();
  // The whole log so far.
  std::string ReadLog() const;
  const std::string& log_path() const { return log_path_; }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int exit_status_ = 0;
  std::string log_path_;
};

// A fresh empty directory under $TMPDIR (or /tmp), removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  // Writes `content` to path()/name and returns the full path.
  std::string WriteFile(const std::string& name, const std::string& content) const;

 private:
  std::string path_;
};

}  // namespace sluice::testing
