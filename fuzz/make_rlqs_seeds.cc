// Writes rlqs_fuzz's seeds: scripts that open streams, report buckets of request_fuzz's config
// (every rule kind, several pairs, bad reports), rebalance, close and expire.
//   make_rlqs_seeds <directory>
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
  const std::string open(1, '\0');
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
  seeds.push_back(many + tick + "\x04");
  for (size_t i = 0; i < seeds.size(); ++i) {
    std::ofstream out(std::string(argv[1]) + "/seed-" + std::to_string(i), std::ios::binary);
    out << seeds[i];
  }
  return 0;
}
