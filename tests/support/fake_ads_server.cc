#include "tests/support/fake_ads_server.h"

#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice::testing {

namespace discovery = ::envoy::service::discovery::v3;
namespace rls = ::ratelimit::config::ratelimit::v3;

constexpr char kTypeUrl[] = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig";

class FakeAdsServer::Service final : public discovery::AggregatedDiscoveryService::Service {
 public:
  grpc::Status StreamAggregatedResources(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<discovery::DiscoveryResponse, discovery::DiscoveryRequest>* stream)
      override {
    std::multimap<std::string, std::string> metadata;
    for (const auto& [key, value] : context->client_metadata()) {
      metadata.emplace(std::string(key.data(), key.size()),
                       std::string(value.data(), value.size()));
    }
    int number = 0;
    {
      MutexLock lock(mu_);
      number = ++streams_;
    }
    // Requests are read on a thread of their own; this one sends.
    bool ended = false;
    std::thread reader([&] {
      discovery::DiscoveryRequest request;
      while (stream->Read(&request)) {
        MutexLock lock(mu_);
        received_.push_back({request, metadata, number});
        changed_.NotifyAll();
      }
      MutexLock lock(mu_);
      ended = true;
      changed_.NotifyAll();
    });
    int sent_generation = 0;
    while (true) {
      discovery::DiscoveryResponse response;
      {
        MutexLock lock(mu_);
        while (!ended && !stopping_ && (silent_ || generation_ == sent_generation)) {
          changed_.Wait(mu_);
        }
        if (ended || stopping_) {
          break;
        }
        sent_generation = generation_;
        response = snapshot_;
      }
      if (!stream->Write(response)) {
        break;
      }
    }
    context->TryCancel();
    reader.join();
    return grpc::Status::OK;
  }

  std::string Set(discovery::DiscoveryResponse snapshot) {
    MutexLock lock(mu_);
    snapshot_ = std::move(snapshot);
    ++generation_;
    snapshot_.set_nonce(absl::StrCat(nonce_prefix_, "nonce-", generation_));
    changed_.NotifyAll();
    return snapshot_.nonce();
  }
  void SetNoncePrefix(const std::string& prefix) {
    MutexLock lock(mu_);
    nonce_prefix_ = prefix;
  }
  void SetSilent(bool silent) {
    MutexLock lock(mu_);
    silent_ = silent;
    changed_.NotifyAll();
  }
  void Stopping() {
    MutexLock lock(mu_);
    stopping_ = true;
    changed_.NotifyAll();
  }

  std::optional<std::pair<size_t, Received>> WaitFor(
      size_t from, const std::function<bool(const Received&)>& match, absl::Duration timeout) {
    const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout);
    MutexLock lock(mu_);
    while (true) {
      for (size_t i = from; i < received_.size(); ++i) {
        if (match(received_[i])) {
          return std::make_pair(i, received_[i]);
        }
      }
      from = std::max(from, received_.size());
      if (std::chrono::steady_clock::now() >= deadline) {
        return std::nullopt;
      }
      changed_.WaitUntil(mu_, deadline);
    }
  }

  size_t requests() {
    MutexLock lock(mu_);
    return received_.size();
  }
  int streams() {
    MutexLock lock(mu_);
    return streams_;
  }

 private:
  Mutex mu_;
  CondVar changed_;
  discovery::DiscoveryResponse snapshot_ ABSL_GUARDED_BY(mu_);
  int generation_ ABSL_GUARDED_BY(mu_) = 0;  // 0: no snapshot yet
  std::string nonce_prefix_ ABSL_GUARDED_BY(mu_);
  bool silent_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int streams_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Received> received_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::unique_ptr<FakeAdsServer>> FakeAdsServer::Start(
    int port, std::shared_ptr<grpc::ServerCredentials> credentials) {
  std::unique_ptr<FakeAdsServer> server(new FakeAdsServer());
  server->service_ = std::make_unique<Service>();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("127.0.0.1:", port),
                           credentials != nullptr ? credentials : grpc::InsecureServerCredentials(),
                           &server->port_);
  builder.RegisterService(server->service_.get());
  // Large enough for the huge-snapshot tests: the client's limit is what they test.
  builder.SetMaxSendMessageSize(64 << 20);
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("fake ADS server cannot listen on port ", port));
  }
  return server;
}

FakeAdsServer::~FakeAdsServer() { Stop(); }

std::string FakeAdsServer::address() const { return absl::StrCat("127.0.0.1:", port_); }

std::string FakeAdsServer::Push(const std::string& version,
                                const std::vector<rls::RateLimitConfig>& resources) {
  std::vector<google::protobuf::Any> packed;
  for (const rls::RateLimitConfig& resource : resources) {
    packed.emplace_back().PackFrom(resource);
  }
  return PushAny(version, std::move(packed));
}

std::string FakeAdsServer::PushAny(const std::string& version,
                                   std::vector<google::protobuf::Any> resources) {
  discovery::DiscoveryResponse snapshot;
  snapshot.set_version_info(version);
  snapshot.set_type_url(kTypeUrl);
  for (google::protobuf::Any& resource : resources) {
    *snapshot.add_resources() = std::move(resource);
  }
  return service_->Set(std::move(snapshot));
}

void FakeAdsServer::SetNoncePrefix(const std::string& prefix) { service_->SetNoncePrefix(prefix); }

void FakeAdsServer::SetSilent(bool silent) { service_->SetSilent(silent); }

void FakeAdsServer::Stop() {
  if (server_ == nullptr) {
    return;
  }
  service_->Stopping();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server_->Wait();
  server_.reset();
}

std::optional<std::pair<size_t, FakeAdsServer::Received>> FakeAdsServer::WaitFor(
    size_t from, const std::function<bool(const Received&)>& match, absl::Duration timeout) {
  return service_->WaitFor(from, match, timeout);
}

size_t FakeAdsServer::requests() const { return service_->requests(); }
int FakeAdsServer::streams() const { return service_->streams(); }

rls::RateLimitConfig Domain(const std::string& domain, const std::string& key,
                            const std::string& value, uint32_t requests_per_unit,
                            rls::RateLimitUnit unit) {
  rls::RateLimitConfig config;
  config.set_name(absl::StrCat("xds-", domain));
  config.set_domain(domain);
  rls::RateLimitDescriptor* descriptor = config.add_descriptors();
  descriptor->set_key(key);
  descriptor->set_value(value);
  descriptor->mutable_rate_limit()->set_unit(unit);
  descriptor->mutable_rate_limit()->set_requests_per_unit(requests_per_unit);
  return config;
}

}  // namespace sluice::testing
