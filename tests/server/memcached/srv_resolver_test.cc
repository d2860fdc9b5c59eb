#include "server/memcached/srv_resolver.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::ElementsAre;

// A DNS server on a loopback UDP port that answers every question with the SRV records it was
// given (priority 0, weight 0): a stub of a cluster's DNS for a headless service.
class DnsStub {
 public:
  explicit DnsStub(std::vector<std::pair<std::string, int>> targets)
      : targets_(std::move(targets)) {
    fd_ = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    socklen_t length = sizeof(address);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    timeval timeout{0, 100000};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    thread_ = std::thread([this] { Serve(); });
  }
  ~DnsStub() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  int questions() const { return questions_.load(); }

 private:
  static void Put16(std::string& out, int value) {
    out.push_back(static_cast<char>((value >> 8) & 0xff));
    out.push_back(static_cast<char>(value & 0xff));
  }

  void Serve() {
    char buffer[512];
    while (!stop_) {
      sockaddr_in peer{};
      socklen_t length = sizeof(peer);
      const ssize_t n = recvfrom(fd_, buffer, sizeof(buffer), 0,
                                 reinterpret_cast<sockaddr*>(&peer), &length);
      if (n < 12) {
        continue;
      }
      questions_.fetch_add(1);
      // The question runs from byte 12 to the end of its name plus type and class.
      size_t end = 12;
      while (end < static_cast<size_t>(n) && buffer[end] != 0) {
        end += static_cast<unsigned char>(buffer[end]) + 1;
      }
      end += 5;
      std::string answer(buffer, 2);  // the id
      Put16(answer, 0x8180);          // a response, recursion desired and available
      Put16(answer, 1);
      Put16(answer, static_cast<int>(targets_.size()));
      Put16(answer, 0);
      Put16(answer, 0);
      answer.append(buffer + 12, end - 12);
      for (const auto& [host, port] : targets_) {
        std::string name;
        for (absl::string_view label : absl::StrSplit(host, '.', absl::SkipEmpty())) {
          name.push_back(static_cast<char>(label.size()));
          name.append(label.data(), label.size());
        }
        name.push_back(0);
        Put16(answer, 0xC00C);  // the question's name
        Put16(answer, 33);      // SRV
        Put16(answer, 1);       // IN
        answer.append("\0\0\0\x1e", 4);
        Put16(answer, static_cast<int>(6 + name.size()));
        Put16(answer, 0);
        Put16(answer, 0);
        Put16(answer, port);
        answer += name;
      }
      sendto(fd_, answer.data(), answer.size(), 0, reinterpret_cast<sockaddr*>(&peer), length);
    }
  }

  const std::vector<std::pair<std::string, int>> targets_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> questions_{0};
  std::thread thread_;
};

class SrvResolverTest : public ::testing::Test {};

// Verifies the SRV answer's targets, as Go's net.LookupSRV names them (fully qualified, a final
// dot), with their ports, sorted as upstream sorts them.
TEST_F(SrvResolverTest, TargetsSortedAsUpstream) {
  DnsStub stub({{"memcached-2.memcached.default.svc.cluster.local", 11211},
                {"memcached-0.memcached.default.svc.cluster.local", 11211},
                {"memcached-1.memcached.default.svc.cluster.local", 11212}});
  DnsSrvResolver resolver(stub.address());
  absl::StatusOr<std::vector<std::string>> servers =
      resolver.Lookup("_memcache._tcp.memcached.default.svc.cluster.local");
  ASSERT_TRUE(servers.ok()) << servers.status();
  EXPECT_THAT(*servers, ElementsAre("memcached-0.memcached.default.svc.cluster.local.:11211",
                                    "memcached-1.memcached.default.svc.cluster.local.:11212",
                                    "memcached-2.memcached.default.svc.cluster.local.:11211"));
  EXPECT_GE(stub.questions(), 1);
}

// Verifies a record with port 0 is skipped rather than failing the lookup, and that an answer of
// only such records finds no servers.
TEST_F(SrvResolverTest, SkipsTargetsWithPortZero) {
  DnsStub stub({{"memcached-1.local", 0}, {"memcached-0.local", 11211}});
  DnsSrvResolver resolver(stub.address());
  absl::StatusOr<std::vector<std::string>> servers = resolver.Lookup("_memcache._tcp.local");
  ASSERT_TRUE(servers.ok()) << servers.status();
  EXPECT_THAT(*servers, ElementsAre("memcached-0.local.:11211"));

  DnsStub only_zero({{"memcached-1.local", 0}});
  DnsSrvResolver nothing(only_zero.address());
  absl::Status status = nothing.Lookup("_memcache._tcp.local").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(status.message(), ::testing::HasSubstr("no servers (1 with port 0)"));
}

// Verifies an answer without records, and a name not of the SRV form, are errors.
TEST_F(SrvResolverTest, EmptyAnswersAndBadNames) {
  DnsStub stub({});
  DnsSrvResolver resolver(stub.address());
  EXPECT_EQ(resolver.Lookup("_memcache._tcp.nothing.local").status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(resolver.Lookup("memcached.local").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(IsSrvName("_memcache._tcp.a"));
  EXPECT_FALSE(IsSrvName("_memcache.a"));
  EXPECT_FALSE(IsSrvName("memcache._tcp.a"));
}

}  // namespace
}  // namespace sluice
