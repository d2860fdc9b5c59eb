// End-to-end: traces of decisions on the real build/bin/sluice, exported over OTLP to a fake
// collector (both protocols). A decision's span continues the caller's trace (W3C or B3 in the
// gRPC metadata, or the /json request's headers); the Redis work under it is one span per node
// call; a timeout says why; a collector that is down costs nothing but the drop counter; and
// Envoy Gateway's variables turn it all on unchanged.
#include <memory>
#include <set>
#include <thread>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "envoy/service/rate_limit_quota/v3/rlqs.grpc.pb.h"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/support/fake_otlp_collector.h"
#include "tests/support/process.h"
#include "tests/support/redis_cluster.h"
#include "tests/support/redis_server.h"
#include "tests/support/sluice_server.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using testing::ChildProcess;
using testing::FakeOtlpCollector;
using testing::FreePort;
using testing::HttpGet;
using testing::RunCommand;
using testing::SluiceServer;
using testing::TempDir;
using testing::WaitForPort;
using RlsService = envoy::service::ratelimit::v3::RateLimitService;
using RlsRequest = envoy::service::ratelimit::v3::RateLimitRequest;
using RlsResponse = envoy::service::ratelimit::v3::RateLimitResponse;
using OtlpSpan = opentelemetry::proto::trace::v1::Span;

constexpr char kConfig[] = R"(domain: traced
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 100, algorithm: token_bucket}
)";

constexpr char kCallerTrace[] = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr char kCallerSpan[] = "00f067aa0ba902b7";
constexpr char kMethodSpan[] = "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

std::string Hex(const std::string& bytes) { return absl::BytesToHexString(bytes); }

std::string StringAttribute(const google::protobuf::RepeatedPtrField<
                                opentelemetry::proto::common::v1::KeyValue>& attributes,
                            const std::string& key) {
  for (const auto& attribute : attributes) {
    if (attribute.key() == key) {
      return attribute.value().has_string_value() ? attribute.value().string_value()
                                                  : absl::StrCat(attribute.value().int_value());
    }
  }
  return "";
}

RlsRequest Request(const std::vector<std::string>& users) {
  RlsRequest request;
  request.set_domain("traced");
  for (const std::string& user : users) {
    auto* entry = request.add_descriptors()->add_entries();
    entry->set_key("user");
    entry->set_value(user);
  }
  return request;
}

class TracingE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto collector = FakeOtlpCollector::Start();
    ASSERT_TRUE(collector.ok()) << collector.status();
    collector_ = std::move(*collector);
    config_ = dir_.WriteFile("traced.yaml", kConfig);
  }

  void StartSluice(std::vector<std::string> flags) {
    flags.push_back("--tracing_export_interval=100ms");
    auto server = SluiceServer::Start(config_, flags, dir_.path());
    ASSERT_TRUE(server.ok()) << server.status();
    sluice_ = std::move(*server);
    stub_ = RlsService::NewStub(
        grpc::CreateChannel(sluice_->grpc_address(), grpc::InsecureChannelCredentials()));
  }

  // One call with `metadata` (name, value pairs); its gRPC status.
  grpc::Status Call(const RlsRequest& request,
                    const std::vector<std::pair<std::string, std::string>>& metadata,
                    RlsResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    for (const auto& [name, value] : metadata) {
      context.AddMetadata(name, value);
    }
    return stub_->ShouldRateLimit(&context, request, response);
  }

  // The spans received so far named `name`.
  std::vector<OtlpSpan> Named(const std::string& name) const {
    std::vector<OtlpSpan> out;
    for (const auto& received : collector_->Spans()) {
      if (received.span.name() == name) {
        out.push_back(received.span);
      }
    }
    return out;
  }

  // Waits until `count` spans named `name` have arrived, up to 10 s; true if they have. Spans
  // leave in the order they end, so every span that ended before the last of them is in too.
  bool WaitForNamed(const std::string& name, size_t count) const {
    for (int attempt = 0; attempt < 200; ++attempt) {
      if (Named(name).size() >= count) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  TempDir dir_;
  std::string config_;
  std::unique_ptr<FakeOtlpCollector> collector_;
  std::unique_ptr<SluiceServer> sluice_;
  std::unique_ptr<RlsService::Stub> stub_;
};

// Verifies that a call carrying W3C trace context gets a server span in the caller's trace, a
// child of the caller's span, describing the decision, exported over OTLP/HTTP; that a call the
// caller did not sample is not traced; and that a /json call's headers are honoured the same way.
TEST_F(TracingE2eTest, DecisionSpanContinuesTheCallersTrace) {
  StartSluice({"--tracing", absl::StrCat("--tracing_endpoint=", collector_->http_endpoint())});
  RlsResponse response;
  const std::string traceparent = absl::StrCat("00-", kCallerTrace, "-", kCallerSpan, "-01");
  ASSERT_TRUE(Call(Request({"alice", "bob"}),
                   {{"traceparent", traceparent}, {"tracestate", "vendor=abc"}}, &response)
                  .ok());
  ASSERT_TRUE(Call(Request({"carol"}),
                   {{"traceparent", absl::StrCat("00-", kCallerTrace, "-", kCallerSpan, "-00")}},
                   &response)
                  .ok());
  ASSERT_TRUE(collector_->WaitForSpans(1, absl::Seconds(10))) << sluice_->ReadLog();
  const std::vector<OtlpSpan> calls = Named(kMethodSpan);
  ASSERT_EQ(calls.size(), 1u);
  const OtlpSpan& span = calls[0];
  EXPECT_EQ(Hex(span.trace_id()), kCallerTrace);
  EXPECT_EQ(Hex(span.parent_span_id()), kCallerSpan);
  EXPECT_EQ(span.trace_state(), "vendor=abc");
  EXPECT_EQ(span.kind(), OtlpSpan::SPAN_KIND_SERVER);
  EXPECT_EQ(StringAttribute(span.attributes(), "ratelimit.domain"), "traced");
  EXPECT_EQ(StringAttribute(span.attributes(), "ratelimit.descriptors"), "2");
  EXPECT_EQ(StringAttribute(span.attributes(), "ratelimit.descriptor_keys"), "user;user");
  EXPECT_EQ(StringAttribute(span.attributes(), "ratelimit.overall_code"), "OK");
  EXPECT_EQ(StringAttribute(span.attributes(), "rpc.grpc.status_code"), "0");
  const auto received = collector_->Spans();
  EXPECT_EQ(received[0].protocol, FakeOtlpCollector::Protocol::kHttp);
  EXPECT_EQ(StringAttribute(received[0].resource.attributes(), "service.name"), "sluice");
  EXPECT_FALSE(StringAttribute(received[0].resource.attributes(), "service.instance.id").empty());

  // /json: the same context as HTTP headers.
  const auto [code, out] = RunCommand(absl::StrCat(
      "curl -s -o /dev/null -w '%{http_code}' -H 'traceparent: ", traceparent,
      "' -d '{\"domain\":\"traced\",\"descriptors\":[{\"entries\":[{\"key\":\"user\","
      "\"value\":\"dave\"}]}]}' http://127.0.0.1:",
      sluice_->http_port(), "/json"));
  ASSERT_EQ(out, "200");
  ASSERT_TRUE(collector_->WaitForSpans(2, absl::Seconds(10)));
  const std::vector<OtlpSpan> json = Named("POST /json");
  ASSERT_EQ(json.size(), 1u);
  EXPECT_EQ(Hex(json[0].trace_id()), kCallerTrace);
  EXPECT_EQ(Hex(json[0].parent_span_id()), kCallerSpan);
  EXPECT_EQ(StringAttribute(json[0].attributes(), "http.response.status_code"), "200");
  // The unsampled call made nothing.
  EXPECT_EQ(Named(kMethodSpan).size(), 1u);
}

// Verifies a quota stream's report gets a span of its own (rlqs.report: domain, buckets), and a
// refused one says why.
TEST_F(TracingE2eTest, QuotaReportsAreTraced) {
  StartSluice({"--tracing", absl::StrCat("--tracing_endpoint=", collector_->http_endpoint())});
  namespace rlqs = envoy::service::rate_limit_quota::v3;
  auto stub = rlqs::RateLimitQuotaService::NewStub(
      grpc::CreateChannel(sluice_->grpc_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto stream = stub->StreamRateLimitQuotas(&context);
  rlqs::RateLimitQuotaUsageReports reports;
  reports.set_domain("traced");
  auto* usage = reports.add_bucket_quota_usages();
  (*usage->mutable_bucket_id()->mutable_bucket())["user"] = "erin";
  usage->mutable_time_elapsed()->set_seconds(0);  // Envoy's first report of a bucket
  ASSERT_TRUE(stream->Write(reports));
  rlqs::RateLimitQuotaResponse response;
  ASSERT_TRUE(stream->Read(&response));
  reports.set_domain("elsewhere");  // refused: a stream reports one domain
  stream->Write(reports);
  stream->WritesDone();
  while (stream->Read(&response)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_TRUE(WaitForNamed("rlqs.report", 2)) << sluice_->ReadLog();
  const std::vector<OtlpSpan> spans = Named("rlqs.report");
  EXPECT_EQ(StringAttribute(spans[0].attributes(), "ratelimit.domain"), "traced");
  EXPECT_EQ(StringAttribute(spans[0].attributes(), "rlqs.buckets"), "1");
  EXPECT_EQ(spans[1].status().code(), opentelemetry::proto::trace::v1::Status::STATUS_CODE_ERROR);
  EXPECT_THAT(spans[1].status().message(), HasSubstr("a stream reports one domain"));
}

// Verifies OTLP/gRPC export and B3 context: a call with B3 headers continues the caller's trace;
// at a sampling rate of 0 a call without context is not traced, and a sampled caller's still is
// (parent-based).
TEST_F(TracingE2eTest, GrpcExportWithB3AndParentBasedSampling) {
  StartSluice({"--tracing", "--tracing_protocol=grpc", "--tracing_sampling_rate=0",
               absl::StrCat("--tracing_endpoint=", collector_->grpc_endpoint())});
  RlsResponse response;
  ASSERT_TRUE(Call(Request({"erin"}), {}, &response).ok());
  ASSERT_TRUE(Call(Request({"frank"}),
                   {{"x-b3-traceid", kCallerTrace}, {"x-b3-spanid", kCallerSpan},
                    {"x-b3-sampled", "1"}},
                   &response)
                  .ok());
  ASSERT_TRUE(collector_->WaitForSpans(1, absl::Seconds(10))) << sluice_->ReadLog();
  const auto received = collector_->Spans();
  ASSERT_EQ(received.size(), 1u);
  EXPECT_EQ(received[0].protocol, FakeOtlpCollector::Protocol::kGrpc);
  EXPECT_EQ(Hex(received[0].span.trace_id()), kCallerTrace);
  EXPECT_EQ(Hex(received[0].span.parent_span_id()), kCallerSpan);
}

// Verifies the Redis work under a decision on a Redis Cluster: one client span per node call,
// each naming its node, all children of the decision's span, whose keys add up to the request's
// descriptors; and that a decision whose Redis misses its budget says why on its span.
TEST_F(TracingE2eTest, ClusterCallsAreOneSpanPerNodeAndTimeoutsSayWhy) {
  testing::RedisClusterOptions options;
  options.replicas_per_master = 0;
  auto cluster = testing::RedisCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  StartSluice({"--tracing", absl::StrCat("--tracing_endpoint=", collector_->http_endpoint()),
               "--backend=redis_cluster",
               absl::StrCat("--redis_addresses=", (*cluster)->SeedAddresses()[0]),
               "--redis_timeout=200ms", "--failure_mode=allow"});
  std::vector<std::string> users;
  for (int i = 0; i < 12; ++i) {
    users.push_back(absl::StrCat("user", i));
  }
  RlsResponse response;
  ASSERT_TRUE(Call(Request(users), {}, &response).ok());
  ASSERT_TRUE(WaitForNamed(kMethodSpan, 1)) << sluice_->ReadLog();
  const std::vector<OtlpSpan> calls = Named(kMethodSpan);
  ASSERT_EQ(calls.size(), 1u);
  std::set<std::string> nodes;
  int64_t keys = 0;
  const std::vector<OtlpSpan> redis = Named("redis");
  for (const OtlpSpan& span : redis) {
    EXPECT_EQ(span.trace_id(), calls[0].trace_id());
    EXPECT_EQ(span.parent_span_id(), calls[0].span_id());
    EXPECT_EQ(span.kind(), OtlpSpan::SPAN_KIND_CLIENT);
    nodes.insert(StringAttribute(span.attributes(), "server.address"));
    keys += std::stoll(StringAttribute(span.attributes(), "sluice.redis.keys"));
  }
  // One span per node: no node twice.
  EXPECT_EQ(nodes.size(), redis.size());
  EXPECT_GT(nodes.size(), 1u);
  EXPECT_EQ(keys, 12);

  // Every master paused: the decision falls to the failure mode, and its span says why.
  auto masters = (*cluster)->Masters();
  ASSERT_TRUE(masters.ok());
  for (const std::string& master : *masters) {
    (*cluster)->ServerAt(master)->Pause();
  }
  ASSERT_TRUE(Call(Request({"user1"}), {}, &response).ok());
  for (const std::string& master : *masters) {
    (*cluster)->ServerAt(master)->Resume();
  }
  ASSERT_TRUE(WaitForNamed(kMethodSpan, 2));
  const std::vector<OtlpSpan> after = Named(kMethodSpan);
  ASSERT_EQ(after.size(), 2u);
  const OtlpSpan& failed = after[1];
  EXPECT_EQ(failed.status().code(), opentelemetry::proto::trace::v1::Status::STATUS_CODE_ERROR);
  EXPECT_THAT(StringAttribute(failed.attributes(), "sluice.failure_reason"), HasSubstr("timeout"));
  EXPECT_EQ(StringAttribute(failed.attributes(), "sluice.failure_mode"), "allow");
  EXPECT_EQ(StringAttribute(failed.attributes(), "ratelimit.overall_code"), "OK");
}

// Verifies that a collector that is down costs the decisions nothing: every call is answered,
// and the spans are dropped and counted.
TEST_F(TracingE2eTest, DeadCollectorOnlyCountsDroppedSpans) {
  collector_->SetMode(FakeOtlpCollector::Mode::kFail);
  StartSluice({"--tracing", absl::StrCat("--tracing_endpoint=", collector_->http_endpoint()),
               "--tracing_timeout=200ms"});
  RlsResponse response;
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(Call(Request({absl::StrCat("u", i)}), {}, &response).ok());
    EXPECT_EQ(response.overall_code(), RlsResponse::OK);
  }
  ASSERT_TRUE(collector_->WaitForExports(1, absl::Seconds(10)));
  std::string metrics;
  for (int attempt = 0; attempt < 50; ++attempt) {
    metrics = HttpGet(sluice_->http_port(), "/metrics");
    if (metrics.find("sluice_tracing_spans_dropped_total{reason=\"export_failed\"} 20") !=
        std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_THAT(metrics, HasSubstr("sluice_tracing_spans_dropped_total{reason=\"export_failed\"} 20"));
  EXPECT_THAT(metrics, HasSubstr("sluice_tracing_spans_exported_total 0"));
  EXPECT_TRUE(collector_->Spans().empty());
}

// Verifies that Envoy Gateway's environment for the rate-limit deployment (TRACING_ENABLED and
// the service settings it sets, OTEL_EXPORTER_OTLP_ENDPOINT with the collector's http:// URL)
// exports spans under its service name, namespace and instance id, with no flag.
TEST_F(TracingE2eTest, EnvoyGatewayVariablesExportUnchanged) {
  const int grpc_port = FreePort();
  const int http_port = FreePort();
  const std::string endpoint =
      absl::StrCat("http://127.0.0.1:", collector_->http_port());  // base: /v1/traces appended
  ChildProcess sluice(
      {SluiceServer::BinaryPath("sluice"), absl::StrCat("--config=", config_),
       "--backend=memory", absl::StrCat("--grpc_address=127.0.0.1:", grpc_port),
       absl::StrCat("--http_address=127.0.0.1:", http_port)},
      absl::StrCat(dir_.path(), "/eg.log"),
      {"TRACING_ENABLED=true", "TRACING_SERVICE_NAME=envoy-ratelimit",
       "TRACING_SERVICE_NAMESPACE=envoy-gateway-system",
       "TRACING_SERVICE_INSTANCE_ID=envoy-ratelimit-7d9c-abcde", "TRACING_SAMPLING_RATE=1.0",
       absl::StrCat("OTEL_EXPORTER_OTLP_ENDPOINT=", endpoint), "OTEL_BSP_SCHEDULE_DELAY=100",
       // Not Envoy Gateway's: a loopback debug port, not upstream's default 0.0.0.0:6070.
       "DEBUG_HOST=127.0.0.1", absl::StrCat("DEBUG_PORT=", FreePort())});
  ASSERT_TRUE(WaitForPort(grpc_port, std::chrono::seconds(20))) << sluice.ReadLog();
  stub_ = RlsService::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", grpc_port),
                                                  grpc::InsecureChannelCredentials()));
  RlsResponse response;
  ASSERT_TRUE(Call(Request({"gina"}), {}, &response).ok());
  ASSERT_TRUE(collector_->WaitForSpans(1, absl::Seconds(10))) << sluice.ReadLog();
  const auto received = collector_->Spans();
  const auto& resource = received[0].resource.attributes();
  EXPECT_EQ(StringAttribute(resource, "service.name"), "envoy-ratelimit");
  EXPECT_EQ(StringAttribute(resource, "service.namespace"), "envoy-gateway-system");
  EXPECT_EQ(StringAttribute(resource, "service.instance.id"), "envoy-ratelimit-7d9c-abcde");
  EXPECT_EQ(received[0].span.name(), kMethodSpan);
}

}  // namespace
}  // namespace sluice
