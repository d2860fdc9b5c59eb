#include "server/xds/xds_config_client.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "server/common/flag_file.h"
#include "server/common/logging.h"
#include "server/xds/xds_config_reader.h"

namespace sluice {
namespace {

namespace discovery = ::envoy::service::discovery::v3;

// google.rpc.Code INVALID_ARGUMENT: what a NACK's error_detail carries.
constexpr int kInvalidArgument = 3;

}  // namespace

XdsConfigClient::XdsConfigClient(XdsSettings settings, ValidateOptions validate,
                                 ConfigStore& store, Listener listener,
                                 ConnectionObserver on_connection)
    : settings_(std::move(settings)),
      validate_(validate),
      store_(store),
      listener_(std::move(listener)),
      on_connection_(std::move(on_connection)),
      backoff_(settings_.backoff_initial),
      random_(std::random_device{}()) {}

XdsConfigClient::~XdsConfigClient() { Stop(); }

void XdsConfigClient::Start() {
  thread_ = std::thread([this] { Run(); });
}

bool XdsConfigClient::WaitForConfig(absl::Duration timeout) {
  const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout);
  MutexLock lock(mu_);
  while (!accepted_ && !stopping_ && std::chrono::steady_clock::now() < deadline) {
    changed_.WaitUntil(mu_, deadline);
  }
  return accepted_;
}

void XdsConfigClient::Stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
    if (context_ != nullptr) {
      context_->TryCancel();
    }
    changed_.NotifyAll();
  }
  if (thread_.joinable()) {
    thread_.join();
  }
}

void XdsConfigClient::Run() {
  SLUICE_LOG(INFO) << "xDS: config from " << settings_.server << " as node "
                   << settings_.node_id;
  while (true) {
    bool delivered = false;
    const grpc::Status ended = RunStream(&delivered);
    {
      MutexLock lock(mu_);
      if (stopping_) {
        return;
      }
    }
    if (delivered) {
      on_connection_(false);
    }
    if (!in_outage_) {
      in_outage_ = true;
      SLUICE_LOG(WARNING) << "xDS: " << (delivered ? "the stream from " : "no config from ")
                          << settings_.server << ": " << ended.error_message() << " (code "
                          << ended.error_code()
                          << "); the config in force keeps deciding; retrying, logged again "
                             "once connected";
    }
    if (!Sleep(NextWait(delivered))) {
      return;
    }
  }
}

absl::Duration XdsConfigClient::NextWait(bool delivered) {
  absl::Duration wait = settings_.connect_retry_interval;
  double spread = 0.5;
  if (delivered) {
    wait = backoff_;
    backoff_ = std::min(backoff_ * 2, settings_.backoff_max);
    spread = settings_.backoff_jitter ? settings_.backoff_random_factor : 0;
  }
  std::uniform_real_distribution<double> factor(1 - spread, 1 + spread);
  return wait * factor(random_);
}

bool XdsConfigClient::Sleep(absl::Duration wait) {
  const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(wait);
  MutexLock lock(mu_);
  while (!stopping_ && std::chrono::steady_clock::now() < deadline) {
    changed_.WaitUntil(mu_, deadline);
  }
  return !stopping_;
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> XdsConfigClient::Credentials() const {
  if (!settings_.tls) {
    return grpc::InsecureChannelCredentials();
  }
  grpc::SslCredentialsOptions options;
  if (!settings_.tls_ca.empty()) {
    absl::StatusOr<std::string> ca = ReadFlagFile("xds_tls_ca", settings_.tls_ca);
    if (!ca.ok()) {
      return ca.status();
    }
    options.pem_root_certs = *std::move(ca);
  }
  if (!settings_.tls_cert.empty()) {
    absl::StatusOr<std::string> cert = ReadFlagFile("xds_tls_cert", settings_.tls_cert);
    absl::StatusOr<std::string> key = ReadFlagFile("xds_tls_key", settings_.tls_key);
    if (!cert.ok() || !key.ok()) {
      return !cert.ok() ? cert.status() : key.status();
    }
    options.pem_cert_chain = *std::move(cert);
    options.pem_private_key = *std::move(key);
  }
  return grpc::SslCredentials(options);
}

grpc::Status XdsConfigClient::RunStream(bool* delivered) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials = Credentials();
  if (!credentials.ok()) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, std::string(credentials.status().message()));
  }
  grpc::ChannelArguments args;
  if (!settings_.tls_server_name.empty()) {
    args.SetSslTargetNameOverride(settings_.tls_server_name);
  }
  if (settings_.max_message_bytes > 0) {
    args.SetMaxReceiveMessageSize(static_cast<int>(settings_.max_message_bytes));
  }
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(settings_.server, *credentials, args);
  auto stub = discovery::AggregatedDiscoveryService::NewStub(channel);

  grpc::ClientContext context;
  for (const auto& [name, value] : settings_.headers) {
    context.AddMetadata(absl::AsciiStrToLower(name), value);
  }
  {
    MutexLock lock(mu_);
    if (stopping_) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "stopping");
    }
    context_ = &context;
  }
  std::unique_ptr<Stream> stream = stub->StreamAggregatedResources(&context);
  bool open = stream->Write(Request(""));
  discovery::DiscoveryResponse response;
  while (open && stream->Read(&response)) {
    if (!*delivered) {
      *delivered = true;
      backoff_ = settings_.backoff_initial;
      on_connection_(true);
      if (in_outage_) {
        in_outage_ = false;
        SLUICE_LOG(INFO) << "xDS: connected to " << settings_.server << " again";
      }
    }
    open = Apply(response, *stream);
  }
  stream->WritesDone();
  grpc::Status status = stream->Finish();
  MutexLock lock(mu_);
  context_ = nullptr;
  return status;
}

discovery::DiscoveryRequest XdsConfigClient::Request(const std::string& nonce) const {
  discovery::DiscoveryRequest request;
  request.set_version_info(version_);
  request.set_type_url(std::string(kRateLimitConfigTypeUrl));
  request.set_response_nonce(nonce);
  envoy::config::core::v3::Node* node = request.mutable_node();
  node->set_id(settings_.node_id);
  node->set_user_agent_name("sluice");
  auto* fields = node->mutable_metadata()->mutable_fields();
  for (const auto& [key, value] : settings_.node_metadata) {
    (*fields)[key].set_string_value(value);
  }
  return request;
}

bool XdsConfigClient::Apply(const discovery::DiscoveryResponse& response, Stream& stream) {
  absl::StatusOr<std::unique_ptr<Config>> config =
      response.type_url() == kRateLimitConfigTypeUrl
          ? ConfigFromXdsResources(response.resources(), validate_)
          : absl::InvalidArgumentError(absl::StrCat("type_url ", response.type_url(),
                                                    ": this client subscribes to ",
                                                    kRateLimitConfigTypeUrl, " only"));
  if (!config.ok()) {
    SLUICE_LOG(ERROR) << "xDS: version " << response.version_info()
                      << " rejected, version " << (version_.empty() ? "(none)" : version_)
                      << " stays in force: " << config.status().message();
    discovery::DiscoveryRequest nack = Request(response.nonce());
    nack.mutable_error_detail()->set_code(kInvalidArgument);
    nack.mutable_error_detail()->set_message(std::string(config.status().message()));
    listener_(nullptr, response.version_info(), config.status());
    return stream.Write(nack);
  }
  for (const std::string& warning : (*config)->warnings()) {
    SLUICE_LOG(WARNING) << "config: " << warning;
  }
  std::shared_ptr<const Config> accepted = *std::move(config);
  store_.Set(accepted);
  version_ = response.version_info();
  SLUICE_LOG(INFO) << "xDS: version " << version_ << " in force (" << accepted->domains().size()
                   << " domains, " << accepted->RuleCount() << " rules)";
  listener_(accepted.get(), version_, absl::OkStatus());
  {
    MutexLock lock(mu_);
    accepted_ = true;
    changed_.NotifyAll();
  }
  return stream.Write(Request(response.nonce()));
}

}  // namespace sluice
