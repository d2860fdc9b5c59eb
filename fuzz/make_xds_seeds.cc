// Writes xds_fuzz's seed corpus: serialized DiscoveryResponses holding RateLimitConfig resources
// shaped like the ones the xDS tests and Envoy Gateway send (nested descriptors, wildcards,
// unlimited rules with replaces, Sluice's keys in the "sluice" metadata entry, several domains),
// one file each.
//   make_xds_seeds <directory>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "envoy/service/discovery/v3/discovery.pb.h"
#include "ratelimit/config/ratelimit/v3/rls_conf.pb.h"

namespace {

namespace rls = ::ratelimit::config::ratelimit::v3;

rls::RateLimitDescriptor* Add(google::protobuf::RepeatedPtrField<rls::RateLimitDescriptor>* list,
                              const std::string& key, const std::string& value,
                              rls::RateLimitUnit unit, uint32_t limit) {
  rls::RateLimitDescriptor* d = list->Add();
  d->set_key(key);
  d->set_value(value);
  if (unit != rls::UNKNOWN) {
    d->mutable_rate_limit()->set_unit(unit);
    d->mutable_rate_limit()->set_requests_per_unit(limit);
  }
  return d;
}

rls::RateLimitConfig Gateway() {
  rls::RateLimitConfig config;
  config.set_name("first-listener");
  config.set_domain("first-listener");
  rls::RateLimitDescriptor* route =
      Add(config.mutable_descriptors(), "first-route", "first-route", rls::UNKNOWN, 0);
  Add(route->mutable_descriptors(), "rule-0-match-0", "", rls::SECOND, 5);
  Add(route->mutable_descriptors(), "rule-1-match-0", "rule-1-match-0", rls::MONTH, 100);
  return config;
}

rls::RateLimitConfig Rich() {
  rls::RateLimitConfig config;
  config.set_name("api");
  config.set_domain("api");
  rls::RateLimitDescriptor* client =
      Add(config.mutable_descriptors(), "client", "", rls::MINUTE, 60);
  client->mutable_rate_limit()->set_name("per_client");
  client->set_detailed_metric(true);
  auto& keys = *(*client->mutable_metadata()->mutable_fields())["sluice"]
                    .mutable_struct_value()
                    ->mutable_fields();
  keys["algorithm"].set_string_value("token_bucket");
  keys["burst"].set_number_value(20);
  keys["failure_mode"].set_string_value("local");
  (*client->mutable_metadata()->mutable_fields())["team"].set_string_value("payments");
  rls::RateLimitDescriptor* vip = Add(config.mutable_descriptors(), "vip", "gold-*", rls::UNKNOWN, 0);
  vip->mutable_rate_limit()->set_unlimited(true);
  vip->mutable_rate_limit()->add_replaces()->set_name("per_client");
  rls::RateLimitDescriptor* path =
      Add(config.mutable_descriptors(), "path", "/api/*", rls::HOUR, 3);
  (*(*path->mutable_metadata()->mutable_fields())["sluice"].mutable_struct_value()
        ->mutable_fields())["share_threshold"]
      .set_bool_value(true);
  rls::RateLimitDescriptor* user = Add(path->mutable_descriptors(), "user", "", rls::DAY, 1000);
  user->set_shadow_mode(true);
  return config;
}

envoy::service::discovery::v3::DiscoveryResponse Response(
    const std::string& version, const std::vector<rls::RateLimitConfig>& resources) {
  envoy::service::discovery::v3::DiscoveryResponse response;
  response.set_version_info(version);
  response.set_type_url("type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig");
  response.set_nonce("n-" + version);
  for (const rls::RateLimitConfig& resource : resources) {
    response.add_resources()->PackFrom(resource);
  }
  return response;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_xds_seeds <directory>\n");
    return 2;
  }
  rls::RateLimitConfig second = Gateway();
  second.set_name("second");
  const std::vector<envoy::service::discovery::v3::DiscoveryResponse> seeds = {
      Response("1", {Gateway()}),
      Response("2", {Rich()}),
      Response("3", {Gateway(), Rich()}),
      Response("4", {Gateway(), second}),
      Response("5", {}),
  };
  for (size_t i = 0; i < seeds.size(); ++i) {
    std::ofstream out(std::string(argv[1]) + "/seed-" + std::to_string(i), std::ios::binary);
    out << seeds[i].SerializeAsString();
    if (!out) {
      std::fprintf(stderr, "make_xds_seeds: cannot write to %s\n", argv[1]);
      return 1;
    }
  }
  return 0;
}
