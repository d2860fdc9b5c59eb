// Writes rlqs_fuzz's seeds: scripts that open streams (reading and not), report buckets of
// request_fuzz's config (every rule kind, several pairs, bad reports, Envoy's 0 s first report,
// idle ticks), huge ids and absurd durations, rebalance and close.
//   make_rlqs_seeds <directory>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "envoy/service/rate_limit_quota/v3/rlqs.pb.h"

namespace {

using Reports = envoy::service::rate_limit_quota::v3::RateLimitQuotaUsageReports;

std::string ReportOp(int stream, const std::string& domain,
                     const std::vector<std::pair<std::string, std::string>>& pairs,
                     int64_t seconds, uint64_t requests) {
  Reports reports;
  reports.set_domain(domain);
  auto* usage = reports.add_bucket_quota_usages();
  for (const auto& [k, v] : pairs) {
    (*usage->mutable_bucket_id()->mutable_bucket())[k] = v;
  }
  usage->mutable_time_elapsed()->set_seconds(seconds);
  usage->set_num_requests_allowed(requests);
  usage->set_num_requests_denied(requests / 3);
  const std::string bytes = reports.SerializeAsString();
  std::string op = {'\x01', static_cast<char>(stream), static_cast<char>(bytes.size() >> 8),
                    static_cast<char>(bytes.size() & 0xff)};
  return op + bytes;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <directory>\n", argv[0]);
    return 2;
  }
  const std::string open("\x00\x00", 2);       // a reading client, peer 0
  const std::string deaf("\x00\x01", 2);       // a client that never reads, peer 1
  const std::string tick = "\x02\x0a";
  std::vector<std::string> seeds;
  for (const char* key : {"tb", "lb", "gcra", "swl", "swc", "fw", "shadow", "free", "zero",
                          "quota", "multi", "inflight", "unknown"}) {
    seeds.push_back(open + open + ReportOp(0, "fuzz", {{key, "a"}}, 1, 50) +
                    ReportOp(1, "fuzz", {{key, "a"}}, 2, 300) + tick +
                    ReportOp(0, "fuzz", {{key, "a"}}, 1, 10) + tick + tick + tick + tick);
  }
  seeds.push_back(open + ReportOp(0, "fuzz", {{"path", "/api/x"}, {"user", "u"}}, 1, 5) + tick +
                  std::string("\x03\x00", 2) + tick);
  seeds.push_back(open + ReportOp(0, "fuzz", {{"tb", "a"}}, 1, 5) +
                  ReportOp(0, "other", {{"tb", "a"}}, 1, 5));
  seeds.push_back(open + ReportOp(0, "", {{"tb", "a"}}, 1, 5));
  seeds.push_back(open + ReportOp(0, "fuzz", {{"tb", ""}}, 1, 5));
  seeds.push_back(open + ReportOp(0, "fuzz", {{"tb", "a"}}, 0, 5));
  std::string many = open + open + open + open + open;
  for (int i = 0; i < 20; ++i) {
    many += ReportOp(i % 4, "fuzz", {{"tb", std::to_string(i)}}, 1, 7);
  }
  seeds.push_back(many + tick);
  // Envoy: a 0 s first report, ticks every 5 s with everything held, idle ones included.
  std::string envoy = open + ReportOp(0, "fuzz", {{"tb", "a"}}, 0, 1);
  for (int i = 0; i < 5; ++i) {
    envoy += ReportOp(0, "fuzz", {{"tb", "a"}}, 4, i < 2 ? 40 : 0) + "\x02\x32";
  }
  seeds.push_back(envoy);
  // A client that never reads, reporting many buckets between rebalances.
  std::string flood = deaf;
  for (int i = 0; i < 30; ++i) {
    flood += ReportOp(0, "fuzz", {{"tb", std::to_string(i)}}, 1, 9) + tick;
  }
  seeds.push_back(flood);
  // Huge ids: 32 pairs of 1000-byte keys and values, until a budget says no.
  std::string huge = open + deaf;
  for (int i = 0; i < 12; ++i) {
    huge += std::string("\x04") + static_cast<char>(i % 2) + "\x20\x7d" + static_cast<char>(i);
  }
  seeds.push_back(huge + tick);
  // Absurd durations: the largest, a negative one, 10^9 s.
  std::string absurd = open;
  for (int64_t seconds : {INT64_MAX, int64_t{-5}, int64_t{1'000'000'000}, int64_t{0}}) {
    absurd += "\x05";
    absurd += '\0';
    absurd.append(reinterpret_cast<const char*>(&seconds), sizeof seconds);
    absurd += tick;
  }
  seeds.push_back(absurd);
  for (size_t i = 0; i < seeds.size(); ++i) {
    std::ofstream out(std::string(argv[1]) + "/seed-" + std::to_string(i), std::ios::binary);
    out << seeds[i];
  }
  return 0;
}
