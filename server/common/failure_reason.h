// Why a backend could not decide: carried on the failing absl::Status as a payload, set where the
// failure is known (the Redis connection knows whether a batch had been sent; the circuit breaker
// that it refused the batch), read where the decision falls to the failure policy, which counts
// it by reason.
#pragma once

#include <string_view>

#include "absl/status/status.h"

namespace sluice {

enum class FailureReason : unsigned char {
  kOther = 0,
  kTimeoutBeforeSend,  // the budget ran out before the commands were written
  kTimeoutInFlight,    // written; the node answered nothing at all within the budget
  kConnection,         // no connection, or it was lost with the commands on it
  kOutOfMemory,        // Redis refused a write: maxmemory with noeviction (OOM)
  kReadOnly,           // the node is a read-only replica (READONLY), e.g. during failover
  kLoading,            // the node is loading its dataset (LOADING)
  kCircuitOpen,        // the node's circuit breaker is open: not tried at all
  kClusterDown,        // a cluster node would not serve the slot (CLUSTERDOWN, MASTERDOWN,
                       // TRYAGAIN) until the batch had to give up; e.g. a restarted master
                       // refuses writes for its first two seconds
  kTimeoutSlow,        // written; no reply within the budget, though the node was answering
                       // others meanwhile: slow (overloaded, or this machine starved), not gone
  kArgument,           // Redis refused a command for its arguments or the data they met (a
                       // script's argument check, WRONGTYPE, an integer out of range): a bug in
                       // Sluice or a key written by someone else, never Redis being unavailable.
                       // The failure policy never answers it: the checks are decided in process
                       // (RateLimiter), so a request can never turn one into an admission.
  kTls,                // no connection because the TLS handshake failed (a certificate the
                       // other side refused or that failed its check, no TLS on the port)
};
inline constexpr int kFailureReasons = 12;

// `status` (not OK) with `reason` attached; replaces an earlier reason.
absl::Status WithFailureReason(absl::Status status, FailureReason reason);

// The reason attached to `status`; without one, kTimeoutInFlight for kDeadlineExceeded,
// kConnection for kUnavailable, kOther for anything else.
FailureReason FailureReasonOf(const absl::Status& status);

// The Prometheus label value: "timeout_before_send", "timeout_in_flight", "connection", "oom",
// "readonly", "loading", "circuit_open", "cluster_down", "timeout_slow", "argument", "tls",
// "other".
std::string_view FailureReasonName(FailureReason reason);

}  // namespace sluice
