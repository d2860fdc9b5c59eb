// RedisSyncClient against a scripted server on a loopback port: it reads replies with
// RedisReplyReader's limits, so a hostile sentinel or node (one that announces an array or a
// string of gigabytes) fails the exchange at once instead of making it allocate, and a sane
// reply still comes through whole.
#include "server/redis/sync_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/process.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

// Accepts one connection and answers each command it reads (one read per command) with the
// next of `replies`, then keeps the connection open until the client closes it.
class ScriptedServer {
 public:
  explicit ScriptedServer(std::vector<std::string> replies) : replies_(std::move(replies)) {
    const testing::LoopbackListener listener = testing::ListenOnLoopback(1);
    listen_fd_ = listener.fd;
    port_ = listener.port;
    thread_ = std::thread([this] { Serve(); });
  }
  ~ScriptedServer() {
    shutdown(listen_fd_, SHUT_RDWR);
    thread_.join();
    close(listen_fd_);
  }

  int port() const { return port_; }

 private:
  void Serve() {
    const int fd = accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) {
      return;
    }
    char buf[4096];
    for (const std::string& reply : replies_) {
      if (read(fd, buf, sizeof(buf)) <= 0) {
        break;
      }
      if (write(fd, reply.data(), reply.size()) != static_cast<ssize_t>(reply.size())) {
        break;
      }
    }
    while (read(fd, buf, sizeof(buf)) > 0) {
    }
    close(fd);
  }

  std::vector<std::string> replies_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

class RedisSyncClientTest : public ::testing::Test {
 protected:
  std::unique_ptr<RedisSyncClient> Connect(const ScriptedServer& server) {
    auto client = RedisSyncClient::Connect(RedisEndpoint{"127.0.0.1", server.port(), ""},
                                           nullptr, absl::Seconds(5));
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }
};

// Verifies a reply past a limit (an announced array of ten million, a string of two billion
// bytes, arrays nested past the limit) fails the exchange as a protocol error naming the limit,
// at once rather than after the timeout, after a sane reply on the same connection came
// through whole.
TEST_F(RedisSyncClientTest, RefusesRepliesPastTheLimits) {
  const struct {
    std::string reply;
    std::string error;
  } cases[] = {
      {"*10000000\r\n", "RedisReplyLimits::max_array_elements"},
      {"$2000000000\r\nabc", "RedisReplyLimits::max_string_bytes"},
      {"*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n", "RedisReplyLimits::max_nesting"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.reply);
    ScriptedServer server({"*2\r\n$6\r\nmaster\r\n:42\r\n", c.reply});
    std::unique_ptr<RedisSyncClient> client = Connect(server);
    ASSERT_NE(client, nullptr);
    absl::StatusOr<RedisReply> role = client->Run({"ROLE"});
    ASSERT_TRUE(role.ok()) << role.status();
    EXPECT_EQ(*role, RedisReply::Array({RedisReply::String("master"), RedisReply::Integer(42)}));
    const absl::Time start = absl::Now();
    absl::StatusOr<RedisReply> hostile =
        client->Run({"SENTINEL", "get-master-addr-by-name", "mymaster"});
    EXPECT_LT(absl::Now() - start, absl::Seconds(2));
    ASSERT_FALSE(hostile.ok());
    EXPECT_EQ(hostile.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(std::string(hostile.status().message()), HasSubstr("protocol error: "));
    EXPECT_THAT(std::string(hostile.status().message()), HasSubstr(c.error));
  }
}

}  // namespace
}  // namespace sluice
