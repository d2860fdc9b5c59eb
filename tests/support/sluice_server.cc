#include "tests/support/sluice_server.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "tests/support/paths.h"

namespace sluice::testing {

std::string SluiceServer::BinaryPath(const std::string& name) {
  return BinaryDir() + "/bin/" + name;
}

std::string SluiceServer::grpc_address() const { return absl::StrCat("127.0.0.1:", grpc_port_); }

absl::StatusOr<std::unique_ptr<SluiceServer>> SluiceServer::Start(
    const std::string& config_path, const std::vector<std::string>& extra_flags,
    const std::string& log_dir) {
  auto server = std::unique_ptr<SluiceServer>(new SluiceServer());
  server->grpc_port_ = FreePort();
  server->http_port_ = FreePort();
  std::vector<std::string> argv = {BinaryPath("sluice"), "--config=" + config_path,
                                   absl::StrCat("--grpc_address=127.0.0.1:", server->grpc_port_),
                                   absl::StrCat("--http_address=127.0.0.1:", server->http_port_)};
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  std::string log = absl::StrCat(log_dir, "/sluice-", server->grpc_port_, ".log");
  server->process_ = std::make_unique<ChildProcess>(argv, log);
  for (int port : {server->grpc_port_, server->http_port_}) {
    if (!WaitForPort(port, std::chrono::seconds(20))) {
      return absl::UnavailableError(
          absl::StrCat("sluice did not start listening on ", port, ":\n", server->ReadLog()));
    }
  }
  return server;
}

}  // namespace sluice::testing
