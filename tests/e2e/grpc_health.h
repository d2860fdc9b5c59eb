// Raw unary gRPC calls through a generic stub, and grpc.health.v1.Health/Check with it (the
// health protos are not generated here), for the end-to-end tests. Header-only; each call makes its own channel.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace sluice::testing {

// Calls the unary `method` ("/package.Service/Method") with `bytes` as the serialized request;
// returns the serialized reply, or "error <code>: <message>" when the call fails.
inline std::string GrpcRawUnaryCall(const std::string& address, const std::string& method,
                                    const std::string& bytes) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::ByteBuffer reply;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status result;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &reply, [&](grpc::Status s) {
    std::lock_guard<std::mutex> lock(mu);
    result = s;
    done = true;
    cv.notify_one();
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  if (!result.ok()) {
    return absl::StrCat("error ", result.error_code(), ": ", result.error_message());
  }
  std::vector<grpc::Slice> slices;
  if (!reply.Dump(&slices).ok()) {
    return "error: cannot read the reply";
  }
  std::string out;
  for (const grpc::Slice& s : slices) {
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return out;
}

// The serialized HealthCheckResponse for `service` ("\x08\x01" is SERVING), or
// "error <code>: <message>" when the call fails. REQUIRES: service.size() < 128.
inline std::string GrpcHealthCheck(const std::string& address, const std::string& service) {
  // HealthCheckRequest{service}: field 1, length-delimited; "" is the empty message.
  const std::string bytes =
      service.empty() ? std::string()
                      : absl::StrCat("\x0a", std::string(1, static_cast<char>(service.size())),
                                     service);
  return GrpcRawUnaryCall(address, "/grpc.health.v1.Health/Check", bytes);
}

}  // namespace sluice::testing
