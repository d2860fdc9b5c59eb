#include "tests/support/redis_server.h"

#include <hiredis/hiredis.h>
#include <signal.h>

#include <chrono>

#include <fstream>

#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sluice::testing {
namespace {

struct ContextDeleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ContextPtr = std::unique_ptr<redisContext, ContextDeleter>;
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

timeval ToTimeval(std::chrono::milliseconds ms) {
  timeval tv;
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

std::string Render(const redisReply& reply) {
  switch (reply.type) {
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_ERROR:
      return std::string(reply.str, reply.len);
    case REDIS_REPLY_INTEGER:
      return absl::StrCat(reply.integer);
    case REDIS_REPLY_ARRAY: {
      std::vector<std::string> parts;
      for (size_t i = 0; i < reply.elements; ++i) {
        parts.push_back(Render(*reply.element[i]));
      }
      return absl::StrJoin(parts, "\n");
    }
    default:
      return "(nil)";
  }
}

// Sends `args` and reads the reply. kUnavailable on I/O failure, kUnknown on an error reply.
absl::StatusOr<std::string> RunOn(redisContext* c, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (const std::string& arg : args) {
    argv.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  ReplyPtr reply(static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lengths.data())));
  if (reply == nullptr) {
    return absl::UnavailableError(absl::StrCat("redis I/O error: ", c->errstr));
  }
  if (reply->type == REDIS_REPLY_ERROR) {
    return absl::UnknownError(Render(*reply));
  }
  return Render(*reply);
}

const char* ClientAuthValue(RedisServerTlsOptions::ClientAuth auth) {
  switch (auth) {
    case RedisServerTlsOptions::ClientAuth::kYes:
      return "yes";
    case RedisServerTlsOptions::ClientAuth::kOptional:
      return "optional";
    case RedisServerTlsOptions::ClientAuth::kNo:
      break;
  }
  return "no";
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisServer>> RedisServer::Start(RedisServerOptions options) {
  std::unique_ptr<RedisServer> server(new RedisServer(std::move(options)));
  if (absl::Status status = server->Launch(); !status.ok()) {
    return status;
  }
  return server;
}

RedisServer::RedisServer(RedisServerOptions options) : options_(std::move(options)) {
  const RedisServerTlsOptions& tls = options_.tls;
  if (!tls.enabled || tls.plain_port) {
    port_ = options_.port != 0 ? options_.port : FreePort();
  } else {
    unix_socket_ = dir_.path() + "/redis.sock";
  }
  if (tls.enabled) {
    tls_port_ = tls.port != 0 ? tls.port : FreePort();
  }
  WriteConfig();
}

void RedisServer::WriteConfig() {
  std::string config = absl::StrCat("port ", port_, "\n", "bind ", options_.host,
                                    "\n"
                                    "save \"\"\n"
                                    "appendonly no\n"
                                    "daemonize no\n"
                                    "logfile \"\"\n"
                                    "dir ",
                                    dir_.path(), "\n");
  if (!unix_socket_.empty()) {
    absl::StrAppend(&config, "unixsocket ", unix_socket_, "\nunixsocketperm 700\n");
  }
  if (const RedisServerTlsOptions& tls = options_.tls; tls.enabled) {
    absl::StrAppend(&config, "tls-port ", tls_port_, "\ntls-cert-file ", tls.cert_file,
                    "\ntls-key-file ", tls.key_file, "\ntls-auth-clients ",
                    ClientAuthValue(tls.client_auth), "\n");
    if (!tls.ca_file.empty()) {
      absl::StrAppend(&config, "tls-ca-cert-file ", tls.ca_file, "\n");
    }
  }
  if (!options_.password.empty()) {
    absl::StrAppend(&config, "requirepass ", options_.password, "\n");
  }
  for (const std::string& user : options_.acl_users) {
    absl::StrAppend(&config, "user ", user, "\n");
  }
  for (const std::string& line : options_.extra_config) {
    absl::StrAppend(&config, line, "\n");
  }
  config_path_ = dir_.WriteFile("redis.conf", config);
}

RedisServer::~RedisServer() {
  if (paused_) {
    Resume();
  }
  process_.reset();
}

std::string RedisServer::address() const { return absl::StrCat(options_.host, ":", port_); }

std::string RedisServer::tls_address() const {
  return tls_port_ != 0 ? absl::StrCat(options_.host, ":", tls_port_) : std::string();
}

std::string RedisServer::CommandEndpoint() const {
  return unix_socket_.empty() ? address() : unix_socket_;
}

pid_t RedisServer::pid() const { return process_ != nullptr ? process_->pid() : -1; }

bool RedisServer::running() { return process_ != nullptr && process_->running(); }

absl::Status RedisServer::Launch() {
  paused_ = false;
  std::vector<std::string> argv = options_.launcher;
  argv.push_back(options_.binary);
  argv.push_back(config_path_);
  argv.insert(argv.end(), options_.arguments.begin(), options_.arguments.end());
  process_ = std::make_unique<ChildProcess>(std::move(argv), dir_.path() + "/redis.log");
  auto deadline = std::chrono::steady_clock::now() + options_.start_timeout;
  absl::Status last = absl::UnavailableError("not started yet");
  while (std::chrono::steady_clock::now() < deadline) {
    if (!process_->running()) {
      return absl::InternalError(
          absl::StrCat("redis-server exited during start-up; log:\n", ReadLog()));
    }
    absl::StatusOr<std::string> pong = Command({"PING"}, std::chrono::milliseconds(500));
    if (pong.ok()) {
      return absl::OkStatus();
    }
    last = pong.status();
    // Polling for the server to come up: there is no event to wait on.
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return absl::DeadlineExceededError(absl::StrCat("redis-server on ", CommandEndpoint(),
                                                  " did not answer: ", last.ToString(), "; log:\n",
                                                  ReadLog()));
}

absl::Status RedisServer::Restart() {
  if (paused_) {
    Resume();
  }
  if (process_ != nullptr && process_->running()) {
    if (process_->Stop(SIGTERM, std::chrono::seconds(10)) == -1) {
      process_->Kill();
    }
  }
  return Launch();
}

void RedisServer::Kill() {
  if (process_ != nullptr) {
    // SIGKILL ends a stopped process too. No SIGCONT first: between the two signals a paused
    // server would run and answer what it was sent while paused.
    process_->Kill();
    paused_ = false;
  }
}

void RedisServer::Pause() {
  if (process_ != nullptr && !paused_) {
    ::kill(process_->pid(), SIGSTOP);
    paused_ = true;
    // SIGSTOP takes effect asynchronously: wait until the kernel reports the process stopped
    // ('T' in /proc/<pid>/stat), so a test's next command really meets a hung server.
    const std::string stat_path = "/proc/" + std::to_string(process_->pid()) + "/stat";
    for (int i = 0; i < 500; ++i) {
      std::ifstream stat(stat_path);
      std::string pid, comm, state;
      stat >> pid >> comm >> state;
      if (state == "T" || state == "t") {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
}

void RedisServer::Resume() {
  if (process_ != nullptr && paused_) {
    ::kill(process_->pid(), SIGCONT);
    paused_ = false;
  }
}

absl::StatusOr<std::string> RedisServer::Command(const std::vector<std::string>& args,
                                                 std::chrono::milliseconds timeout) {
  ContextPtr c(unix_socket_.empty()
                   ? redisConnectWithTimeout(options_.host.c_str(), port_, ToTimeval(timeout))
                   : redisConnectUnixWithTimeout(unix_socket_.c_str(), ToTimeval(timeout)));
  if (c == nullptr || c->err != 0) {
    return absl::UnavailableError(absl::StrCat("cannot connect to ", CommandEndpoint(), ": ",
                                               c != nullptr ? c->errstr : "out of memory"));
  }
  redisSetTimeout(c.get(), ToTimeval(timeout));
  if (!options_.password.empty()) {
    absl::StatusOr<std::string> auth = RunOn(c.get(), {"AUTH", options_.password});
    if (!auth.ok()) {
      return auth.status();
    }
  }
  return RunOn(c.get(), args);
}

absl::Status RedisServer::ReloadCertificate(const std::string& cert_file,
                                            const std::string& key_file) {
  if (!options_.tls.enabled) {
    return absl::FailedPreconditionError("ReloadCertificate on a server without TLS");
  }
  absl::StatusOr<std::string> set =
      Command({"CONFIG", "SET", "tls-cert-file", cert_file, "tls-key-file", key_file});
  if (!set.ok()) {
    return absl::Status(set.status().code(),
                        absl::StrCat(set.status().message(), "; log:\n", ReadLog()));
  }
  options_.tls.cert_file = cert_file;
  options_.tls.key_file = key_file;
  WriteConfig();
  return absl::OkStatus();
}

std::string RedisServer::ReadLog() const {
  return process_ != nullptr ? process_->ReadLog() : std::string();
}

}  // namespace sluice::testing
