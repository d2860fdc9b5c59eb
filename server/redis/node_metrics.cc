#include "server/redis/node_metrics.h"

#include "absl/strings/str_cat.h"
#include "server/redis/circuit_breaker.h"

namespace sluice {
namespace {

// One family: its HELP and TYPE lines, then a series per node with the value `value(node)`.
template <typename Value>
void AppendFamily(absl::Span<const NodeMetrics> nodes, absl::string_view name,
                  absl::string_view type, absl::string_view help, Value value, std::string* out) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
  for (const NodeMetrics& node : nodes) {
    absl::StrAppend(out, name, "{node=\"", node.address, "\"} ", value(node), "\n");
  }
}

}  // namespace

void SetBreakerMetrics(const CircuitBreaker& breaker, NodeMetrics* node) {
  node->breaker_open = breaker.open();
  node->breaker_opens = breaker.opens();
  node->breaker_rejected = breaker.rejected();
  node->failure_windows = breaker.failure_windows();
  node->failing = breaker.failing_since_us() != 0;
}

void AppendNodeMetrics(absl::Span<const NodeMetrics> nodes, std::string* out,
                       absl::string_view system) {
  if (nodes.empty()) {
    return;
  }
  const std::string prefix = absl::StrCat("sluice_", system, "_");
  auto name = [&prefix](absl::string_view rest) { return absl::StrCat(prefix, rest); };
  AppendFamily(nodes, name("connections"), "gauge", "Connections to the node ready now",
               [](const NodeMetrics& n) { return n.ready_connections; }, out);
  AppendFamily(nodes, name("reconnects_total"), "counter",
               "Connections to the node made again after being lost",
               [](const NodeMetrics& n) { return n.reconnects; }, out);
  AppendFamily(nodes, name("timeouts_total"), "counter",
               "Batches to the node that reached their deadline without a reply",
               [](const NodeMetrics& n) { return n.timeouts; }, out);
  AppendFamily(nodes, name("breaker_open"), "gauge",
               "1 while the node's circuit breaker sends its decisions to the failure policy",
               [](const NodeMetrics& n) { return n.breaker_open ? 1 : 0; }, out);
  AppendFamily(nodes, name("breaker_opens_total"), "counter",
               "Times the node's circuit breaker opened",
               [](const NodeMetrics& n) { return n.breaker_opens; }, out);
  AppendFamily(nodes, name("breaker_rejected_total"), "counter",
               "Batches failed at once while the node's breaker was open",
               [](const NodeMetrics& n) { return n.breaker_rejected; }, out);
  AppendFamily(nodes, name("node_failing"), "gauge",
               "1 while the node's batches fail (a failure window is open)",
               [](const NodeMetrics& n) { return n.failing ? 1 : 0; }, out);
  const std::string kWindows = name("node_failure_window_seconds");
  MetricHistogram::AppendHelp(out, kWindows,
                               "Failure windows that ended: from the node's first failed batch "
                               "(answered by the failure policy) to the next it answered, or to "
                               "its keys moving to another node (failover)");
  for (const NodeMetrics& node : nodes) {
    MetricHistogram::AppendSeries(out, kWindows, absl::StrCat("node=\"", node.address, "\""),
                                   node.failure_windows, MetricHistogram::kSpanBoundsUs);
  }
  const std::string kLatency = name("call_duration_seconds");
  MetricHistogram::AppendHelp(out, kLatency,
                               "Time from a batch's submission to the node's replies (or to its "
                               "deadline)");
  for (const NodeMetrics& node : nodes) {
    MetricHistogram::AppendSeries(out, kLatency, absl::StrCat("node=\"", node.address, "\""),
                                   node.call_latency);
  }
}

void AppendTopologyChanges(uint64_t changes, std::string* out) {
  absl::StrAppend(out,
                  "# HELP sluice_redis_topology_changes_total Times the master moved: a new "
                  "master named by the sentinels, or a new slot map of the cluster\n"
                  "# TYPE sluice_redis_topology_changes_total counter\n"
                  "sluice_redis_topology_changes_total ",
                  changes, "\n");
}

}  // namespace sluice
