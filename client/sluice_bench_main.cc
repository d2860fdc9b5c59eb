// sluice-bench: a closed- and open-loop gRPC load generator for ShouldRateLimit that can drive
// any Envoy RLS v3 server (Sluice, envoyproxy/ratelimit, the bench floor).
//   sluice-bench --server=127.0.0.1:8081 --domain=bench --key=user --keyspace=100000
//                [--rate=5000] [--concurrency=64] [--duration=10] [--json]
// Prints requests/s, decisions/s, OK / OVER_LIMIT / errors, latency percentiles and its own CPU
// use; with --json, exactly one JSON object on stdout. Exit status 0, or 1 when the load could
// not run (bad flags, server unreachable). Call errors are reported, not fatal.
// With --rlqs=D1,D2,...: emulates one Envoy per demand (requests a second) on the Rate Limit
// Quota Service instead (client/rlqs_emulator.h: Envoy's rate_limit_quota filter as modelled from
// its source, or with --rlqs_profile=api a client that follows the API comments), and prints what
// each admitted against its max-min share of --rlqs_limit, the total, Jain's index of
// admitted / share, and every stream the server ended and every abandon received. Scenarios:
// --rlqs_leave (an Envoy leaves), --rlqs_churn_every (Envoys replaced one by one),
// --rlqs_new_bucket_every (traffic moves to new buckets), --rlqs_tenants (many buckets born at
// random phases), --rlqs_newcomer_every (newcomers' first second).
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "client/load_generator.h"
#include "client/rlqs_emulator.h"

ABSL_FLAG(std::string, server, "127.0.0.1:8081", "RLS v3 server, HOST:PORT");
ABSL_FLAG(int32_t, concurrency, 64,
          "calls in flight: exactly this many in closed loop, at most this many in open loop");
ABSL_FLAG(double, rate, 0,
          "open loop: requests per second, evenly spaced, latency measured from each request's "
          "intended send time; 0: closed loop, as fast as the server answers");
ABSL_FLAG(double, duration, 10, "seconds measured (after --warmup)");
ABSL_FLAG(double, warmup, 1, "seconds of load sent first and left out of the results");
ABSL_FLAG(std::string, domain, "bench", "domain of every request");
ABSL_FLAG(std::string, key, "key",
          "descriptor key; with --descriptors=M the keys are KEY, KEY2, ... KEYM");
ABSL_FLAG(int32_t, keyspace, 1000,
          "values per descriptor key: each descriptor is KEY=v<i>, i uniform in [0, keyspace)");
ABSL_FLAG(int32_t, descriptors, 1, "descriptors per request");
ABSL_FLAG(uint32_t, hits, 0, "hits_addend of every request (0: unset, the server's default 1)");
ABSL_FLAG(int32_t, channels, 4, "gRPC channels (one HTTP/2 connection each), used round-robin");
ABSL_FLAG(int32_t, threads, 1, "completion-queue threads");
ABSL_FLAG(double, timeout, 5, "deadline of every call, seconds");
ABSL_FLAG(double, connect_timeout, 10, "seconds to wait for every channel to connect");
ABSL_FLAG(uint64_t, seed, 1, "seed of the key choice");
ABSL_FLAG(bool, json, false, "print one JSON object instead of the text report");
ABSL_FLAG(std::string, rlqs, "",
          "emulate Envoys on the Rate Limit Quota Service instead: their demands, requests a "
          "second, comma-separated (e.g. 20,60,150,300)");
ABSL_FLAG(std::string, rlqs_servers, "",
          "--rlqs: servers (comma-separated) the Envoys connect to round-robin; empty: --server");
ABSL_FLAG(std::string, rlqs_bucket, "route=bench",
          "--rlqs: the bucket every Envoy reports (key=value,key=value) in --domain");
ABSL_FLAG(double, rlqs_limit, 100,
          "--rlqs: the bucket's configured limit, requests a second, that shares are judged by");
ABSL_FLAG(double, rlqs_report_interval, 0,
          "--rlqs: seconds between an Envoy's reports; 0: its profile's (Envoy: 5, hard-coded; "
          "another period is for quick runs only, Envoy cannot be configured so)");
ABSL_FLAG(std::string, rlqs_profile, "envoy",
          "--rlqs: envoy (Envoy's rate_limit_quota as its source behaves) or api (a client that "
          "follows the API comments: client/envoy_quota_model.h)");
ABSL_FLAG(double, rlqs_churn_every, 0,
          "--rlqs: every this many seconds one Envoy (in turn) closes its stream and a new one "
          "with the same demand takes its place; 0: never");
ABSL_FLAG(double, rlqs_new_bucket_every, 0,
          "--rlqs: every this many seconds all Envoys move their traffic to a new bucket (the "
          "last --rlqs_bucket value with -N appended); 0: never");
ABSL_FLAG(int32_t, rlqs_tenants, 0,
          "--rlqs: each Envoy sends its demand to each of this many buckets (the last "
          "--rlqs_bucket value with -tK appended), each starting at a random moment of its "
          "first two report intervals; each judged against --rlqs_limit. 0: one bucket");
ABSL_FLAG(double, rlqs_newcomer_every, 0,
          "--rlqs: every this many seconds (plus a random part of a report interval) a newcomer "
          "Envoy joins and leaves half a period later; its first second is measured. 0: none");
ABSL_FLAG(double, rlqs_newcomer_demand, 0,
          "--rlqs: a newcomer's demand, requests a second; 0: the last of --rlqs");
ABSL_FLAG(uint64_t, rlqs_seed, 1,
          "--rlqs: seed of the random phases (Envoys' first requests, new buckets, tenants, "
          "newcomers)");
ABSL_FLAG(bool, rlqs_verbose, false, "--rlqs: print every assignment received on stderr");
ABSL_FLAG(int32_t, rlqs_leave, -1,
          "--rlqs: this Envoy (0-based) leaves when the warmup ends; the measure starts three "
          "report intervals later and judges the others against their new shares");
ABSL_FLAG(bool, print_phases, false,
          "print 'sluice-bench: measuring' and 'sluice-bench: measured' on stderr when the "
          "measured interval begins and ends (for scripts that sample the server meanwhile)");

namespace sluice {
namespace {

double Ms(int64_t nanos) { return static_cast<double>(nanos) / 1e6; }

// A JSON string literal of `text` (flags may hold quotes or backslashes).
std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppendFormat(&out, "\\u%04x", static_cast<int>(c));
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
  return out;
}

std::string ErrorsJson(const LoadResult& r) {
  std::vector<std::string> parts;
  for (size_t code = 0; code < r.errors_by_code.size(); ++code) {
    if (r.errors_by_code[code] > 0) {
      parts.push_back(absl::StrFormat(
          "\"%s\": %d", absl::StatusCodeToString(static_cast<absl::StatusCode>(code)),
          r.errors_by_code[code]));
    }
  }
  return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
}

std::string PercentilesJson(const LatencyHistogram& h) {
  return absl::StrFormat(
      "{\"p50\": %.4f, \"p90\": %.4f, \"p99\": %.4f, \"p999\": %.4f, \"max\": %.4f, "
      "\"mean\": %.4f, \"min\": %.4f}",
      Ms(h.ValueAtQuantile(0.5)), Ms(h.ValueAtQuantile(0.9)), Ms(h.ValueAtQuantile(0.99)),
      Ms(h.ValueAtQuantile(0.999)), Ms(h.max()), h.Mean() / 1e6, Ms(h.min()));
}

struct Derived {
  uint64_t decisions;
  double rps;
  double decisions_per_s;
  double completed_per_s;
  double cpu_s;
  double cpu_us_per_request;
};

Derived Derive(const LoadOptions& o, const LoadResult& r) {
  Derived d;
  d.decisions = (r.ok + r.over_limit + r.other_code) * static_cast<uint64_t>(o.descriptors);
  d.rps = static_cast<double>(r.requests) / r.duration_s;
  d.decisions_per_s = static_cast<double>(d.decisions) / r.duration_s;
  d.cpu_s = r.cpu_user_s + r.cpu_sys_s;
  // Per call completed while the CPU was measured (in an overloaded open loop, fewer of the
  // calls scheduled in the interval complete than calls the generator works on).
  d.completed_per_s = static_cast<double>(r.completed_in_interval) / r.duration_s;
  d.cpu_us_per_request = r.completed_in_interval == 0
                             ? 0
                             : d.cpu_s * 1e6 / static_cast<double>(r.completed_in_interval);
  return d;
}

void PrintJson(const LoadOptions& o, const LoadResult& r) {
  const Derived d = Derive(o, r);
  std::string out = absl::StrFormat(
      "{\"server\": %s, \"mode\": \"%s\", \"rate\": %.3f, \"concurrency\": %d, "
      "\"channels\": %d, \"threads\": %d, \"domain\": %s, \"keyspace\": %d, "
      "\"descriptors\": %d, \"hits\": %d, \"duration_s\": %.3f, "
      "\"requests\": %d, \"ok\": %d, \"over_limit\": %d, \"other_code\": %d, \"errors\": %d, "
      "\"errors_by_code\": %s, \"unsent\": %d, \"decisions\": %d, "
      "\"descriptor_ok\": %d, \"descriptor_over_limit\": %d, "
      "\"completed_in_interval\": %d, \"completed_per_s\": %.1f, "
      "\"rps\": %.1f, \"decisions_per_s\": %.1f, \"latency_ms\": %s",
      JsonString(o.server), o.rate > 0 ? "open" : "closed", o.rate, o.concurrency, o.channels,
      o.threads, JsonString(o.domain), o.keyspace, o.descriptors, o.hits, r.duration_s,
      r.requests, r.ok, r.over_limit, r.other_code, r.errors(), ErrorsJson(r), r.unsent,
      d.decisions, r.descriptor_ok, r.descriptor_over_limit, r.completed_in_interval,
      d.completed_per_s, d.rps, d.decisions_per_s,
      PercentilesJson(r.latency));
  if (o.rate > 0) {
    absl::StrAppend(&out, ", \"send_lag_ms\": ", PercentilesJson(r.send_lag));
  }
  absl::StrAppendFormat(&out,
                        ", \"client_cpu\": {\"user_s\": %.3f, \"sys_s\": %.3f, "
                        "\"us_per_request\": %.2f, \"cores\": %.3f, \"threads\": %d}}\n",
                        r.cpu_user_s, r.cpu_sys_s, d.cpu_us_per_request, d.cpu_s / r.duration_s,
                        r.process_threads);
  std::fputs(out.c_str(), stdout);
}

void PrintText(const LoadOptions& o, const LoadResult& r) {
  const Derived d = Derive(o, r);
  std::string mode = o.rate > 0 ? absl::StrFormat("open loop at %.0f/s", o.rate)
                                : std::string("closed loop");
  std::printf("sluice-bench -> %s: %s, concurrency %d, %d channels, %d descriptor(s), "
              "keyspace %d\n",
              o.server.c_str(), mode.c_str(), o.concurrency, o.channels, o.descriptors,
              o.keyspace);
  std::printf("  duration    %.2f s (after %.2f s warm-up)\n", r.duration_s,
              absl::ToDoubleSeconds(o.warmup));
  std::printf("  requests    %" PRIu64 "  (%.1f/s)   decisions %" PRIu64 "  (%.1f/s)\n",
              r.requests, d.rps, d.decisions, d.decisions_per_s);
  std::printf("  answers     OK %" PRIu64 "   OVER_LIMIT %" PRIu64 "   other %" PRIu64
              "   errors %" PRIu64 "\n",
              r.ok, r.over_limit, r.other_code, r.errors());
  for (size_t code = 0; code < r.errors_by_code.size(); ++code) {
    if (r.errors_by_code[code] > 0) {
      std::printf("    %s: %" PRIu64 "\n",
                  absl::StatusCodeToString(static_cast<absl::StatusCode>(code)).c_str(),
                  r.errors_by_code[code]);
    }
  }
  if (r.unsent > 0) {
    std::printf("  unsent      %" PRIu64 " (the generator or the server fell behind the rate; "
                "served %.1f/s)\n",
                r.unsent, d.completed_per_s);
  }
  const LatencyHistogram& h = r.latency;
  std::printf("  latency ms  p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f%s\n",
              Ms(h.ValueAtQuantile(0.5)), Ms(h.ValueAtQuantile(0.9)),
              Ms(h.ValueAtQuantile(0.99)), Ms(h.ValueAtQuantile(0.999)), Ms(h.max()),
              o.rate > 0 ? "  (from intended send time)" : "");
  if (o.rate > 0) {
    const LatencyHistogram& lag = r.send_lag;
    std::printf("  send lag ms p50 %.3f  p99 %.3f  max %.3f\n", Ms(lag.ValueAtQuantile(0.5)),
                Ms(lag.ValueAtQuantile(0.99)), Ms(lag.max()));
  }
  std::printf("  client CPU  %.2f s user + %.2f s sys = %.2f us/request (%.2f cores, %d threads)\n",
              r.cpu_user_s, r.cpu_sys_s, d.cpu_us_per_request, d.cpu_s / r.duration_s,
              r.process_threads);
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

// sluice-bench --rlqs: runs the emulation and prints its report; the process's exit status.
int RunRlqs() {
  RlqsEmulationOptions options;
  options.server = absl::GetFlag(FLAGS_server);
  for (absl::string_view s :
       absl::StrSplit(absl::GetFlag(FLAGS_rlqs_servers), ',', absl::SkipWhitespace())) {
    options.servers.emplace_back(s);
  }
  options.domain = absl::GetFlag(FLAGS_domain);
  options.bucket.clear();
  for (absl::string_view pair :
       absl::StrSplit(absl::GetFlag(FLAGS_rlqs_bucket), ',', absl::SkipWhitespace())) {
    std::vector<std::string> kv = absl::StrSplit(pair, absl::MaxSplits('=', 1));
    if (kv.size() != 2 || kv[0].empty() || kv[1].empty()) {
      std::fprintf(stderr, "sluice-bench: --rlqs_bucket: '%s' is not key=value\n",
                   std::string(pair).c_str());
      return 1;
    }
    options.bucket.emplace_back(kv[0], kv[1]);
  }
  for (absl::string_view d : absl::StrSplit(absl::GetFlag(FLAGS_rlqs), ',', absl::SkipWhitespace())) {
    double demand = 0;
    if (!absl::SimpleAtod(d, &demand) || !(demand > 0)) {
      std::fprintf(stderr, "sluice-bench: --rlqs: '%s' is not a demand above 0\n",
                   std::string(d).c_str());
      return 1;
    }
    options.demands.push_back(demand);
  }
  const std::optional<EnvoyQuotaProfile> profile =
      ParseEnvoyQuotaProfile(absl::GetFlag(FLAGS_rlqs_profile));
  if (!profile) {
    std::fprintf(stderr, "sluice-bench: --rlqs_profile: '%s' is not envoy or api\n",
                 absl::GetFlag(FLAGS_rlqs_profile).c_str());
    return 1;
  }
  options.profile = *profile;
  options.report_interval_s = std::max(0.0, absl::GetFlag(FLAGS_rlqs_report_interval));
  options.warmup_s = absl::GetFlag(FLAGS_warmup);
  options.duration_s = absl::GetFlag(FLAGS_duration);
  options.verbose = absl::GetFlag(FLAGS_rlqs_verbose);
  options.leave = absl::GetFlag(FLAGS_rlqs_leave);
  options.churn_every_s = std::max(0.0, absl::GetFlag(FLAGS_rlqs_churn_every));
  options.new_bucket_every_s = std::max(0.0, absl::GetFlag(FLAGS_rlqs_new_bucket_every));
  options.tenants = std::max(0, absl::GetFlag(FLAGS_rlqs_tenants));
  options.newcomer_every_s = std::max(0.0, absl::GetFlag(FLAGS_rlqs_newcomer_every));
  options.newcomer_demand = std::max(0.0, absl::GetFlag(FLAGS_rlqs_newcomer_demand));
  options.seed = absl::GetFlag(FLAGS_rlqs_seed);
  auto result = RunRlqsEmulation(options);
  if (!result.ok()) {
    std::fprintf(stderr, "sluice-bench: %s\n", std::string(result.status().message()).c_str());
    return 1;
  }
  const double limit = absl::GetFlag(FLAGS_rlqs_limit);
  // The shares the Envoys that stay are judged by: the one that leaves asks nothing.
  std::vector<double> staying = options.demands;
  if (options.leave >= 0 && options.leave < static_cast<int>(staying.size())) {
    staying[static_cast<size_t>(options.leave)] = 0;
  }
  if (options.tenants > 0) {
    // Each Envoy asks its demand of every tenant's bucket: judged per tenant below.
    for (size_t i = 0; i < result->envoys.size(); ++i) {
      const RlqsEnvoyResult& e = result->envoys[i];
      std::printf("envoy %zu: %.1f/s to each of %d tenants, admitted %.1f/s in all, %llu "
                  "assignments, %llu abandons, %llu streams ended\n",
                  i, e.demand, options.tenants, e.admitted_per_s,
                  static_cast<unsigned long long>(e.assignments),
                  static_cast<unsigned long long>(e.abandons),
                  static_cast<unsigned long long>(e.server_ended_streams));
    }
  } else {
    const std::vector<double> shares = MaxMinFairShares(limit, staying);
    double total = 0;
    std::vector<double> ratios;
    std::printf("%-6s %10s %10s %12s %8s %12s %9s %7s %8s\n", "envoy", "demand/s", "share/s",
                "admitted/s", "ratio", "assignments", "abandons", "ended", "replaced");
    for (size_t i = 0; i < result->envoys.size(); ++i) {
      const RlqsEnvoyResult& e = result->envoys[i];
      total += e.admitted_per_s;
      const double ratio = shares[i] > 0 ? e.admitted_per_s / shares[i] : 0;
      if (static_cast<int>(i) != options.leave) {
        ratios.push_back(ratio);
      }
      std::printf("%-6zu %10.1f %10.1f %12.1f %8.3f %12llu %9llu %7llu %8llu\n", i, e.demand,
                  shares[i], e.admitted_per_s, ratio,
                  static_cast<unsigned long long>(e.assignments),
                  static_cast<unsigned long long>(e.abandons),
                  static_cast<unsigned long long>(e.server_ended_streams),
                  static_cast<unsigned long long>(e.incarnations - 1));
    }
    std::printf("total admitted %.1f/s against a limit of %.1f/s: %.3fx; Jain's index of "
                "admitted/share %.4f (%.0f s measured after %.0f s; profile %s, reports every "
                "%.3g s)\n",
                total, limit, total / limit, JainIndex(ratios), options.duration_s,
                options.warmup_s, EnvoyQuotaProfileName(options.profile),
                result->report_interval_s);
  }
  if (options.new_bucket_every_s > 0) {
    std::printf("buckets the traffic went through: %llu\n",
                static_cast<unsigned long long>(result->buckets_used));
  }
  if (!result->tenants.empty()) {
    double worst = 0;
    double least = std::numeric_limits<double>::infinity();
    for (const RlqsTenant& tenant : result->tenants) {
      const double ratio = tenant.admitted_per_s / std::min(limit, tenant.demand);
      worst = std::max(worst, ratio);
      least = std::min(least, ratio);
      std::printf("  tenant %s: asked %.1f/s, admitted %.1f/s: %.3fx of min(asked, limit)\n",
                  tenant.bucket.c_str(), tenant.demand, tenant.admitted_per_s, ratio);
    }
    std::printf("tenants: %zu, admitted %.3fx to %.3fx of min(asked, limit)\n",
                result->tenants.size(), least, worst);
  }
  if (!result->newcomers.empty()) {
    std::vector<double> with_newcomer = options.demands;
    with_newcomer.push_back(options.newcomer_demand > 0 ? options.newcomer_demand
                                                        : options.demands.back());
    const double fair = MaxMinFairShares(limit, with_newcomer).back();
    double own = 0;
    double all = 0;
    double worst_all = 0;
    double least_own = std::numeric_limits<double>::infinity();
    for (const RlqsNewcomer& newcomer : result->newcomers) {
      own += static_cast<double>(newcomer.own_first_s);
      all += static_cast<double>(newcomer.all_first_s);
      worst_all = std::max(worst_all, static_cast<double>(newcomer.all_first_s) / limit);
      least_own = std::min(least_own, static_cast<double>(newcomer.own_first_s));
    }
    const double count = static_cast<double>(result->newcomers.size());
    std::printf("newcomers: %zu; in its first second a newcomer admitted %.1f on average "
                "(least %.0f; its fair share %.1f/s), and everyone %.3fx the limit on average "
                "(most %.3fx)\n",
                result->newcomers.size(), own / count, least_own, fair, all / count / limit,
                worst_all);
  }
  std::printf("token buckets Envoy rebuilt: %llu (%llu of them the same size and rate: a "
              "renewal read as new), %.0f tokens handed out at once by them\n",
              static_cast<unsigned long long>(result->rebuilds.count),
              static_cast<unsigned long long>(result->rebuilds.same_bucket),
              result->rebuilds.tokens_gained);
  std::printf("abandons received: %llu (of a busy bucket: %llu)\n",
              static_cast<unsigned long long>(result->abandons),
              static_cast<unsigned long long>(result->busy_abandons));
  std::printf("streams ended by the server: %zu\n", result->server_ended.size());
  // The same end (code and message) counted once, with the first time it happened.
  std::vector<std::pair<std::string, int>> kinds;
  for (const RlqsStreamEnd& end : result->server_ended) {
    std::string kind = absl::StrFormat("code %d: %s", end.code, end.message);
    auto it = std::find_if(kinds.begin(), kinds.end(),
                           [&](const auto& k) { return k.first == kind; });
    if (it == kinds.end()) {
      std::printf("  %s (first: envoy %zu at %.1f s)\n", kind.c_str(), end.envoy, end.at_s);
      kinds.emplace_back(kind, 1);
    } else {
      ++it->second;
    }
  }
  for (const auto& [kind, count] : kinds) {
    if (count > 1) {
      std::printf("  %s: %d times\n", kind.c_str(), count);
    }
  }
  return 0;
}

}  // namespace
}  // namespace sluice

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "gRPC load generator for Envoy RLS v3 ShouldRateLimit.\n"
      "  sluice-bench --server=HOST:PORT [--rate=N] [--concurrency=N] [--duration=S] "
      "[--domain=D --key=K --keyspace=N --descriptors=M] [--json]");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() > 1) {
    std::fprintf(stderr, "sluice-bench: unexpected argument '%s'\n", args[1]);
    return 1;
  }
  // gRPC locks absl::Mutex on every call, and Debian's abseil checks each lock for deadlock
  // cycles (a few percent of the generator's CPU); the generator has no use for the check.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  if (!absl::GetFlag(FLAGS_rlqs).empty()) {
    return sluice::RunRlqs();
  }
  sluice::LoadOptions options;
  options.server = absl::GetFlag(FLAGS_server);
  options.concurrency = absl::GetFlag(FLAGS_concurrency);
  options.rate = absl::GetFlag(FLAGS_rate);
  options.duration = absl::Seconds(absl::GetFlag(FLAGS_duration));
  options.warmup = absl::Seconds(absl::GetFlag(FLAGS_warmup));
  options.domain = absl::GetFlag(FLAGS_domain);
  options.key = absl::GetFlag(FLAGS_key);
  options.keyspace = absl::GetFlag(FLAGS_keyspace);
  options.descriptors = absl::GetFlag(FLAGS_descriptors);
  options.hits = absl::GetFlag(FLAGS_hits);
  options.channels = absl::GetFlag(FLAGS_channels);
  options.threads = absl::GetFlag(FLAGS_threads);
  options.timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout));
  options.connect_timeout = absl::Seconds(absl::GetFlag(FLAGS_connect_timeout));
  options.seed = absl::GetFlag(FLAGS_seed);
  if (absl::GetFlag(FLAGS_print_phases)) {
    options.on_phase = [](sluice::LoadOptions::Phase phase) {
      std::fputs(phase == sluice::LoadOptions::Phase::kMeasuring ? "sluice-bench: measuring\n"
                                                                 : "sluice-bench: measured\n",
                 stderr);
      std::fflush(stderr);
    };
  }
  auto result = sluice::RunLoad(options);
  if (!result.ok()) {
    std::fprintf(stderr, "sluice-bench: %s\n", std::string(result.status().message()).c_str());
    return 1;
  }
  if (absl::GetFlag(FLAGS_json)) {
    sluice::PrintJson(options, *result);
  } else {
    sluice::PrintText(options, *result);
  }
  return 0;
}
