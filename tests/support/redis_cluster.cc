#include "tests/support/redis_cluster.h"

#include <sys/wait.h>

#include <algorithm>
#include <map>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tests/support/process.h"

namespace sluice::testing {
namespace {

constexpr int kSlots = 16384;
// Polling interval while waiting for the cluster to converge: there is no event to wait on.
constexpr std::chrono::milliseconds kPoll{20};
constexpr std::chrono::milliseconds kQueryTimeout{1000};

// slot -> owner address, as one node's view says; "" for unassigned.
std::vector<std::string> OwnersOf(const std::vector<ClusterNodeInfo>& nodes) {
  std::vector<std::string> owners(kSlots);
  for (const ClusterNodeInfo& node : nodes) {
    for (auto [first, last] : node.slots) {
      for (int slot = first; slot <= last && slot < kSlots; ++slot) {
        owners[static_cast<size_t>(slot)] = node.address;
      }
    }
  }
  return owners;
}

const ClusterNodeInfo* FindByAddress(const std::vector<ClusterNodeInfo>& nodes,
                                     const std::string& address) {
  for (const ClusterNodeInfo& node : nodes) {
    if (node.address == address) {
      return &node;
    }
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<std::vector<ClusterNodeInfo>> ParseClusterNodes(const std::string& text) {
  std::vector<ClusterNodeInfo> nodes;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (fields.size() < 8) {
      return absl::InvalidArgumentError(absl::StrCat("bad CLUSTER NODES line: ", line));
    }
    ClusterNodeInfo node;
    node.id = std::string(fields[0]);
    absl::string_view endpoint = fields[1];
    node.address = std::string(endpoint.substr(0, endpoint.find('@')));
    for (absl::string_view flag : absl::StrSplit(fields[2], ',')) {
      if (flag == "master") {
        node.master = true;
      } else if (flag == "fail" || flag == "fail?") {
        node.failed = true;
      }
    }
    if (fields[3] != "-") {
      node.master_id = std::string(fields[3]);
    }
    for (size_t k = 8; k < fields.size(); ++k) {
      absl::string_view range = fields[k];
      if (absl::StartsWith(range, "[")) {
        continue;  // an importing/migrating marker, not a served range
      }
      std::vector<absl::string_view> ends = absl::StrSplit(range, '-');
      int first = 0;
      int last = 0;
      if (!absl::SimpleAtoi(ends[0], &first) ||
          !absl::SimpleAtoi(ends.size() > 1 ? ends[1] : ends[0], &last)) {
        return absl::InvalidArgumentError(absl::StrCat("bad slot range in: ", line));
      }
      node.slots.emplace_back(first, last);
    }
    nodes.push_back(std::move(node));
  }
  return nodes;
}

absl::StatusOr<std::unique_ptr<RedisCluster>> RedisCluster::Start(RedisClusterOptions options) {
  std::unique_ptr<RedisCluster> cluster(new RedisCluster(std::move(options)));
  if (absl::Status status = cluster->Create(); !status.ok()) {
    return status;
  }
  return cluster;
}

RedisCluster::~RedisCluster() = default;

absl::Status RedisCluster::Create() {
  auto deadline = std::chrono::steady_clock::now() + options_.start_timeout;
  int count = options_.masters * (1 + options_.replicas_per_master);
  for (int i = 0; i < count; ++i) {
    RedisServerOptions server_options;
    server_options.extra_config = {
        "cluster-enabled yes",
        "cluster-config-file nodes.conf",
        absl::StrCat("cluster-node-timeout ", options_.node_timeout_ms),
        // Replicas sync at once instead of waiting 5 s for more replicas to join the transfer.
        "repl-diskless-sync-delay 0",
    };
    if (options_.tls.enabled) {
      server_options.tls = options_.tls;
      server_options.tls.port = 0;
      server_options.tls.plain_port = true;
      server_options.extra_config.push_back(
          absl::StrCat("tls-cluster ", options_.tls_cluster_bus ? "yes" : "no"));
      server_options.extra_config.push_back(
          absl::StrCat("tls-replication ", options_.tls_replication ? "yes" : "no"));
    }
    server_options.extra_config.insert(server_options.extra_config.end(),
                                       options_.extra_config.begin(), options_.extra_config.end());
    absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start(server_options);
    if (!server.ok()) {
      return server.status();
    }
    servers_.push_back(*std::move(server));
  }
  std::vector<std::string> argv = {"redis-cli", "--cluster", "create"};
  for (const auto& server : servers_) {
    argv.push_back(server->address());
  }
  argv.insert(argv.end(),
              {"--cluster-replicas", absl::StrCat(options_.replicas_per_master), "--cluster-yes"});
  std::string log_path = servers_[0]->dir() + "/cluster-create.log";
  ChildProcess cli(argv, log_path);
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  int status = cli.Stop(0, left);  // signal 0: just wait for it to finish
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(
        absl::StrCat("redis-cli --cluster create failed (status ", status, "):\n", cli.ReadLog()));
  }
  left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                               std::chrono::steady_clock::now());
  return WaitUntilHealthy(left);
}

std::vector<std::string> RedisCluster::SeedAddresses() const {
  std::vector<std::string> addresses;
  for (const auto& server : servers_) {
    addresses.push_back(server->address());
  }
  return addresses;
}

std::vector<std::string> RedisCluster::LiveAddresses() const {
  std::vector<std::string> addresses;
  for (const auto& server : servers_) {
    if (server->running()) {
      addresses.push_back(server->address());
    }
  }
  return addresses;
}

std::vector<std::string> RedisCluster::TlsSeedAddresses() const {
  std::vector<std::string> addresses;
  for (const auto& server : servers_) {
    if (server->tls_port() != 0) {
      addresses.push_back(server->tls_address());
    }
  }
  return addresses;
}

std::string RedisCluster::TlsAddressOf(const std::string& address) const {
  RedisServer* server = ServerAt(address);
  return server != nullptr ? server->tls_address() : std::string();
}

RedisServer* RedisCluster::ServerAt(const std::string& address) const {
  for (const auto& server : servers_) {
    if (server->address() == address ||
        (server->tls_port() != 0 && server->tls_address() == address)) {
      return server.get();
    }
  }
  return nullptr;
}

absl::StatusOr<std::string> RedisCluster::Command(const std::string& address,
                                                  const std::vector<std::string>& args) {
  RedisServer* server = ServerAt(address);
  if (server == nullptr) {
    return absl::NotFoundError(absl::StrCat("no cluster node at ", address));
  }
  return server->Command(args);
}

absl::StatusOr<std::vector<ClusterNodeInfo>> RedisCluster::NodesAsSeenBy(
    const std::string& address) {
  RedisServer* server = ServerAt(address);
  if (server == nullptr) {
    return absl::NotFoundError(absl::StrCat("no cluster node at ", address));
  }
  absl::StatusOr<std::string> text = server->Command({"CLUSTER", "NODES"}, kQueryTimeout);
  if (!text.ok()) {
    return text.status();
  }
  return ParseClusterNodes(*text);
}

absl::StatusOr<std::vector<ClusterNodeInfo>> RedisCluster::Nodes() {
  absl::Status last = absl::UnavailableError("no live node");
  for (const std::string& address : LiveAddresses()) {
    absl::StatusOr<std::vector<ClusterNodeInfo>> nodes = NodesAsSeenBy(address);
    if (nodes.ok()) {
      return nodes;
    }
    last = nodes.status();
  }
  return last;
}

absl::StatusOr<std::vector<std::string>> RedisCluster::Masters() {
  absl::StatusOr<std::vector<ClusterNodeInfo>> nodes = Nodes();
  if (!nodes.ok()) {
    return nodes.status();
  }
  std::vector<std::pair<int, std::string>> masters;
  for (const ClusterNodeInfo& node : *nodes) {
    if (node.master && !node.failed && !node.slots.empty()) {
      int first = kSlots;
      for (auto [a, b] : node.slots) {
        first = std::min(first, a);
      }
      masters.emplace_back(first, node.address);
    }
  }
  std::sort(masters.begin(), masters.end());
  std::vector<std::string> addresses;
  for (auto& [first, address] : masters) {
    addresses.push_back(address);
  }
  return addresses;
}

absl::StatusOr<std::string> RedisCluster::MasterForSlot(int slot) {
  absl::StatusOr<std::vector<ClusterNodeInfo>> nodes = Nodes();
  if (!nodes.ok()) {
    return nodes.status();
  }
  std::string owner = OwnersOf(*nodes)[static_cast<size_t>(slot)];
  if (owner.empty()) {
    return absl::NotFoundError(absl::StrCat("slot ", slot, " is not served"));
  }
  return owner;
}

absl::StatusOr<int> RedisCluster::KeySlot(const std::string& key) {
  for (const std::string& address : LiveAddresses()) {
    absl::StatusOr<std::string> slot = Command(address, {"CLUSTER", "KEYSLOT", key});
    if (!slot.ok()) {
      return slot.status();
    }
    int value = 0;
    if (!absl::SimpleAtoi(*slot, &value)) {
      return absl::InternalError(absl::StrCat("CLUSTER KEYSLOT answered ", *slot));
    }
    return value;
  }
  return absl::UnavailableError("no live node");
}

absl::Status RedisCluster::KillNode(const std::string& address) {
  RedisServer* server = ServerAt(address);
  if (server == nullptr) {
    return absl::NotFoundError(absl::StrCat("no cluster node at ", address));
  }
  // Remember one slot it served, to find who serves it after the failover.
  absl::StatusOr<std::vector<ClusterNodeInfo>> nodes = Nodes();
  if (nodes.ok()) {
    if (const ClusterNodeInfo* node = FindByAddress(*nodes, address);
        node != nullptr && !node->slots.empty()) {
      killed_slot_.emplace_back(address, node->slots.front().first);
    }
  }
  server->Kill();
  return absl::OkStatus();
}

absl::StatusOr<std::string> RedisCluster::KillMaster(int index) {
  absl::StatusOr<std::vector<std::string>> masters = Masters();
  if (!masters.ok()) {
    return masters.status();
  }
  if (index < 0 || static_cast<size_t>(index) >= masters->size()) {
    return absl::OutOfRangeError(absl::StrCat("no master number ", index));
  }
  std::string address = (*masters)[static_cast<size_t>(index)];
  if (absl::Status status = KillNode(address); !status.ok()) {
    return status;
  }
  return address;
}

absl::StatusOr<std::string> RedisCluster::WaitForPromotion(const std::string& dead_master,
                                                           std::chrono::milliseconds timeout) {
  auto killed = std::find_if(killed_slot_.begin(), killed_slot_.end(),
                             [&](const auto& entry) { return entry.first == dead_master; });
  if (killed == killed_slot_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat(dead_master, " was not a master killed with KillNode"));
  }
  int slot = killed->second;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  absl::Status last = absl::DeadlineExceededError("not checked yet");
  while (std::chrono::steady_clock::now() < deadline) {
    // Healthy means every slot has one agreed, live master: so has the dead master's.
    last = CheckHealthy();
    if (last.ok()) {
      absl::StatusOr<std::string> owner = MasterForSlot(slot);
      if (owner.ok() && *owner != dead_master) {
        return owner;
      }
      last = owner.ok()
                 ? absl::UnavailableError(absl::StrCat("slot ", slot, " still on ", dead_master))
                 : owner.status();
    }
    std::this_thread::sleep_for(kPoll);
  }
  return absl::DeadlineExceededError(
      absl::StrCat("no promotion replacing ", dead_master, " in time: ", last.ToString()));
}

absl::Status RedisCluster::BeginSlotMigration(int slot, const std::string& to) {
  absl::StatusOr<std::vector<ClusterNodeInfo>> nodes = Nodes();
  if (!nodes.ok()) {
    return nodes.status();
  }
  std::string from = OwnersOf(*nodes)[static_cast<size_t>(slot)];
  const ClusterNodeInfo* source = FindByAddress(*nodes, from);
  const ClusterNodeInfo* target = FindByAddress(*nodes, to);
  if (source == nullptr || target == nullptr || from == to) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot migrate slot ", slot, " from '", from, "' to '", to, "'"));
  }
  std::string s = absl::StrCat(slot);
  absl::StatusOr<std::string> importing =
      Command(to, {"CLUSTER", "SETSLOT", s, "IMPORTING", source->id});
  if (!importing.ok()) {
    return importing.status();
  }
  absl::StatusOr<std::string> migrating =
      Command(from, {"CLUSTER", "SETSLOT", s, "MIGRATING", target->id});
  if (!migrating.ok()) {
    return migrating.status();
  }
  migrating_.emplace_back(slot, from);
  return absl::OkStatus();
}

absl::Status RedisCluster::MigrateSlotKeys(int slot, const std::string& to) {
  auto entry = std::find_if(migrating_.begin(), migrating_.end(),
                            [&](const auto& e) { return e.first == slot; });
  if (entry == migrating_.end()) {
    return absl::FailedPreconditionError(absl::StrCat("slot ", slot, " is not migrating"));
  }
  const std::string from = entry->second;
  // Under tls-cluster, MIGRATE connects to the target with TLS.
  const std::string target =
      options_.tls.enabled && options_.tls_cluster_bus ? TlsAddressOf(to) : to;
  size_t colon = target.rfind(':');
  std::string host = target.substr(0, colon);
  std::string port = target.substr(colon + 1);
  std::string s = absl::StrCat(slot);
  for (;;) {
    absl::StatusOr<std::string> keys = Command(from, {"CLUSTER", "GETKEYSINSLOT", s, "100"});
    if (!keys.ok()) {
      return keys.status();
    }
    if (keys->empty()) {
      return absl::OkStatus();
    }
    std::vector<std::string> args = {"MIGRATE", host, port, "", "0", "5000", "KEYS"};
    for (absl::string_view key : absl::StrSplit(*keys, '\n')) {
      args.emplace_back(key);
    }
    absl::StatusOr<std::string> migrated = Command(from, args);
    if (!migrated.ok()) {
      return migrated.status();
    }
  }
}

absl::Status RedisCluster::FinishSlotMigration(int slot, const std::string& to) {
  auto entry = std::find_if(migrating_.begin(), migrating_.end(),
                            [&](const auto& e) { return e.first == slot; });
  if (entry == migrating_.end()) {
    return absl::FailedPreconditionError(absl::StrCat("slot ", slot, " is not migrating"));
  }
  const std::string from = entry->second;
  absl::StatusOr<std::vector<ClusterNodeInfo>> nodes = Nodes();
  if (!nodes.ok()) {
    return nodes.status();
  }
  const ClusterNodeInfo* target = FindByAddress(*nodes, to);
  if (target == nullptr) {
    return absl::NotFoundError(absl::StrCat("no cluster node at ", to));
  }
  std::string s = absl::StrCat(slot);
  // The target first, then the source, then the other masters, as the specification says.
  std::vector<std::string> order = {to, from};
  for (const ClusterNodeInfo& node : *nodes) {
    if (node.master && !node.failed && node.address != to && node.address != from &&
        ServerAt(node.address) != nullptr && ServerAt(node.address)->running()) {
      order.push_back(node.address);
    }
  }
  for (const std::string& address : order) {
    absl::StatusOr<std::string> done =
        Command(address, {"CLUSTER", "SETSLOT", s, "NODE", target->id});
    if (!done.ok()) {
      return absl::Status(done.status().code(),
                          absl::StrCat("SETSLOT NODE on ", address, ": ", done.status().message()));
    }
  }
  migrating_.erase(entry);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::string disagreeing;
  while (std::chrono::steady_clock::now() < deadline) {
    disagreeing.clear();
    for (const std::string& address : LiveAddresses()) {
      absl::StatusOr<std::vector<ClusterNodeInfo>> view = NodesAsSeenBy(address);
      if (!view.ok() || OwnersOf(*view)[static_cast<size_t>(slot)] != to) {
        disagreeing = address;
        break;
      }
    }
    if (disagreeing.empty()) {
      return absl::OkStatus();
    }
    std::this_thread::sleep_for(kPoll);
  }
  return absl::DeadlineExceededError(
      absl::StrCat("node ", disagreeing, " never learned that slot ", slot, " moved to ", to));
}

absl::Status RedisCluster::MoveSlot(int slot, const std::string& to) {
  if (absl::Status status = BeginSlotMigration(slot, to); !status.ok()) {
    return status;
  }
  if (absl::Status status = MigrateSlotKeys(slot, to); !status.ok()) {
    return status;
  }
  return FinishSlotMigration(slot, to);
}

absl::Status RedisCluster::ScriptFlushAll() {
  for (const std::string& address : LiveAddresses()) {
    absl::StatusOr<std::string> flushed = Command(address, {"SCRIPT", "FLUSH"});
    if (!flushed.ok()) {
      return flushed.status();
    }
  }
  return absl::OkStatus();
}

absl::Status RedisCluster::CheckHealthy() {
  std::vector<std::string> live = LiveAddresses();
  std::vector<std::string> agreed;
  // address -> master, as the first view says. Every view, each node's own included, must agree:
  // a node whose view still calls a new replica a master sends it what only masters take.
  std::map<std::string, bool> agreed_roles;
  for (const std::string& address : live) {
    RedisServer* server = ServerAt(address);
    absl::StatusOr<std::string> info = server->Command({"CLUSTER", "INFO"}, kQueryTimeout);
    if (!info.ok()) {
      return info.status();
    }
    if (!absl::StrContains(*info, "cluster_state:ok")) {
      return absl::UnavailableError(absl::StrCat(address, ": cluster_state is not ok"));
    }
    absl::StatusOr<std::vector<ClusterNodeInfo>> view = NodesAsSeenBy(address);
    if (!view.ok()) {
      return view.status();
    }
    for (const std::string& other : live) {
      const ClusterNodeInfo* node = FindByAddress(*view, other);
      if (node == nullptr || node->failed) {
        return absl::UnavailableError(
            absl::StrCat(address, " does not see ", other, " as a healthy node"));
      }
      auto [role, first] = agreed_roles.emplace(other, node->master);
      if (!first && role->second != node->master) {
        return absl::UnavailableError(absl::StrCat(address, " sees ", other, " as a ",
                                                   node->master ? "master" : "replica", ", ",
                                                   live.front(), " does not"));
      }
    }
    std::vector<std::string> owners = OwnersOf(*view);
    for (int slot = 0; slot < kSlots; ++slot) {
      const std::string& owner = owners[static_cast<size_t>(slot)];
      if (owner.empty() || std::find(live.begin(), live.end(), owner) == live.end()) {
        return absl::UnavailableError(
            absl::StrCat(address, " sees slot ", slot, " served by '", owner, "'"));
      }
    }
    if (agreed.empty()) {
      agreed = std::move(owners);
    } else if (agreed != owners) {
      return absl::UnavailableError(
          absl::StrCat(address, " disagrees with ", live.front(), " on slot owners"));
    }
    absl::StatusOr<std::string> replication =
        server->Command({"INFO", "replication"}, kQueryTimeout);
    if (!replication.ok()) {
      return replication.status();
    }
    if (absl::StrContains(*replication, "role:slave") &&
        !absl::StrContains(*replication, "master_link_status:up")) {
      return absl::UnavailableError(absl::StrCat(address, ": replica not synced with its master"));
    }
  }
  return absl::OkStatus();
}

absl::Status RedisCluster::WaitUntilHealthy(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  absl::Status last = CheckHealthy();
  while (!last.ok() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(kPoll);
    last = CheckHealthy();
  }
  if (!last.ok()) {
    return absl::DeadlineExceededError(
        absl::StrCat("redis cluster not healthy in time: ", last.ToString()));
  }
  return absl::OkStatus();
}

}  // namespace sluice::testing
