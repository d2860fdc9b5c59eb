// A statsd server for tests: a UDP socket (or a TCP listener) on 127.0.0.1, on a port the kernel
// chose, that a thread of its own reads; it keeps every datagram (or every byte of every TCP
// connection) and the lines in them, so a test can wait for what a sink sends and compare it.
// Thread-safe: the reader thread fills it, the test thread asks.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "server/common/mutex.h"

namespace sluice::testing {

class StatsdListener {
 public:
  enum class Protocol { kUdp, kTcp };

  // Binds and starts reading. `port` 0: any free port. Fails the current test if it cannot bind.
  explicit StatsdListener(Protocol protocol = Protocol::kUdp, int port = 0);
  ~StatsdListener();
  StatsdListener(const StatsdListener&) = delete;
  StatsdListener& operator=(const StatsdListener&) = delete;

  int port() const { return port_; }
  // "127.0.0.1:<port>".
  std::string address() const;

  // Every line received so far, in order, without its '\n'.
  std::vector<std::string> Lines() const;
  // Every datagram received so far (UDP).
  std::vector<std::string> Datagrams() const;
  // Waits up to `timeout` until `done(lines so far)` holds; returns the lines then.
  std::vector<std::string> WaitFor(const std::function<bool(const std::vector<std::string>&)>& done,
                                   std::chrono::milliseconds timeout) const;

  // Counter lines ("name:value|c", no tags) summed by name: what a statsd would count.
  static std::map<std::string, uint64_t> SumCounters(const std::vector<std::string>& lines);

 private:
  void Read();

  const Protocol protocol_;
  int fd_ = -1;
  int stop_fd_ = -1;  // an eventfd that wakes the reader to stop
  int port_ = 0;
  mutable Mutex mu_;
  mutable CondVar changed_;
  std::vector<std::string> datagrams_ ABSL_GUARDED_BY(mu_);
  std::string stream_ ABSL_GUARDED_BY(mu_);  // UDP: the datagrams joined; TCP: the bytes
  std::thread thread_;
};

}  // namespace sluice::testing
