// sluice-floor: the benchmark's floor, an Envoy RLS v3 server that answers OK to everything
// (overall_code OK, one OK status per descriptor) without looking at the request. It serves
// with the gRPC settings Sluice serves with (ApplyGrpcServerSettings, the same
// GrpcServerSettings{} as server/main.cc, the callback API, the default health service), so
// the difference between Sluice and the floor is Sluice's own work, not gRPC's.
//   sluice-floor --grpc_address=127.0.0.1:9081
// SIGTERM or SIGINT: stop and exit 0.
#include <signal.h>

#include <cstdio>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/synchronization/mutex.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/service/grpc_options.h"

ABSL_FLAG(std::string, grpc_address, "127.0.0.1:9081", "gRPC listen address (HOST:PORT)");

namespace sluice {
namespace {

using RateLimitRequest = envoy::service::ratelimit::v3::RateLimitRequest;
using RateLimitResponse = envoy::service::ratelimit::v3::RateLimitResponse;

class FloorService final
    : public envoy::service::ratelimit::v3::RateLimitService::CallbackService {
 public:
  grpc::ServerUnaryReactor* ShouldRateLimit(grpc::CallbackServerContext* context,
                                            const RateLimitRequest* request,
                                            RateLimitResponse* response) override {
    response->set_overall_code(RateLimitResponse::OK);
    for (int i = 0; i < request->descriptors_size(); ++i) {
      response->add_statuses()->set_code(RateLimitResponse::OK);
    }
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

int Run() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  FloorService service;
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  ApplyGrpcServerSettings(GrpcServerSettings{}, builder);
  int port = 0;
  builder.AddListeningPort(absl::GetFlag(FLAGS_grpc_address), grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "sluice-floor: cannot listen on %s\n",
                 absl::GetFlag(FLAGS_grpc_address).c_str());
    return 1;
  }
  std::fprintf(stderr, "sluice-floor: serving on port %d\n", port);
  int sig = 0;
  sigwait(&signals, &sig);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server->Wait();
  return 0;
}

}  // namespace
}  // namespace sluice

int main(int argc, char** argv) {
  // gRPC locks absl::Mutex on every call; Debian's abseil checks each lock for deadlock cycles
  // by default, which costs a few percent of CPU per request. (Kept identical in sluice-floor.)
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::SetProgramUsageMessage(
      "An RLS v3 server that answers OK to everything: the cost of gRPC alone.\n"
      "  sluice-floor --grpc_address=HOST:PORT");
  absl::ParseCommandLine(argc, argv);
  return sluice::Run();
}
