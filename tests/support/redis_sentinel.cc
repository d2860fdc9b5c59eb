#include "tests/support/redis_sentinel.h"

#include <functional>
#include <map>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace sluice::testing {
namespace {

// Polling interval while waiting for the deployment to converge: there is no event to wait on.
constexpr std::chrono::milliseconds kPoll{20};
constexpr std::chrono::milliseconds kQueryTimeout{1000};

using Fields = std::map<std::string, std::string, std::less<>>;

// The records of a key/value reply as RedisServer::Command renders it (one line per element,
// nested arrays flattened): SENTINEL MASTER is one record; SENTINEL REPLICAS is one per
// replica, each beginning with its "name" field.
std::vector<Fields> ParseRecords(absl::string_view rendered) {
  std::vector<Fields> records;
  std::vector<absl::string_view> lines = absl::StrSplit(rendered, '\n');
  for (size_t i = 0; i + 1 < lines.size(); i += 2) {
    if (lines[i] == "name" || records.empty()) {
      records.emplace_back();
    }
    records.back().emplace(lines[i], lines[i + 1]);
  }
  return records;
}

// The "key:value" lines of an INFO reply.
Fields ParseInfo(absl::string_view info) {
  Fields fields;
  for (absl::string_view line : absl::StrSplit(info, '\n', absl::SkipWhitespace())) {
    line = absl::StripTrailingAsciiWhitespace(line);
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(line, absl::MaxSplits(':', 1));
    fields.emplace(kv.first, kv.second);
  }
  return fields;
}

std::string Field(const Fields& fields, absl::string_view key) {
  auto it = fields.find(key);
  return it != fields.end() ? it->second : std::string();
}

std::string Join(const std::string& ip, const std::string& port) {
  return absl::StrCat(ip, ":", port);
}

std::chrono::milliseconds Left(std::chrono::steady_clock::time_point deadline) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                               std::chrono::steady_clock::now());
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisSentinelDeployment>> RedisSentinelDeployment::Start(
    RedisSentinelDeploymentOptions options) {
  if (options.quorum < 1 || options.sentinels < options.quorum) {
    return absl::InvalidArgumentError(absl::StrCat("need 1 <= quorum (", options.quorum,
                                                   ") <= sentinels (", options.sentinels, ")"));
  }
  if (options.info_period_ms <= 0 || options.publish_period_ms <= 0) {
    return absl::InvalidArgumentError("the sentinels' info and publish periods must be positive");
  }
  if (options.tls.enabled && options.tls.ca_file.empty()) {
    return absl::InvalidArgumentError("TLS needs tls.ca_file: the processes verify each other");
  }
  if (options.master_name.empty() ||
      options.master_name.find_first_of(" \t\r\n\"'") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("master name '", options.master_name, "' cannot go into sentinel.conf"));
  }
  std::unique_ptr<RedisSentinelDeployment> deployment(
      new RedisSentinelDeployment(std::move(options)));
  if (absl::Status status = deployment->Launch(); !status.ok()) {
    return status;
  }
  return deployment;
}

RedisSentinelDeployment::RedisSentinelDeployment(RedisSentinelDeploymentOptions options)
    : options_(std::move(options)) {}

RedisSentinelDeployment::~RedisSentinelDeployment() {
  // Sentinels first, so that none reconfigures a server that is going away.
  sentinels_.clear();
}

absl::Status RedisSentinelDeployment::Launch() {
  auto deadline = std::chrono::steady_clock::now() + options_.start_timeout;
  const bool tls = options_.tls.enabled;
  auto with_tls = [&](RedisServerOptions& server_options) {
    if (tls) {
      server_options.tls = options_.tls;
      server_options.tls.port = 0;
      server_options.tls.plain_port = true;
      // Outgoing links over TLS too: a replica's to its master, a sentinel's to the servers and
      // to the other sentinels; and each announces its TLS port to the others.
      server_options.extra_config.push_back("tls-replication yes");
    }
  };

  for (size_t i = 0; i < 2; ++i) {
    RedisServerOptions server_options;
    server_options.start_timeout = Left(deadline);
    server_options.password = options_.master_password;
    // The replica syncs at once instead of waiting 5 s for more replicas to join the transfer.
    server_options.extra_config = {"repl-diskless-sync-delay 0"};
    if (!options_.master_password.empty()) {
      // Either server may become the other's replica.
      server_options.extra_config.push_back(absl::StrCat("masterauth ", options_.master_password));
    }
    with_tls(server_options);
    if (i == 1) {
      const RedisServer& master = *servers_[0];
      server_options.extra_config.push_back(
          absl::StrCat("replicaof 127.0.0.1 ", tls ? master.tls_port() : master.port()));
    }
    absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start(server_options);
    if (!server.ok()) {
      return server.status();
    }
    servers_[i] = *std::move(server);
  }

  const std::string& name = options_.master_name;
  const RedisServer& master = *servers_[0];
  for (int i = 0; i < options_.sentinels; ++i) {
    RedisServerOptions sentinel_options;
    sentinel_options.start_timeout = Left(deadline);
    sentinel_options.arguments = {"--sentinel"};
    sentinel_options.password = options_.sentinel_password;
    with_tls(sentinel_options);
    std::vector<std::string>& config = sentinel_options.extra_config;
    config.push_back("sentinel resolve-hostnames no");
    // Under TLS the sentinel speaks TLS to whatever it monitors: the master's TLS port.
    config.push_back(absl::StrCat("sentinel monitor ", name, " 127.0.0.1 ",
                                  tls ? master.tls_port() : master.port(), " ", options_.quorum));
    config.push_back(
        absl::StrCat("sentinel down-after-milliseconds ", name, " ", options_.down_after_ms));
    config.push_back(
        absl::StrCat("sentinel failover-timeout ", name, " ", options_.failover_timeout_ms));
    config.push_back(absl::StrCat("sentinel parallel-syncs ", name, " 1"));
    if (!options_.master_password.empty()) {
      config.push_back(absl::StrCat("sentinel auth-pass ", name, " ", options_.master_password));
    }
    absl::StatusOr<std::unique_ptr<RedisServer>> sentinel = RedisServer::Start(sentinel_options);
    if (!sentinel.ok()) {
      return sentinel.status();
    }
    sentinels_.push_back(*std::move(sentinel));
    absl::StatusOr<std::string> timers = sentinels_.back()->Command(
        {"SENTINEL", "DEBUG", "INFO-PERIOD", absl::StrCat(options_.info_period_ms),
         "PUBLISH-PERIOD", absl::StrCat(options_.publish_period_ms)});
    if (!timers.ok()) {
      return timers.status();
    }
  }
  return WaitUntilReplicaSynced(Left(deadline));
}

std::string RedisSentinelDeployment::MonitoredAddress(const RedisServer& server) const {
  return options_.tls.enabled ? server.tls_address() : server.address();
}

std::string RedisSentinelDeployment::SentinelAddress(size_t index) const {
  return sentinels_[index]->address();
}

std::string RedisSentinelDeployment::SentinelTlsAddress(size_t index) const {
  return sentinels_[index]->tls_address();
}

std::vector<std::string> RedisSentinelDeployment::SentinelAddresses() const {
  std::vector<std::string> addresses;
  for (size_t i = 0; i < sentinels_.size(); ++i) {
    addresses.push_back(options_.tls.enabled ? SentinelTlsAddress(i) : SentinelAddress(i));
  }
  return addresses;
}

std::vector<size_t> RedisSentinelDeployment::LiveSentinels() {
  std::vector<size_t> live;
  for (size_t i = 0; i < sentinels_.size(); ++i) {
    if (sentinels_[i]->running()) {
      live.push_back(i);
    }
  }
  return live;
}

absl::StatusOr<std::string> RedisSentinelDeployment::SentinelCommand(
    size_t index, const std::vector<std::string>& args, std::chrono::milliseconds timeout) {
  if (index >= sentinels_.size()) {
    return absl::OutOfRangeError(absl::StrCat("no sentinel number ", index));
  }
  return sentinels_[index]->Command(args, timeout);
}

absl::StatusOr<std::string> RedisSentinelDeployment::MasterAddressAsSeenBy(size_t index) {
  absl::StatusOr<std::string> reply = SentinelCommand(
      index, {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", options_.master_name}, kQueryTimeout);
  if (!reply.ok()) {
    return reply.status();
  }
  std::vector<std::string> parts = absl::StrSplit(*reply, '\n');
  if (parts.size() != 2) {
    return absl::NotFoundError(absl::StrCat("sentinel ", SentinelAddress(index), " answered '",
                                            *reply, "' for ", options_.master_name));
  }
  return Join(parts[0], parts[1]);
}

absl::StatusOr<std::string> RedisSentinelDeployment::MasterAddressAsSentinelsSee() {
  std::vector<std::string> views;
  std::string agreed;
  bool disagree = false;
  for (size_t i : LiveSentinels()) {
    absl::StatusOr<std::string> address = MasterAddressAsSeenBy(i);
    if (!address.ok()) {
      return address.status();
    }
    views.push_back(absl::StrCat(SentinelAddress(i), " names ", *address));
    if (agreed.empty()) {
      agreed = *address;
    } else if (agreed != *address) {
      disagree = true;
    }
  }
  if (views.empty()) {
    return absl::UnavailableError("no live sentinel");
  }
  if (disagree) {
    return absl::UnavailableError(absl::StrCat("sentinels disagree: ", absl::StrJoin(views, "; ")));
  }
  return agreed;
}

void RedisSentinelDeployment::KillMaster() {
  master()->Kill();
  killed_ = master();
}

absl::Status RedisSentinelDeployment::CheckFailedOver() {
  const std::string expected = MonitoredAddress(*replica());
  for (size_t i : LiveSentinels()) {
    absl::StatusOr<std::string> address = MasterAddressAsSeenBy(i);
    if (!address.ok()) {
      return address.status();
    }
    if (*address != expected) {
      return absl::UnavailableError(
          absl::StrCat("sentinel ", SentinelAddress(i), " names ", *address, ", not ", expected));
    }
  }
  absl::StatusOr<std::string> role = replica()->Command({"ROLE"}, kQueryTimeout);
  if (!role.ok()) {
    return role.status();
  }
  if (!absl::StartsWith(*role, "master\n")) {
    return absl::UnavailableError(absl::StrCat(expected, " is named, but its ROLE is ",
                                               absl::StrReplaceAll(*role, {{"\n", " "}})));
  }
  return absl::OkStatus();
}

absl::Status RedisSentinelDeployment::WaitForFailover(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  absl::Status last = absl::DeadlineExceededError("not checked yet");
  while (true) {
    last = CheckFailedOver();
    if (last.ok()) {
      master_index_ = 1 - master_index_;
      return absl::OkStatus();
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      break;
    }
    std::this_thread::sleep_for(kPoll);
  }
  return absl::DeadlineExceededError(
      absl::StrCat("no failover to ", MonitoredAddress(*replica()), " in time: ", last.ToString()));
}

absl::Status RedisSentinelDeployment::ForceFailover(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<size_t> live = LiveSentinels();
  if (live.empty()) {
    return absl::UnavailableError("no live sentinel");
  }
  absl::StatusOr<std::string> reply =
      SentinelCommand(live.front(), {"SENTINEL", "FAILOVER", options_.master_name});
  if (!reply.ok()) {
    return reply.status();
  }
  return WaitForFailover(Left(deadline));
}

absl::Status RedisSentinelDeployment::RestartOldMaster() {
  if (killed_ == nullptr) {
    return absl::FailedPreconditionError("no master killed by KillMaster is down");
  }
  RedisServer* server = killed_;
  killed_ = nullptr;
  return server->Restart();
}

absl::Status RedisSentinelDeployment::CheckSettled() {
  const std::string master_address = MonitoredAddress(*master());
  const std::string replica_address = MonitoredAddress(*replica());
  absl::StatusOr<std::string> info = replica()->Command({"INFO", "replication"}, kQueryTimeout);
  if (!info.ok()) {
    return info.status();
  }
  Fields replication = ParseInfo(*info);
  std::string following =
      Join(Field(replication, "master_host"), Field(replication, "master_port"));
  if (Field(replication, "role") != "slave" || following != master_address ||
      Field(replication, "master_link_status") != "up") {
    return absl::UnavailableError(
        absl::StrCat(replica_address, " is not yet a synced replica of ", master_address,
                     ": role:", Field(replication, "role"), " of ", following,
                     " master_link_status:", Field(replication, "master_link_status")));
  }
  const std::string expected_others = absl::StrCat(sentinels_.size() - 1);
  std::set<std::string> live_addresses;
  for (size_t i : LiveSentinels()) {
    live_addresses.insert(MonitoredAddress(*sentinels_[i]));
  }
  for (size_t i : LiveSentinels()) {
    const std::string who = absl::StrCat("sentinel ", SentinelAddress(i));
    absl::StatusOr<std::string> master_reply =
        SentinelCommand(i, {"SENTINEL", "MASTER", options_.master_name}, kQueryTimeout);
    if (!master_reply.ok()) {
      return master_reply.status();
    }
    std::vector<Fields> records = ParseRecords(*master_reply);
    if (records.size() != 1) {
      return absl::UnavailableError(
          absl::StrCat(who, " answered SENTINEL MASTER with ", records.size(), " records"));
    }
    const Fields& m = records.front();
    std::string seen = Join(Field(m, "ip"), Field(m, "port"));
    if (seen != master_address || Field(m, "flags") != "master" ||
        Field(m, "num-other-sentinels") != expected_others || Field(m, "num-slaves").empty() ||
        Field(m, "num-slaves") == "0") {
      return absl::UnavailableError(
          absl::StrCat(who, " sees master ", seen, " flags ", Field(m, "flags"), " with ",
                       Field(m, "num-slaves"), " replicas and ", Field(m, "num-other-sentinels"),
                       " other sentinels; want ", master_address, " flags master, 1 replica and ",
                       expected_others, " other sentinels"));
    }
    absl::StatusOr<std::string> sentinels_reply =
        SentinelCommand(i, {"SENTINEL", "SENTINELS", options_.master_name}, kQueryTimeout);
    if (!sentinels_reply.ok()) {
      return sentinels_reply.status();
    }
    // Known is not enough: a failover needs the votes of the others, over these links. (A
    // sentinel a test killed stays known, as down.)
    for (const Fields& s : ParseRecords(*sentinels_reply)) {
      if (live_addresses.count(Join(Field(s, "ip"), Field(s, "port"))) != 0 &&
          Field(s, "flags") != "sentinel") {
        return absl::UnavailableError(absl::StrCat(who, " sees sentinel ", Field(s, "ip"), ":",
                                                   Field(s, "port"), " flags ", Field(s, "flags")));
      }
    }
    absl::StatusOr<std::string> replicas_reply =
        SentinelCommand(i, {"SENTINEL", "REPLICAS", options_.master_name}, kQueryTimeout);
    if (!replicas_reply.ok()) {
      return replicas_reply.status();
    }
    bool healthy = false;
    std::string views;
    for (const Fields& r : ParseRecords(*replicas_reply)) {
      std::string address = Join(Field(r, "ip"), Field(r, "port"));
      absl::StrAppend(&views, " ", address, " flags ", Field(r, "flags"), " master-link-status ",
                      Field(r, "master-link-status"), ";");
      // What SENTINEL FAILOVER needs of a replica: reachable, not down, and synced.
      if (address == replica_address && Field(r, "flags") == "slave" &&
          Field(r, "master-link-status") == "ok") {
        healthy = true;
      }
    }
    if (!healthy) {
      return absl::UnavailableError(
          absl::StrCat(who, " does not list ", replica_address, " as a healthy replica:", views));
    }
  }
  return absl::OkStatus();
}

absl::Status RedisSentinelDeployment::WaitUntilReplicaSynced(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  absl::Status last = absl::DeadlineExceededError("not checked yet");
  while (true) {
    last = CheckSettled();
    if (last.ok()) {
      return absl::OkStatus();
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      break;
    }
    std::this_thread::sleep_for(kPoll);
  }
  return absl::DeadlineExceededError(
      absl::StrCat("the Sentinel deployment did not settle in time: ", last.ToString()));
}

}  // namespace sluice::testing
