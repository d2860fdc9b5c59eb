#include "tests/support/process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace sluice::testing {

std::pair<int, std::string> RunCommand(const std::string& command) {
  std::string output;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    return {-1, "popen failed"};
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) {
    output.append(buf, n);
  }
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

namespace {

// The value of a sample line (`<series> <value>`), if it parses.
std::optional<double> SampleValue(absl::string_view line) {
  const size_t space = line.rfind(' ');
  double value = 0;
  if (space == absl::string_view::npos || !absl::SimpleAtod(line.substr(space + 1), &value)) {
    return std::nullopt;
  }
  return value;
}

}  // namespace

double MetricValue(const std::string& page, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    if (absl::StartsWith(line, series + " ")) {
      if (std::optional<double> value = SampleValue(line)) return *value;
    }
  }
  return -1;
}

double MetricSum(const std::string& page, const std::string& prefix) {
  double sum = 0;
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    if (absl::StartsWith(line, prefix)) {
      sum += SampleValue(line).value_or(0);
    }
  }
  return sum;
}

std::string HttpGet(int port, const std::string& path) {
  return RunCommand("curl -s -o - -w '\\n%{http_code}' http://127.0.0.1:" + std::to_string(port) +
                    path)
      .second;
}

namespace {

bool CanBind(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    return false;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

// The ports FreePort hands out: below the kernel's ephemeral range, so that an outgoing connection
// made by any test process (which takes its local port from that range) cannot take a port between
// the check here and the server's bind. Redis Cluster also needs port + 10000 for its bus, so the
// window ends 10000 below the ephemeral range.
std::pair<int, int> PortWindow() {
  int ephemeral_low = 32768;
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  if (range >> low && low > 0) {
    ephemeral_low = low;
  }
  constexpr int kFirst = 10000;
  const int end = ephemeral_low - 10000;
  if (end - kFirst < 4000) {
    return {20000, 55000};  // An unusual ephemeral range: fall back to a wide window and the check.
  }
  return {kFirst, end};
}

}  // namespace

LoopbackListener ListenOnLoopback(int backlog) {
  LoopbackListener listener;
  listener.fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(addr);
  if (listener.fd < 0 || bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listener.fd, backlog) != 0 ||
      getsockname(listener.fd, reinterpret_cast<sockaddr*>(&addr), &length) != 0) {
    std::perror("ListenOnLoopback");
    std::abort();  // a test machine that cannot listen on loopback cannot run these tests
  }
  listener.port = ntohs(addr.sin_port);
  return listener;
}

HeldPort::HeldPort(int port) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ok_ = fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
        listen(fd_, 1) == 0;
}

HeldPort::~HeldPort() {
  if (fd_ >= 0) {
    close(fd_);
  }
}

int ConnectToLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int FreePort() {
  static const std::pair<int, int> window = PortWindow();
  const auto [first, end] = window;
  static std::atomic<int> next{first + (::getpid() * 37) % (end - first)};
  for (int attempt = 0; attempt < 2 * (end - first); ++attempt) {
    int port = next.fetch_add(1);
    if (port >= end) {
      next.store(first);
      continue;
    }
    if (CanBind(port) && CanBind(port + 10000)) {
      return port;
    }
  }
  std::abort();
}

bool WaitForPort(int port, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    ::close(fd);
    if (ok) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

ChildProcess::ChildProcess(std::vector<std::string> argv, std::string log_path,
                           std::vector<std::string> env)
    : log_path_(std::move(log_path)) {
  pid_ = ::fork();
  if (pid_ == 0) {
    int fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
      ::close(fd);
    }
    int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) {
      ::dup2(null_fd, STDIN_FILENO);
      ::close(null_fd);
    }
    for (const std::string& kv : env) {
      ::putenv(const_cast<char*>(kv.c_str()));
    }
    std::vector<char*> args;
    for (std::string& a : argv) {
      args.push_back(a.data());
    }
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !reaped_) {
    if (Stop(SIGTERM, std::chrono::seconds(5)) == -1) {
      Kill();
    }
  }
}

bool ChildProcess::running() {
  if (pid_ <= 0 || reaped_) {
    return false;
  }
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    reaped_ = true;
    exit_status_ = status;
    return false;
  }
  return true;
}

int ChildProcess::Stop(int signal, std::chrono::milliseconds timeout) {
  if (pid_ <= 0) {
    return -1;
  }
  if (reaped_) {
    return exit_status_;
  }
  ::kill(pid_, signal);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      reaped_ = true;
      exit_status_ = status;
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

void ChildProcess::Kill() {
  if (pid_ <= 0 || reaped_) {
    return;
  }
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  reaped_ = true;
  exit_status_ = status;
}

std::string ChildProcess::ReadLog() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/sluice-test-XXXXXX";
  char* made = ::mkdtemp(tmpl.data());
  if (made == nullptr) {
    std::abort();
  }
  path_ = made;
}

TempDir::~TempDir() {
  if (const char* keep = std::getenv("SLUICE_KEEP_TEST_DIRS"); keep != nullptr && *keep != '\0') {
    std::fprintf(stderr, "kept %s (SLUICE_KEEP_TEST_DIRS)\n", path_.c_str());
    return;
  }
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::WriteFile(const std::string& name, const std::string& content) const {
  std::string full = path_ + "/" + name;
  std::filesystem::create_directories(std::filesystem::path(full).parent_path());
  std::ofstream out(full, std::ios::binary);
  out << content;
  return full;
}

}  // namespace sluice::testing
