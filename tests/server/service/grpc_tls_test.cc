#include "server/service/grpc_tls.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sluice {
namespace {

bool Holds(const std::string& name, std::vector<std::string> dns, std::vector<std::string> ips) {
  std::vector<grpc::string_ref> dns_refs(dns.begin(), dns.end());
  std::vector<grpc::string_ref> ip_refs(ips.begin(), ips.end());
  return ClientCertificateHoldsName(name, dns_refs, ip_refs);
}

// Verifies names match as Go's certificate hostname check matches them (envoyproxy/ratelimit's
// GRPC_CLIENT_TLS_SAN): DNS names ignoring case, one wildcard label, IP addresses by value.
TEST(GrpcTlsTest, ClientCertificateNameMatchesAsUpstreamChecksIt) {
  EXPECT_TRUE(Holds("envoy.gateway", {"other", "Envoy.Gateway"}, {}));
  EXPECT_FALSE(Holds("envoy.gateway", {"gateway"}, {}));
  EXPECT_TRUE(Holds("a.example.com", {"*.example.com"}, {}));
  EXPECT_FALSE(Holds("example.com", {"*.example.com"}, {}));
  EXPECT_FALSE(Holds("a.b.example.com", {"*.example.com"}, {}));
  EXPECT_FALSE(Holds(".example.com", {"*.example.com"}, {}));
  EXPECT_TRUE(Holds("10.0.0.7", {}, {"10.0.0.8", "10.0.0.7"}));
  EXPECT_FALSE(Holds("10.0.0.7", {"10.0.0.7"}, {}));
  EXPECT_TRUE(Holds("2001:db8::1", {}, {"2001:0db8:0:0:0:0:0:1"}));
  EXPECT_FALSE(Holds("anything", {}, {}));
}

}  // namespace
}  // namespace sluice
