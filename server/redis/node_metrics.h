// What /metrics says about each Redis node a client talks to: its connections, its circuit
// breaker and how long its calls take. A client collects one NodeMetrics per node; the backend
// renders them all at once so that each metric family's series stay together, as the
// Prometheus text format requires.
#pragma once

#include <cstdint>
#include <string>

#include "absl/types/span.h"
#include "server/common/metric_histogram.h"

namespace sluice {

class CircuitBreaker;

struct NodeMetrics {
  std::string address;  // "host:port", the `node` label
  int ready_connections = 0;
  uint64_t reconnects = 0;  // handshakes completed after a connection's first
  uint64_t timeouts = 0;    // batches that reached their deadline without a reply
  bool breaker_open = false;
  uint64_t breaker_opens = 0;
  uint64_t breaker_rejected = 0;
  // From a batch's submission to its replies (or its deadline).
  MetricHistogram::Snapshot call_latency;
  // The node's failure windows that have ended (CircuitBreaker): from a first failed batch to
  // the next answered one, or to its keys moving to another node.
  MetricHistogram::Snapshot failure_windows;
  bool failing = false;  // a window is open now
};

// Fills the breaker's part of `node`: open, opens, rejected, its failure windows and failing.
void SetBreakerMetrics(const CircuitBreaker& breaker, NodeMetrics* node);

// sluice_redis_connections, _reconnects_total, _timeouts_total, _breaker_open,
// _breaker_opens_total, _breaker_rejected_total, _failing, and the _call_duration_seconds and
// _failure_window_seconds histograms, each
// labelled node="<address>", with HELP and TYPE lines. Nothing when `nodes` is empty.
// `system` names the families: "redis" (sluice_redis_*), "memcached" (sluice_memcached_*).
void AppendNodeMetrics(absl::Span<const NodeMetrics> nodes, std::string* out,
                       absl::string_view system = "redis");

// sluice_redis_topology_changes_total with its HELP and TYPE lines: the times a client's master
// moved (a new master named by the sentinels, a cluster slot map that moved slots).
void AppendTopologyChanges(uint64_t changes, std::string* out);

}  // namespace sluice
