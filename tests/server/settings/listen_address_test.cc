#include "server/settings/listen_address.h"

#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

// The error message of `status`, or "ok".
std::string Message(const absl::Status& status) {
  return status.ok() ? "ok" : std::string(status.message());
}

// Verifies the gRPC listen addresses gRPC reads as written are accepted: HOST:PORT with ports
// 0 to 65535, bracketed IPv6, unix and unix-abstract sockets.
TEST(ListenAddressTest, AcceptsWhatGrpcReadsAsWritten) {
  for (const char* address : {"0.0.0.0:8081", "127.0.0.1:0", "localhost:65535", "[::1]:8081",
                              "[::]:0", "unix:/run/sluice.sock", "unix-abstract:sluice"}) {
    EXPECT_EQ(Message(ValidateGrpcListenAddress(address)), "ok") << address;
  }
}

// Verifies what gRPC would misread or refuse is an error saying what is wrong: ports past
// 65535 (gRPC takes them modulo 65536), signs, no port, no host, unbracketed IPv6, an empty
// socket path.
TEST(ListenAddressTest, RefusesWhatGrpcWouldMisread) {
  const std::pair<const char*, const char*> cases[] = {
      {"127.0.0.1:65536", "'127.0.0.1:65536': port '65536' is not a number from 0 to 65535"},
      {":99999", "':99999': port '99999' is not a number from 0 to 65535"},
      {"127.0.0.1:+5", "'127.0.0.1:+5': port '+5' is not a number from 0 to 65535"},
      {"127.0.0.1:1234567", "'127.0.0.1:1234567': port '1234567' is not a number from 0 to 65535"},
      {"127.0.0.1:", "'127.0.0.1:': port '' is not a number from 0 to 65535"},
      {"localhost", "'localhost' is not HOST:PORT"},
      {":8081", "':8081' has no host before ':PORT'"},
      {"::1:8081", "'::1:8081' is not HOST:PORT (write an IPv6 host in brackets: [::1]:8081)"},
      {"[::1:8081", "'[::1:8081' has a malformed [IPv6] host"},
      {"unix:", "'unix:' names no socket (unix:PATH)"},
  };
  for (const auto& [address, message] : cases) {
    EXPECT_EQ(Message(ValidateGrpcListenAddress(address)), message) << address;
  }
}

// Verifies a server address can demand a port of at least 1.
TEST(ListenAddressTest, HostPortHonoursMinimumPort) {
  EXPECT_EQ(Message(ValidateHostPort("redis:6379", 1)), "ok");
  EXPECT_EQ(Message(ValidateHostPort("redis:0", 1)),
            "'redis:0': port '0' is not a number from 1 to 65535");
}

// Verifies which listen addresses only this host reaches: 127.0.0.0/8, ::1 and localhost, and
// no wildcard, other address or name.
TEST(ListenAddressTest, LoopbackListenAddresses) {
  for (const char* address :
       {"127.0.0.1:8080", "127.1.2.3:1", "[::1]:8080", "localhost:0", "LocalHost:80"}) {
    EXPECT_TRUE(IsLoopbackListenAddress(address)) << address;
  }
  for (const char* address : {"0.0.0.0:8080", "[::]:8080", ":8080", "10.0.0.1:8080",
                              "[::ffff:127.0.0.1]:80", "example.com:80", "localhost", "128.0.0.1:1",
                              "127.0.0.1"}) {
    EXPECT_FALSE(IsLoopbackListenAddress(address)) << address;
  }
}

}  // namespace
}  // namespace sluice
