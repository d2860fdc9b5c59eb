// Fuzzes the xDS config reader: any bytes as a state-of-the-world DiscoveryResponse, whose
// resources are read and validated as a management server's snapshot. It must give a config or
// an error, never crash, hang or leak; every error is kInvalidArgument naming the resource (by
// index, or by "xds:<name>"); an accepted config must print and count.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "envoy/service/discovery/v3/discovery.pb.h"
#include "server/xds/xds_config_reader.h"

namespace {

void Fail(const char* what, absl::string_view detail) {
  std::fprintf(stderr, "xds_fuzz: %s: %.*s\n", what, static_cast<int>(detail.size()),
               detail.data());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  envoy::service::discovery::v3::DiscoveryResponse response;
  if (!response.ParseFromArray(data, static_cast<int>(size))) {
    return 0;
  }
  // Both ways of treating two resources of one domain.
  for (bool merge : {false, true}) {
    auto config = sluice::ConfigFromXdsResources(response.resources(),
                                                 sluice::ValidateOptions{.merge_domains = merge});
    if (!config.ok()) {
      if (config.status().code() != absl::StatusCode::kInvalidArgument) {
        Fail("an error that is not kInvalidArgument", config.status().ToString());
      }
      const absl::string_view message = config.status().message();
      if (!absl::StartsWith(message, "resources[") && !absl::StartsWith(message, "xds:")) {
        Fail("an error that does not name the resource", message);
      }
      continue;
    }
    const std::string dump = (*config)->Dump();
    if ((*config)->RuleCount() > 0 && dump.empty()) {
      Fail("rules that do not print", "");
    }
  }
  return 0;
}
