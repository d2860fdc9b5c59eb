#include "tests/support/net_namespace.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/support/paths.h"

namespace sluice::testing {
namespace {

// sluice-netdelay, built beside the other test tools.
std::string NetDelayPath() { return BinaryDir() + "/bin/sluice-netdelay"; }

}  // namespace

absl::StatusOr<std::unique_ptr<NetNamespace>> NetNamespace::Create() {
  static std::atomic<int> created{0};
  // A name and a /30 per process and namespace, so concurrent test binaries do not collide.
  const int key = (static_cast<int>(getpid()) * 4 + created.fetch_add(1)) % 16384;
  auto ns = std::unique_ptr<NetNamespace>(new NetNamespace());
  ns->name_ = absl::StrCat("sluice-", getpid(), "-", key);
  ns->host_interface_ = absl::StrCat("sl", key, "h");
  ns->inner_interface_ = absl::StrCat("sl", key, "n");
  const std::string prefix = absl::StrCat("10.213.", key / 64, ".");
  ns->host_address_ = absl::StrCat(prefix, (key % 64) * 4 + 1);
  ns->inner_address_ = absl::StrCat(prefix, (key % 64) * 4 + 2);

  // Leftovers of a crashed run with the same key go first.
  RunCommand(absl::StrCat("ip link del ", ns->host_interface_, " 2>/dev/null; ip netns del ",
                          ns->name_, " 2>/dev/null"));
  const std::string in_ns = absl::StrCat("ip netns exec ", ns->name_, " ");
  for (const std::string& command : {
           absl::StrCat("ip netns add ", ns->name_),
           absl::StrCat("ip link add ", ns->host_interface_, " type veth peer name ",
                        ns->inner_interface_),
           absl::StrCat("ip link set ", ns->inner_interface_, " netns ", ns->name_),
           absl::StrCat("ip addr add ", ns->host_address_, "/30 dev ", ns->host_interface_),
           absl::StrCat("ip link set ", ns->host_interface_, " up"),
           absl::StrCat(in_ns, "ip addr add ", ns->inner_address_, "/30 dev ",
                        ns->inner_interface_),
           absl::StrCat(in_ns, "ip link set ", ns->inner_interface_, " up"),
           absl::StrCat(in_ns, "ip link set lo up"),
       }) {
    if (absl::Status status = ns->Run(command); !status.ok()) {
      return status;
    }
  }
  return ns;
}

NetNamespace::~NetNamespace() {
  delayer_.reset();
  RunCommand(absl::StrCat("ip link del ", host_interface_, " 2>/dev/null; ip netns del ", name_,
                          " 2>/dev/null"));
}

std::vector<std::string> NetNamespace::ExecPrefix() const {
  return {"ip", "netns", "exec", name_};
}

absl::Status NetNamespace::Run(const std::string& command) {
  auto [code, output] = RunCommand(command);
  if (code != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("`", command, "` failed (exit ", code, "): ", output));
  }
  return absl::OkStatus();
}

absl::Status NetNamespace::SetFaults(absl::Duration delay, double loss) {
  if (delay != delay_ || delay == absl::ZeroDuration()) {
    delayer_.reset();
    delay_ = absl::ZeroDuration();
  }
  if (delay > absl::ZeroDuration() && delayer_ == nullptr) {
    std::vector<std::string> argv = ExecPrefix();
    argv.push_back(NetDelayPath());
    argv.push_back("0");
    argv.push_back(absl::StrCat(absl::ToInt64Microseconds(delay)));
    delayer_ = std::make_unique<ChildProcess>(std::move(argv), dir_.path() + "/netdelay.log");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!absl::StrContains(delayer_->ReadLog(), "ready")) {
      if (!delayer_->running() || std::chrono::steady_clock::now() > deadline) {
        std::string log = delayer_->ReadLog();
        delayer_.reset();
        return absl::FailedPreconditionError(
            absl::StrCat("sluice-netdelay did not start: ", log));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    delay_ = delay;
  }

  // One iptables-restore replaces the namespace's filter table atomically. (iptables, not an
  // nft script: nftables' own queue statement needs CONFIG_NFT_QUEUE, which the test machines'
  // kernels lack; iptables' NFQUEUE target reaches the same queue through the xtables compat.)
  std::string rules = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n";
  if (loss > 0) {
    const std::string drop = absl::StrCat(" -m statistic --mode random --probability ",
                                          std::clamp(loss, 0.0, 1.0), " -j DROP\n");
    absl::StrAppend(&rules, "-A INPUT -i ", inner_interface_, drop);
    absl::StrAppend(&rules, "-A OUTPUT -o ", inner_interface_, drop);
  }
  if (delay_ > absl::ZeroDuration()) {
    absl::StrAppend(&rules, "-A INPUT -i ", inner_interface_,
                    " -j NFQUEUE --queue-num 0 --queue-bypass\n");
  }
  rules += "COMMIT\n";
  const std::string path = dir_.WriteFile("faults.rules", rules);
  return Run(absl::StrCat("ip netns exec ", name_, " iptables-restore ", path, " 2>&1"));
}

}  // namespace sluice::testing
