#include "server/stats/statsd_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

// Verifies an [IPv6]:PORT address is reached without its brackets: a datagram arrives at a
// socket on ::1.
TEST(StatsdConnectionTest, SendsToABracketedIpv6Address) {
  const int fd = socket(AF_INET6, SOCK_DGRAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in6 address{};
  address.sin6_family = AF_INET6;
  address.sin6_addr = in6addr_loopback;
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    GTEST_SKIP() << "no IPv6 loopback here";
  }
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  StatsdConnection connection(absl::StrCat("[::1]:", ntohs(address.sin6_port)),
                              StatsdProtocol::kUdp);
  size_t sent = 0;
  const absl::Status status = connection.Send({"a:1|c"}, &sent);
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(sent, 1u);
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  char buffer[64];
  const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
  EXPECT_EQ(std::string(buffer, n > 0 ? n : 0), "a:1|c");
  close(fd);
}

// Verifies an address that is not HOST:PORT sends nothing and says so, as kInvalidArgument.
TEST(StatsdConnectionTest, RefusesAnAddressWithoutAPort) {
  StatsdConnection connection("localhost", StatsdProtocol::kUdp);
  size_t sent = 7;
  const absl::Status status = connection.Send({"a:1|c"}, &sent);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ(status.message(), "statsd address 'localhost' is not HOST:PORT or [IPv6]:PORT");
  EXPECT_EQ(sent, 0u);
  EXPECT_FALSE(connection.connected());
}

}  // namespace
}  // namespace sluice
