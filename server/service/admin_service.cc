#include "server/service/admin_service.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "server/common/log_text.h"
#include "server/common/logging.h"
#include "server/service/request_plan.h"

namespace sluice {
namespace {

// "user=alice,plan=free" for the audit line: every byte a caller sent escaped (log_text.h).
std::string DescriptorText(const DescriptorReport& descriptor) {
  std::vector<std::string> entries;
  for (const auto& [key, value] : descriptor.entries) {
    entries.push_back(absl::StrCat(LogText(key), "=", LogText(value)));
  }
  std::string text = absl::StrJoin(entries, ",");
  if (!descriptor.limit_override.empty()) {
    absl::StrAppend(&text, " limit ", descriptor.limit_override);
  }
  return text;
}

}  // namespace

// A request resolved as a decision would resolve it, and the reports' skeleton: each
// descriptor's entries and rules, in plan order. The plan holds the config snapshot the rules
// live in, and the checks' storage keys.
struct AdminService::Resolved {
  RequestPlan plan;
  std::string domain;
  std::vector<DescriptorReport> descriptors;
  // Each check's rule report, by check index: (descriptor, rule within it).
  std::vector<std::pair<size_t, size_t>> check_rule;
  std::vector<LimitCheck> checks;
};

AdminService::AdminService(const ConfigStore& config, Backend& backend, OverLimitCache* cache,
                           AdminServiceOptions options)
    : config_(config), backend_(backend), cache_(cache), options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<AdminService::Resolved>> AdminService::ResolveRequest(
    const Request& original) const {
  Request request = original;
  request.set_hits_addend(0);
  for (auto& descriptor : *request.mutable_descriptors()) {
    descriptor.clear_hits_addend();
    descriptor.set_is_negative_hits(false);
  }
  absl::Status valid = ValidateRequest(request, options_.limits);
  if (!valid.ok()) {
    return valid;
  }
  std::shared_ptr<const Config> config = config_.Get();
  if (config == nullptr) {
    return absl::UnavailableError("no config loaded: nothing resolves until a valid one is");
  }
  ResolveOptions resolve = options_.resolve;
  resolve.describe_request = false;
  resolve.refuse_all_refunds = false;
  resolve.refuse_refunds_in.clear();
  auto resolved = std::make_unique<Resolved>();
  Resolve(request, std::move(config), resolve, &resolved->plan);
  const RequestPlan& plan = resolved->plan;
  resolved->domain = request.domain();
  for (int d = 0; d < request.descriptors_size(); ++d) {
    const auto& in = request.descriptors(d);
    const DescriptorPlan& descriptor_plan = plan.descriptors[static_cast<size_t>(d)];
    DescriptorReport& descriptor = resolved->descriptors.emplace_back();
    for (const auto& entry : in.entries()) {
      descriptor.entries.emplace_back(entry.key(), entry.value());
    }
    if (in.has_limit()) {
      descriptor.limit_override =
          absl::StrCat(in.limit().requests_per_unit(), "/",
                       UnitName(static_cast<TimeUnit>(in.limit().unit())));
    }
    descriptor.matched = descriptor_plan.node != nullptr || in.has_limit();
    descriptor.unlimited = descriptor_plan.unlimited;
    descriptor.stat_key = std::string(descriptor_plan.stat_key);
    for (size_t r = 0; r < descriptor_plan.rules.size(); ++r) {
      const RateLimitRule& rule = *descriptor_plan.rules[r];
      const LimitCheck& check = plan.checks[descriptor_plan.first_check + r];
      RuleReport& report = descriptor.rules.emplace_back();
      report.name = rule.name;
      report.params = check.params;
      report.unit = std::string(UnitName(rule.unit));
      report.unit_multiplier = rule.unit_multiplier;
      report.override_rule = descriptor_plan.node == nullptr;
      report.storage_key = std::string(check.key);
      report.cache_on = cache_ != nullptr;
    }
  }
  // Checks in plan order (their groups as a decision makes them), each mapped to its report.
  resolved->check_rule.resize(plan.checks.size());
  for (size_t d = 0; d < plan.descriptors.size(); ++d) {
    const DescriptorPlan& descriptor_plan = plan.descriptors[d];
    for (size_t r = 0; r < descriptor_plan.rules.size(); ++r) {
      resolved->check_rule[descriptor_plan.first_check + r] = {d, r};
    }
  }
  for (const LimitCheck& check : plan.checks) {
    LimitCheck& copy = resolved->checks.emplace_back(check);
    copy.hits = 0;
    copy.refund = false;
    copy.at_us = 0;
  }
  return resolved;
}

void AdminService::Inspect(const Request& request, InspectDone done) {
  absl::StatusOr<std::unique_ptr<Resolved>> resolved = ResolveRequest(request);
  if (!resolved.ok()) {
    Count(true, false);
    std::move(done)(resolved.status());
    return;
  }
  std::shared_ptr<Resolved> call(*std::move(resolved));
  backend_.Inspect(
      call->checks, [this, call, done = std::move(done)](
                        absl::Status status, std::vector<StateReport> states) mutable {
        Count(true, status.ok());
        if (!status.ok()) {
          std::move(done)(std::move(status));
          return;
        }
        InspectReport report;
        report.domain = call->domain;
        report.backend = std::string(backend_.Name());
        report.descriptors = std::move(call->descriptors);
        for (size_t c = 0; c < states.size() && c < call->check_rule.size(); ++c) {
          const auto [d, r] = call->check_rule[c];
          RuleReport& rule = report.descriptors[d].rules[r];
          rule.state = std::move(states[c]);
          if (cache_ != nullptr) {
            rule.cached = cache_->Peek(rule.storage_key);
          }
        }
        std::move(done)(std::move(report));
      });
}

std::string AdminService::OtherReplicas() const {
  if (backend_.SharesResets()) {
    return absl::StrCat("told through the ", backend_.Name(),
                        " reset log: each replica forgets its over-limit cache entries for "
                        "these keys within about ",
                        absl::FormatDuration(options_.follow_interval),
                        " (its poll of the log) plus a round trip");
  }
  if (backend_.Name() == "memory") {
    return "none share this state: the memory backend is this replica's own";
  }
  return absl::StrCat("not told: ", backend_.Name(),
                      " has no channel between replicas, so another replica's over-limit cache "
                      "entry for these keys lasts until its retry time");
}

void AdminService::Reset(const Request& request, std::string who, ResetDone done) {
  absl::StatusOr<std::unique_ptr<Resolved>> resolved = ResolveRequest(request);
  if (!resolved.ok()) {
    Count(false, false);
    SLUICE_LOG(WARNING) << "admin reset by " << who << ": domain " << LogText(request.domain())
                        << " refused: " << LogStatus(resolved.status());
    std::move(done)(resolved.status(), ResetReport{});
    return;
  }
  std::shared_ptr<Resolved> call(*std::move(resolved));
  backend_.Reset(call->checks, [this, call, who = std::move(who), done = std::move(done)](
                                   absl::Status status,
                                   std::vector<std::string> deleted) mutable {
    auto report = std::make_shared<ResetReport>();
    report->domain = call->domain;
    report->backend = std::string(backend_.Name());
    report->descriptors = std::move(call->descriptors);
    report->deleted = std::move(deleted);
    std::vector<std::string> storage_keys;
    for (const LimitCheck& check : call->checks) {
      storage_keys.emplace_back(check.key);
    }
    // This replica forgets at once, whatever the store said: an entry costs only a call.
    if (cache_ != nullptr) {
      for (const std::string& key : storage_keys) {
        if (cache_->Peek(key).has_value()) {
          ++report->forgotten_here;
        }
        cache_->Forget(key);
      }
    }
    // The audit line, and the answer, once the other replicas were told (or not).
    auto finish = [this, report, call, who, done = std::move(done)](absl::Status status) mutable {
      if (!status.ok()) {
        report->result = std::string(LogStatus(status));
      }
      Count(false, status.ok());
      std::vector<std::string> descriptors;
      for (const DescriptorReport& descriptor : report->descriptors) {
        descriptors.push_back(DescriptorText(descriptor));
      }
      std::vector<std::string> deleted;
      for (const std::string& key : report->deleted) {
        deleted.push_back(LogText(key));
      }
      SLUICE_LOG(WARNING) << "admin reset by " << who << ": domain " << LogText(call->domain)
                          << " descriptors [" << absl::StrJoin(descriptors, "; ")
                          << "] keys deleted [" << absl::StrJoin(deleted, ", ")
                          << "] result " << report->result;
      std::move(done)(std::move(status), std::move(*report));
    };
    if (!status.ok()) {
      report->other_replicas = "not told: the store's state could not be deleted";
      std::move(finish)(absl::Status(status.code(),
                                     absl::StrCat("deleting the state: ", status.message())));
      return;
    }
    report->other_replicas = OtherReplicas();
    if (!backend_.SharesResets() || storage_keys.empty()) {
      std::move(finish)(absl::OkStatus());
      return;
    }
    backend_.PublishResets(
        storage_keys, [report, finish = std::move(finish)](absl::Status published) mutable {
          if (!published.ok()) {
            report->other_replicas =
                "NOT told (the reset log could not be written): another replica's over-limit "
                "cache entry for these keys lasts until its retry time";
            published = absl::Status(published.code(), absl::StrCat("telling the other replicas: ",
                                                                    published.message()));
          }
          std::move(finish)(std::move(published));
        });
  });
}

void AdminService::Count(bool inspect, bool ok) {
  counts_[inspect ? 0 : 1][ok ? 0 : 1].fetch_add(1, std::memory_order_relaxed);
}

void AdminService::AppendMetrics(std::string* out) const {
  absl::StrAppend(out,
                  "# HELP sluice_admin_requests_total Admin API calls (--admin_api), by operation "
                  "and result\n# TYPE sluice_admin_requests_total counter\n");
  for (int op = 0; op < 2; ++op) {
    for (int result = 0; result < 2; ++result) {
      absl::StrAppend(out, "sluice_admin_requests_total{operation=\"",
                      op == 0 ? "inspect" : "reset", "\",result=\"",
                      result == 0 ? "ok" : "failed", "\"} ",
                      counts_[op][result].load(std::memory_order_relaxed), "\n");
    }
  }
}

}  // namespace sluice
