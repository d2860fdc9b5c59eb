// Test helper: a Linux network namespace joined to the test's own by a veth pair, for tests of
// what crosses a real network. A server started inside it (RedisServerOptions::launcher =
// ExecPrefix(), host = inner_address()) is reached through the kernel's IP stack, and
// iptables rules inside the namespace drop packets at random or queue them to sluice-netdelay,
// which holds each one for a fixed time: packet loss and latency, as `tc ... netem` would add
// them (the test machines' kernels have no sch_netem).
//
// Needs root (CAP_NET_ADMIN), iproute2 and iptables. Not thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/support/process.h"

namespace sluice::testing {

class NetNamespace {
 public:
  // Creates the namespace and the veth pair, a /30 of its own on 10.213.0.0/16, both ends up.
  static absl::StatusOr<std::unique_ptr<NetNamespace>> Create();
  // Stops the delayer and deletes the namespace and the pair. Stop the servers inside first.
  ~NetNamespace();
  NetNamespace(const NetNamespace&) = delete;
  NetNamespace& operator=(const NetNamespace&) = delete;

  const std::string& name() const { return name_; }
  // The namespace's end of the pair, where its servers listen.
  const std::string& inner_address() const { return inner_address_; }
  // Runs a command inside the namespace: {"ip", "netns", "exec", name()}.
  std::vector<std::string> ExecPrefix() const;

  // Replaces the faults set before: every packet entering the namespace waits `delay` (so a
  // round trip to a server inside takes `delay` longer), and `loss` (0 to 1) of the packets in
  // each direction are dropped. SetFaults(absl::ZeroDuration(), 0) clears them.
  absl::Status SetFaults(absl::Duration delay, double loss);

 private:
  NetNamespace() = default;
  absl::Status Run(const std::string& command);

  std::string name_;
  std::string host_interface_;
  std::string inner_interface_;
  std::string host_address_;
  std::string inner_address_;
  TempDir dir_;
  std::unique_ptr<ChildProcess> delayer_;
  absl::Duration delay_ = absl::ZeroDuration();
};

}  // namespace sluice::testing
