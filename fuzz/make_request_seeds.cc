// Writes request_fuzz's seed corpus: serialized RateLimitRequests shaped like the ones the
// decision-path tests send (every rule of request_fuzz's config, nested descriptors, wildcards,
// hits, limit overrides, and the refusals: no domain, no entries, empty keys), one file each;
// and one in four as a /json body too (seed-json-*, in lowerCamelCase and in the original field
// names by turns), for the JSON check request_fuzz also runs (a JSON input costs it several
// decisions' time: a few seeds are enough to start from).
//   make_request_seeds <directory>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "google/protobuf/util/json_util.h"

namespace {

using Request = envoy::service::ratelimit::v3::RateLimitRequest;
using Entries = std::vector<std::pair<std::string, std::string>>;

Request Make(const std::string& domain, const std::vector<Entries>& descriptors,
             uint32_t hits = 0) {
  Request r;
  r.set_domain(domain);
  r.set_hits_addend(hits);
  for (const Entries& entries : descriptors) {
    auto* d = r.add_descriptors();
    for (const auto& [key, value] : entries) {
      auto* e = d->add_entries();
      e->set_key(key);
      e->set_value(value);
    }
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <directory>\n", argv[0]);
    return 2;
  }
  std::vector<Request> seeds;
  for (const char* key : {"tb", "lb", "gcra", "swl", "swc", "fw", "shadow", "free", "zero",
                          "quota", "multi", "unknown"}) {
    seeds.push_back(Make("fuzz", {{{key, "v1"}}}));
    seeds.push_back(Make("fuzz", {{{key, "v2"}}}, 3));
  }
  seeds.push_back(Make("fuzz", {{{"user", "admin"}}}));
  seeds.push_back(Make("fuzz", {{{"user", "alice"}, {"path", "/api/orders"}}}));
  seeds.push_back(Make("fuzz", {{{"user", "bob"}, {"path", "/web"}}}, 2));
  seeds.push_back(Make("fuzz", {{{"tb", "a"}}, {{"quota", "q"}}, {{"multi", "m"}}, {{"fw", "f"}}}));
  seeds.push_back(Make("fuzz", {{{"swl", "x"}}, {{"swl", "x"}}, {{"swl", "x"}}, {{"swl", "x"}}}));
  seeds.push_back(Make("fuzz", {{{"gcra", "big"}}}, 4294967295u));
  seeds.push_back(Make("other", {{{"tb", "v"}}}));
  seeds.push_back(Make("", {{{"tb", "v"}}}));
  seeds.push_back(Make("fuzz", {{}}));
  seeds.push_back(Make("fuzz", {{{"", "v"}}}));
  seeds.push_back(Make("fuzz", {}));
  {
    Request r = Make("fuzz", {{{"tb", "override"}}});
    auto* limit = r.mutable_descriptors(0)->mutable_limit();
    limit->set_requests_per_unit(7);
    limit->set_unit(envoy::type::v3::RateLimitUnit::MINUTE);
    r.mutable_descriptors(0)->mutable_hits_addend()->set_value(2);
    seeds.push_back(r);
  }
  // Hits no rule can hold, around the edges of what a Lua script (2^53) and INCRBY (2^63)
  // take, alone, in a rule pair and in a co-located request.
  for (uint64_t hits : {uint64_t{11}, uint64_t{1} << 53, uint64_t{1} << 63, ~uint64_t{0}}) {
    for (const char* key : {"tb", "lb", "gcra", "swl", "swc", "fw", "multi", "zero"}) {
      Request r = Make("fuzz", {{{key, "huge-hits"}}});
      r.mutable_descriptors(0)->mutable_hits_addend()->set_value(hits);
      seeds.push_back(r);
    }
    Request group = Make("fuzz", {{{"user", "carol"}, {"path", "/api/x"}}, {{"user", "carol"}}});
    group.mutable_descriptors(1)->mutable_hits_addend()->set_value(hits);
    seeds.push_back(group);
  }
  // Refunds (is_negative_hits): of every rule, after a charge of the same key in the same
  // request, of hits no rule holds, in a co-located request beside a charge, and in-flight
  // acquisitions and releases.
  for (const char* key : {"tb", "lb", "gcra", "swl", "swc", "fw", "shadow", "free", "zero",
                          "quota", "multi", "inflight", "unknown"}) {
    Request r = Make("fuzz", {{{key, "refund"}}, {{key, "refund"}}}, 2);
    r.mutable_descriptors(1)->set_is_negative_hits(true);
    seeds.push_back(r);
  }
  for (uint64_t hits : {uint64_t{1} << 53, ~uint64_t{0}}) {
    Request r = Make("fuzz", {{{"gcra", "huge-refund"}}, {{"swl", "huge-refund"}}});
    for (int d = 0; d < 2; ++d) {
      r.mutable_descriptors(d)->set_is_negative_hits(true);
      r.mutable_descriptors(d)->mutable_hits_addend()->set_value(hits);
    }
    seeds.push_back(r);
  }
  {
    Request group = Make("fuzz", {{{"user", "dan"}, {"path", "/api/y"}}, {{"user", "dan"}}}, 3);
    group.mutable_descriptors(0)->set_is_negative_hits(true);
    seeds.push_back(group);
  }
  for (const char* key : {"inflight", "inflight"}) {
    seeds.push_back(Make("fuzz", {{{key, "lease"}}}));
  }
  {
    Request release = Make("fuzz", {{{"inflight", "lease"}}});
    release.mutable_descriptors(0)->set_is_negative_hits(true);
    seeds.push_back(release);
  }
  for (size_t i = 0; i < seeds.size(); ++i) {
    std::ofstream out(std::string(argv[1]) + "/seed-" + std::to_string(i), std::ios::binary);
    out << seeds[i].SerializeAsString();
    if (i % 4 != 3) {
      continue;
    }
    google::protobuf::util::JsonPrintOptions options;
    options.preserve_proto_field_names = i / 4 % 2 == 0;
    std::string json;
    if (google::protobuf::util::MessageToJsonString(seeds[i], &json, options).ok()) {
      std::ofstream json_out(std::string(argv[1]) + "/seed-json-" + std::to_string(i),
                             std::ios::binary);
      json_out << json;
    }
  }
  return 0;
}
