// sluicectl: asks an RLS v3 server for a decision and prints it as a table.
//   sluicectl --server=HOST:PORT check DOMAIN key=value[,key=value...] [...] [--hits=N]
// Exit status: 0 all OK, 2 OVER_LIMIT, 1 any error.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/time/time.h"
#include "client/rls_client.h"

ABSL_FLAG(std::string, server, "localhost:8081", "RLS server address, HOST:PORT");
ABSL_FLAG(uint32_t, hits, 0, "hits this request adds (0: the server's default of 1)");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(5), "deadline of the call");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "sluicectl --server=HOST:PORT check DOMAIN key=value[,key=value...] [...] [--hits=N]\n"
      "Each key=value list is one descriptor. Exit status: 0 OK, 2 OVER_LIMIT, 1 error.");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() < 4 || std::string(args[1]) != "check") {
    std::fprintf(stderr, "usage: %s\n", absl::ProgramUsageMessage().data());
    return 1;
  }
  std::vector<std::string> descriptors(args.begin() + 3, args.end());
  auto request = sluice::BuildRequest(args[2], descriptors, absl::GetFlag(FLAGS_hits));
  if (!request.ok()) {
    std::fprintf(stderr, "sluicectl: %s\n", std::string(request.status().message()).c_str());
    return 1;
  }
  sluice::RlsClient client(absl::GetFlag(FLAGS_server));
  auto response = client.ShouldRateLimit(*request, absl::GetFlag(FLAGS_timeout));
  if (!response.ok()) {
    std::fprintf(stderr, "sluicectl: %s: %s\n",
                 absl::StatusCodeToString(response.status().code()).c_str(),
                 std::string(response.status().message()).c_str());
    return 1;
  }
  std::fputs(sluice::FormatResponseTable(*request, *response).c_str(), stdout);
  return response->overall_code() == sluice::RlsResponse::OVER_LIMIT ? 2 : 0;
}
