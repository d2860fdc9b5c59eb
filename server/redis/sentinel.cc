#include "server/redis/sentinel.h"

#include <algorithm>
#include <charconv>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "server/common/log_text.h"
#include "server/common/logging.h"
#include "server/redis/address.h"
#include "server/redis/sync_client.h"

namespace sluice {
namespace {

constexpr char kSwitchMaster[] = "+switch-master";

std::optional<int> ParsePort(std::string_view text) {
  int port = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (ec != std::errc() || end != text.data() + text.size() || port < 1 || port > 65535) {
    return std::nullopt;
  }
  return port;
}

}  // namespace

SentinelWatcher::SentinelWatcher(SentinelWatcherOptions options,
                                 absl::AnyInvocable<void(const RedisEndpoint&)> on_master)
    : options_(std::move(options)), on_master_(std::move(on_master)) {}

SentinelWatcher::~SentinelWatcher() { Stop(); }

void SentinelWatcher::Start() { thread_ = std::thread([this] { Run(); }); }

void SentinelWatcher::Stop() {
  {
    MutexLock lock(mu_);
    stopped_ = true;
    wake_.NotifyAll();
  }
  if (thread_.joinable()) {
    thread_.join();
  }
}

void SentinelWatcher::AskAgain() {
  MutexLock lock(mu_);
  ask_again_ = true;
  wake_.NotifyAll();
}

int SentinelWatcher::rounds_found() const {
  MutexLock lock(mu_);
  return rounds_found_;
}

int SentinelWatcher::masters_reported() const {
  MutexLock lock(mu_);
  return masters_reported_;
}

bool SentinelWatcher::stopped() const {
  MutexLock lock(mu_);
  return stopped_;
}

bool SentinelWatcher::TakeAskAgain() {
  MutexLock lock(mu_);
  return std::exchange(ask_again_, false);
}

bool SentinelWatcher::Sleep(absl::Duration d) {
  MutexLock lock(mu_);
  if (!stopped_ && !ask_again_) {
    wake_.WaitFor(mu_, absl::ToInt64Microseconds(d));
  }
  return !stopped_;
}

void SentinelWatcher::Run() {
  while (!stopped()) {
    TakeAskAgain();  // this round answers it
    std::optional<std::pair<RedisEndpoint, size_t>> found = FindMaster();
    if (!found.has_value()) {
      Sleep(options_.retry_interval);
      continue;
    }
    {
      MutexLock lock(mu_);
      ++rounds_found_;
    }
    Report(found->first);
    std::unique_ptr<RedisSyncClient> sentinel = ConnectSentinel(found->second);
    if (sentinel == nullptr) {
      Sleep(options_.retry_interval);
      continue;
    }
    Listen(*sentinel);
  }
}

std::unique_ptr<RedisSyncClient> SentinelWatcher::ConnectSentinel(size_t index) {
  const std::string& address = options_.sentinel.addresses[index];
  RedisEndpoint endpoint;
  if (absl::Status split = SplitHostPort(address, &endpoint.host, &endpoint.port); !split.ok()) {
    SLUICE_LOG_EVERY_SECONDS(ERROR, 30) << "redis sentinel " << address << ": " << split;
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<RedisSyncClient>> client =
      RedisSyncClient::Connect(endpoint, options_.tls.get(), options_.timeout);
  if (!client.ok()) {
    SLUICE_LOG_EVERY_SECONDS(WARNING, 10) << "redis sentinel: " << client.status().message();
    return nullptr;
  }
  if (absl::Status auth = (*client)->Authenticate(options_.sentinel.username,
                                                   options_.sentinel.password);
      !auth.ok()) {
    SLUICE_LOG_EVERY_SECONDS(ERROR, 10) << "redis sentinel: " << auth.message();
    return nullptr;
  }
  return *std::move(client);
}

bool SentinelWatcher::IsMaster(const RedisEndpoint& endpoint, std::string* why) {
  absl::StatusOr<std::unique_ptr<RedisSyncClient>> client =
      RedisSyncClient::Connect(endpoint, options_.tls.get(), options_.timeout);
  if (!client.ok()) {
    *why = std::string(client.status().message());
    return false;
  }
  if (absl::Status auth = (*client)->Authenticate(options_.username, options_.password);
      !auth.ok()) {
    *why = std::string(auth.message());
    return false;
  }
  absl::StatusOr<RedisReply> role = (*client)->Run({"ROLE"});
  if (!role.ok()) {
    *why = std::string(role.status().message());
    return false;
  }
  if (!role->is_array() || role->elements().empty() || role->elements()[0].str() != "master") {
    *why = absl::StrCat("ROLE is not master (",
                        LogText(role->is_array() && !role->elements().empty()
                                    ? role->elements()[0].str()
                                    : role->str()),
                        ")");
    return false;
  }
  return true;
}

std::optional<std::pair<RedisEndpoint, size_t>> SentinelWatcher::FindMaster() {
  const size_t n = options_.sentinel.addresses.size();
  std::vector<std::string> why;
  for (size_t k = 0; k < n && !stopped(); ++k) {
    const size_t index = (next_sentinel_ + k) % n;
    const std::string& address = options_.sentinel.addresses[index];
    std::unique_ptr<RedisSyncClient> sentinel = ConnectSentinel(index);
    if (sentinel == nullptr) {
      why.push_back(absl::StrCat(address, ": unreachable"));
      continue;
    }
    absl::StatusOr<RedisReply> reply =
        sentinel->Run({"SENTINEL", "get-master-addr-by-name", options_.sentinel.master});
    if (!reply.ok()) {
      why.push_back(absl::StrCat(address, ": ", reply.status().message()));
      continue;
    }
    if (reply->is_error() || !reply->is_array() || reply->elements().size() != 2) {
      why.push_back(absl::StrCat(address, ": no master named '", options_.sentinel.master, "'",
                                 reply->is_error() ? absl::StrCat(" (", LogText(reply->str()), ")")
                                                   : ""));
      continue;
    }
    std::optional<int> port = ParsePort(reply->elements()[1].str());
    if (!port.has_value()) {
      why.push_back(absl::StrCat(address, ": a master port that is not a port"));
      continue;
    }
    if (!IsPlausibleHost(reply->elements()[0].str())) {
      why.push_back(absl::StrCat(address, ": a master host that is not a host name ('",
                                 LogText(reply->elements()[0].str(), 64), "')"));
      continue;
    }
    RedisEndpoint master{reply->elements()[0].str(), *port, ""};
    std::string not_master;
    if (!IsMaster(master, &not_master)) {
      why.push_back(absl::StrCat(address, " names ", master.ToString(), ": ", not_master));
      continue;
    }
    next_sentinel_ = index;
    return std::make_pair(std::move(master), index);
  }
  if (!why.empty()) {
    SLUICE_LOG_EVERY_SECONDS(WARNING, 5)
        << "redis sentinel: no master '" << options_.sentinel.master
        << "' confirmed yet: " << absl::StrJoin(why, "; ");
  }
  next_sentinel_ = (next_sentinel_ + 1) % n;
  return std::nullopt;
}

void SentinelWatcher::Report(const RedisEndpoint& master) {
  if (reported_.has_value() && *reported_ == master) {
    return;
  }
  // Once a second at most: a hostile sentinel could name a new master with every message. The
  // host is printable (IsPlausibleHost) by now.
  SLUICE_LOG_EVERY_SECONDS(INFO, 1)
      << "redis sentinel: master '" << options_.sentinel.master << "' is at " << master.ToString();
  reported_ = master;
  {
    MutexLock lock(mu_);
    ++masters_reported_;
  }
  on_master_(master);
}

void SentinelWatcher::Listen(RedisSyncClient& sentinel) {
  if (absl::Status sent = sentinel.Send({"SUBSCRIBE", kSwitchMaster}); !sent.ok()) {
    SLUICE_LOG_EVERY_SECONDS(WARNING, 10) << "redis sentinel: " << sent.message();
    return;
  }
  const absl::Time recheck = absl::Now() + options_.recheck_interval;
  // Short waits, so that Stop and AskAgain are noticed within one of them.
  constexpr absl::Duration kPoll = absl::Milliseconds(100);
  while (!stopped() && absl::Now() < recheck) {
    if (TakeAskAgain()) {
      return;
    }
    absl::StatusOr<std::optional<RedisReply>> message = sentinel.Read(kPoll);
    if (!message.ok()) {
      SLUICE_LOG_EVERY_SECONDS(WARNING, 10) << "redis sentinel: " << message.status().message();
      return;
    }
    if (!message->has_value()) {
      continue;
    }
    const RedisReply& push = **message;
    // ["message", "+switch-master", "<name> <old-ip> <old-port> <new-ip> <new-port>"]
    if (!push.is_array() || push.elements().size() != 3 ||
        push.elements()[0].str() != "message") {
      continue;  // the subscription's confirmation
    }
    std::vector<std::string> fields = absl::StrSplit(push.elements()[2].str(), ' ');
    if (fields.size() != 5 || fields[0] != options_.sentinel.master) {
      continue;  // another master's failover
    }
    std::optional<int> port = ParsePort(fields[4]);
    if (!port.has_value() || !IsPlausibleHost(fields[3])) {
      continue;
    }
    SLUICE_LOG_EVERY_SECONDS(INFO, 1)
        << "redis sentinel: failover of '" << fields[0] << "' from " << LogText(fields[1], 64)
        << ":" << LogText(fields[2], 16) << " to " << fields[3] << ":" << fields[4];
    Report(RedisEndpoint{fields[3], *port, ""});
  }
}

}  // namespace sluice
