// Runs the real build/bin/sluice as a child process on free loopback ports, for end-to-end
// tests. Not thread-safe; one test thread drives it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/support/process.h"

namespace sluice::testing {

class SluiceServer {
 public:
  // Starts sluice with --config=`config_path`, free gRPC and HTTP ports on 127.0.0.1, and
  // `extra_flags`; waits until both ports accept connections. The error includes the log.
  static absl::StatusOr<std::unique_ptr<SluiceServer>> Start(
      const std::string& config_path, const std::vector<std::string>& extra_flags,
      const std::string& log_dir);

  int grpc_port() const { return grpc_port_; }
  int http_port() const { return http_port_; }
  // "127.0.0.1:<grpc port>".
  std::string grpc_address() const;
  ChildProcess& process() { return *process_; }
  std::string ReadLog() const { return process_->ReadLog(); }

  // Path of a binary built beside sluice (build/bin/<name>).
  static std::string BinaryPath(const std::string& name);

 private:
  int grpc_port_ = 0;
  int http_port_ = 0;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace sluice::testing
