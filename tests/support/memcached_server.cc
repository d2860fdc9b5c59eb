#include "tests/support/memcached_server.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace sluice::testing {

absl::StatusOr<std::unique_ptr<MemcachedServer>> MemcachedServer::Start(
    MemcachedServerOptions options) {
  std::unique_ptr<MemcachedServer> server(new MemcachedServer(std::move(options)));
  if (absl::Status status = server->Launch(); !status.ok()) {
    return status;
  }
  return server;
}

MemcachedServer::MemcachedServer(MemcachedServerOptions options) : options_(std::move(options)) {
  port_ = options_.port != 0 ? options_.port : FreePort();
}

MemcachedServer::~MemcachedServer() {
  if (paused_) {
    Resume();
  }
}

std::string MemcachedServer::address() const { return absl::StrCat("127.0.0.1:", port_); }

pid_t MemcachedServer::pid() const { return process_ != nullptr ? process_->pid() : -1; }

bool MemcachedServer::running() { return process_ != nullptr && process_->running(); }

absl::Status MemcachedServer::Launch() {
  std::vector<std::string> argv = {options_.binary, "-l", "127.0.0.1", "-p",
                                   absl::StrCat(port_), "-U", "0", "-t", "1"};
  if (getuid() == 0) {
    argv.push_back("-u");
    argv.push_back("root");
  }
  for (const std::string& argument : options_.arguments) {
    argv.push_back(argument);
  }
  process_ = std::make_unique<ChildProcess>(argv, dir_.path() + "/memcached.log");
  if (!WaitForPort(port_, options_.start_timeout)) {
    return absl::UnavailableError(absl::StrCat("memcached did not start on port ", port_, ": ",
                                               process_->ReadLog()));
  }
  return absl::OkStatus();
}

void MemcachedServer::Kill() {
  if (paused_) {
    Resume();
  }
  if (process_ != nullptr) {
    process_->Kill();
  }
}

absl::Status MemcachedServer::Restart() {
  if (paused_) {
    Resume();
  }
  if (process_ != nullptr && process_->running()) {
    process_->Stop(SIGTERM, std::chrono::seconds(5));
  }
  process_.reset();
  return Launch();
}

namespace {

// Whether every thread of `pid` is stopped ('T' or 't' after the name in /proc's stat).
bool AllThreadsStopped(pid_t pid) {
  std::error_code error;
  std::filesystem::directory_iterator tasks(absl::StrCat("/proc/", pid, "/task"), error);
  if (error) {
    return false;
  }
  for (const auto& task : tasks) {
    std::ifstream stat(task.path() / "stat");
    const std::string text((std::istreambuf_iterator<char>(stat)),
                           std::istreambuf_iterator<char>());
    const size_t name_end = text.rfind(')');
    if (name_end == std::string::npos || name_end + 2 >= text.size() ||
        (text[name_end + 2] != 'T' && text[name_end + 2] != 't')) {
      return false;
    }
  }
  return true;
}

}  // namespace

void MemcachedServer::Pause() {
  if (process_ != nullptr && !paused_) {
    kill(process_->pid(), SIGSTOP);
    paused_ = true;
    // SIGSTOP takes effect asynchronously, thread by thread: until every worker has stopped, one
    // woken by a request could still answer it. Wait for all of them (at most a second).
    for (int i = 0; i < 1000 && !AllThreadsStopped(process_->pid()); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
}

void MemcachedServer::Resume() {
  if (process_ != nullptr && paused_) {
    kill(process_->pid(), SIGCONT);
    paused_ = false;
  }
}

absl::StatusOr<std::string> MemcachedServer::Command(const std::string& text,
                                                     const std::string& until,
                                                     std::chrono::milliseconds timeout) {
  const int fd = ConnectToLoopback(port_);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot connect to memcached on ", port_));
  }
  size_t sent = 0;
  while (sent < text.size()) {
    const ssize_t n = write(fd, text.data() + sent, text.size() - sent);
    if (n <= 0) {
      close(fd);
      return absl::UnavailableError("write to memcached failed");
    }
    sent += static_cast<size_t>(n);
  }
  std::string answer;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (answer.size() < until.size() ||
         answer.compare(answer.size() - until.size(), until.size(), until) != 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      close(fd);
      return absl::DeadlineExceededError(absl::StrCat("memcached answered only: ", answer));
    }
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) {
      continue;
    }
    char buf[4096];
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) {
      close(fd);
      return absl::UnavailableError(absl::StrCat("memcached closed; answered: ", answer));
    }
    answer.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return answer;
}

int64_t MemcachedServer::Count(const std::string& key) {
  absl::StatusOr<std::string> answer = Command(absl::StrCat("mg ", key, " v\r\nmn\r\n"), "MN\r\n");
  if (!answer.ok() || absl::StartsWith(*answer, "EN")) {
    return -1;
  }
  // "VA <size>\r\n<data>\r\nMN\r\n"
  const size_t first = answer->find("\r\n");
  const size_t second = answer->find("\r\n", first + 2);
  if (first == std::string::npos || second == std::string::npos) {
    return -1;
  }
  int64_t value = -1;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(answer->substr(first + 2, second - first - 2)),
                        &value)) {
    return -1;
  }
  return value;
}

}  // namespace sluice::testing
