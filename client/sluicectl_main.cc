// sluicectl: asks an RLS v3 server for a decision and prints it as a table; or, with `quota`,
// reports a steady demand on one bucket of the Rate Limit Quota Service, as an Envoy would, and
// prints every assignment as it arrives.
//   sluicectl --server=HOST:PORT [--tls_ca=PEM [--tls_cert=PEM --tls_key=PEM]]
//             check DOMAIN key=value[,key=value...] [...] [--hits=N] [--refund]
//   sluicectl ... quota DOMAIN key=value [key=value...] [--rate=N] [--interval=1s]
//             [--duration=10s]
// or, with the admin API of a Sluice started with --admin_api (its HTTP address), shows what a
// descriptor's rules hold, or resets them:
//   sluicectl --http=HOST:PORT [--admin_token_file=FILE] inspect DOMAIN key=value[,...] [...]
//             [--limit=N/unit]
//   sluicectl --http=HOST:PORT [--admin_token_file=FILE] reset DOMAIN key=value[,...] [...]
//             [--limit=N/unit]
// Exit status: 0 all OK, 2 OVER_LIMIT, 1 any error (quota: 0 when the duration ran out, 1 when
// the stream ended first; inspect and reset: 0 when the server answered 200).
#include <curl/curl.h>

#include <algorithm>
#include <cstdio>
#include <thread>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "envoy/service/rate_limit_quota/v3/rlqs.grpc.pb.h"
#include "client/admin_client.h"
#include "client/rls_client.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "server/common/flag_file.h"

ABSL_FLAG(std::string, server, "localhost:8081", "RLS server address, HOST:PORT");
ABSL_FLAG(uint32_t, hits, 0, "hits this request adds (0: the server's default of 1)");
ABSL_FLAG(bool, refund, false,
          "mark every descriptor is_negative_hits (Envoy 1.38): give the hits back instead of "
          "taking them");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(5), "deadline of the call");
ABSL_FLAG(std::string, tls_ca, "",
          "TLS to the server: the PEM bundle its certificate must chain to (empty: plaintext)");
ABSL_FLAG(std::string, tls_cert, "",
          "mutual TLS: this client's certificate chain (PEM); needs --tls_key and --tls_ca");
ABSL_FLAG(std::string, tls_key, "", "mutual TLS: the private key of --tls_cert (PEM)");

namespace {

// Plaintext without --tls_ca; TLS trusting --tls_ca with it, presenting --tls_cert when given.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> Credentials() {
  const std::string ca = absl::GetFlag(FLAGS_tls_ca);
  const std::string cert = absl::GetFlag(FLAGS_tls_cert);
  const std::string key = absl::GetFlag(FLAGS_tls_key);
  if (cert.empty() != key.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together: give both or neither");
  }
  if (ca.empty()) {
    if (!cert.empty()) {
      return absl::InvalidArgumentError("--tls_cert needs --tls_ca (the server's CA)");
    }
    return grpc::InsecureChannelCredentials();
  }
  grpc::SslCredentialsOptions options;
  absl::StatusOr<std::string> roots = sluice::ReadFlagFile("tls_ca", ca);
  if (!roots.ok()) {
    return roots.status();
  }
  options.pem_root_certs = *std::move(roots);
  if (!cert.empty()) {
    absl::StatusOr<std::string> chain = sluice::ReadFlagFile("tls_cert", cert);
    if (!chain.ok()) {
      return chain.status();
    }
    absl::StatusOr<std::string> private_key = sluice::ReadFlagFile("tls_key", key);
    if (!private_key.ok()) {
      return private_key.status();
    }
    options.pem_cert_chain = *std::move(chain);
    options.pem_private_key = *std::move(private_key);
  }
  return grpc::SslCredentials(options);
}

}  // namespace

ABSL_FLAG(std::string, http, "localhost:8080",
          "inspect, reset: the HTTP address (HOST:PORT) of a Sluice serving the admin API");
ABSL_FLAG(std::string, admin_token_file, "",
          "inspect, reset: a file holding the admin API's bearer token (the server's "
          "--admin_token_file); empty: none sent");
ABSL_FLAG(std::string, limit, "",
          "inspect, reset: each descriptor's limit override, N/unit (as a request's `limit`), "
          "e.g. 100/minute");

namespace {

// sluicectl inspect / reset: one POST to the admin API, its answer printed.
int Admin(bool reset, const std::string& domain, const std::vector<std::string>& descriptors) {
  const char* what = reset ? "reset" : "inspect";
  absl::StatusOr<std::string> json =
      sluice::AdminRequestJson(domain, descriptors, absl::GetFlag(FLAGS_limit));
  std::string token;
  if (json.ok() && !absl::GetFlag(FLAGS_admin_token_file).empty()) {
    absl::StatusOr<std::string> read =
        sluice::ReadSecretFile("admin_token_file", absl::GetFlag(FLAGS_admin_token_file));
    if (!read.ok()) {
      json = read.status();
    } else {
      token = *std::move(read);
    }
  }
  if (!json.ok()) {
    std::fprintf(stderr, "sluicectl %s: %s\n", what, std::string(json.status().message()).c_str());
    return 1;
  }
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    std::fprintf(stderr, "sluicectl %s: libcurl cannot start\n", what);
    return 1;
  }
  absl::StatusOr<sluice::AdminAnswer> answer =
      sluice::AdminPost(absl::GetFlag(FLAGS_http), reset ? "/admin/reset" : "/admin/inspect",
                        *json, token, absl::GetFlag(FLAGS_timeout));
  if (!answer.ok()) {
    std::fprintf(stderr, "sluicectl %s: %s\n", what,
                 std::string(answer.status().message()).c_str());
    return 1;
  }
  absl::StatusOr<std::string> text = reset ? sluice::FormatResetAnswer(answer->body)
                                           : sluice::FormatInspectAnswer(answer->body);
  if (answer->status != 200 || !text.ok()) {
    // The server's own words: 404 naming --admin_api, 401, 400 naming the field, or a reset's
    // report saying what failed.
    std::fprintf(stderr, "sluicectl %s: HTTP %ld\n%s", what, answer->status,
                 text.ok() ? text->c_str() : answer->body.c_str());
    return 1;
  }
  std::fputs(text->c_str(), stdout);
  return 0;
}

}  // namespace

ABSL_FLAG(double, rate, 10, "quota: requests a second the bucket is reported to see");
ABSL_FLAG(absl::Duration, interval, absl::Seconds(1), "quota: time between reports (whole seconds)");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(10), "quota: how long to report");

namespace {

// sluicectl quota: one stream, a first report at once and then one per --interval of --rate
// requests a second (all counted as allowed), every assignment printed as it arrives.
int Quota(const std::string& domain, const std::vector<std::string>& pairs,
          std::shared_ptr<grpc::ChannelCredentials> credentials) {
  namespace rlqs = envoy::service::rate_limit_quota::v3;
  rlqs::RateLimitQuotaUsageReports reports;
  reports.set_domain(domain);
  auto* usage = reports.add_bucket_quota_usages();
  for (const std::string& pair : pairs) {
    const size_t eq = pair.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == pair.size()) {
      std::fprintf(stderr, "sluicectl quota: '%s' is not key=value\n", pair.c_str());
      return 1;
    }
    (*usage->mutable_bucket_id()->mutable_bucket())[pair.substr(0, eq)] = pair.substr(eq + 1);
  }
  const int64_t seconds = std::max<int64_t>(1, absl::ToInt64Seconds(absl::GetFlag(FLAGS_interval)));
  const double rate = absl::GetFlag(FLAGS_rate);
  auto stub = rlqs::RateLimitQuotaService::NewStub(
      grpc::CreateChannel(absl::GetFlag(FLAGS_server), credentials));
  grpc::ClientContext context;
  auto stream = stub->StreamRateLimitQuotas(&context);
  std::thread reader([&stream] {
    rlqs::RateLimitQuotaResponse response;
    while (stream->Read(&response)) {
      for (const auto& action : response.bucket_action()) {
        std::printf("%s  %s\n", absl::FormatTime("%H:%M:%E3S", absl::Now(), absl::UTCTimeZone()).c_str(),
                    action.ShortDebugString().c_str());
        std::fflush(stdout);
      }
    }
  });
  const absl::Time end = absl::Now() + absl::GetFlag(FLAGS_duration);
  bool first = true;
  while (absl::Now() < end) {
    // As Envoy: a new bucket's first report at once, 0 s and its first request; then one every
    // interval, whole seconds.
    usage->mutable_time_elapsed()->set_seconds(first ? 0 : seconds);
    usage->set_num_requests_allowed(first ? 1 : static_cast<uint64_t>(rate * static_cast<double>(seconds)));
    first = false;
    if (!stream->Write(reports)) {
      break;
    }
    absl::SleepFor(std::min(absl::Seconds(seconds), end - absl::Now()));
  }
  const bool ran_out = absl::Now() >= end;
  stream->WritesDone();
  if (ran_out) {
    context.TryCancel();  // else the server ended it: Finish says why
  }
  reader.join();
  const grpc::Status status = stream->Finish();
  if (!ran_out) {
    std::fprintf(stderr, "sluicectl quota: the stream ended: %s\n", status.error_message().c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "sluicectl --server=HOST:PORT [--tls_ca=PEM [--tls_cert=PEM --tls_key=PEM]]\n"
      "          check DOMAIN key=value[,key=value...] [...] [--hits=N] [--refund]\n"
      "          quota DOMAIN key=value [key=value...] [--rate=N] [--interval=1s] "
      "[--duration=10s]\n"
      "sluicectl --http=HOST:PORT [--admin_token_file=FILE]\n"
      "          inspect|reset DOMAIN key=value[,key=value...] [...] [--limit=N/unit]\n"
      "Each key=value list is one descriptor. Exit status: 0 OK, 2 OVER_LIMIT, 1 error.\n"
      "quota reports --rate requests a second on one bucket of the quota service (RLQS) and "
      "prints every assignment.");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() >= 4 &&
      (std::string(args[1]) == "inspect" || std::string(args[1]) == "reset")) {
    return Admin(std::string(args[1]) == "reset", args[2],
                 std::vector<std::string>(args.begin() + 3, args.end()));
  }
  if (args.size() >= 4 && std::string(args[1]) == "quota") {
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials = Credentials();
    if (!credentials.ok()) {
      std::fprintf(stderr, "sluicectl: %s\n", std::string(credentials.status().message()).c_str());
      return 1;
    }
    return Quota(args[2], std::vector<std::string>(args.begin() + 3, args.end()), *credentials);
  }
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
  if (absl::GetFlag(FLAGS_refund)) {
    for (auto& descriptor : *request->mutable_descriptors()) {
      descriptor.set_is_negative_hits(true);
    }
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials = Credentials();
  if (!credentials.ok()) {
    std::fprintf(stderr, "sluicectl: %s\n", std::string(credentials.status().message()).c_str());
    return 1;
  }
  sluice::RlsClient client(grpc::CreateChannel(absl::GetFlag(FLAGS_server), *credentials));
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
