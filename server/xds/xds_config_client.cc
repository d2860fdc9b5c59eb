#include "server/xds/xds_config_client.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "server/common/flag_file.h"
#include "server/common/log_text.h"
#include "server/common/logging.h"
#include "server/xds/xds_config_reader.h"

namespace sluice {
namespace {

namespace discovery = ::envoy::service::discovery::v3;

// google.rpc.Code INVALID_ARGUMENT: what a NACK's error_detail carries.
constexpr int kInvalidArgument = 3;

// How much of an error message a log line shows: a config error is a path and a sentence, with
// the server's values in it already cut (config_description.h, Quoted).
constexpr size_t kLoggedMessageBytes = 1024;
// The warnings of an accepted config logged with it; the rest are counted.
constexpr size_t kLoggedWarnings = 10;

// "3 rejected snapshots not logged" for `what`, or "".
std::string NotLogged(uint64_t count, absl::string_view what) {
  return count == 0 ? std::string() : absl::StrCat("; ", count, " ", what, " not logged");
}

}  // namespace

XdsConfigClient::XdsConfigClient(XdsSettings settings, ValidateOptions validate,
                                 ConfigStore& store, Listener listener,
                                 ConnectionObserver on_connection, const Clock& clock)
    : settings_(std::move(settings)),
      validate_(validate),
      store_(store),
      listener_(std::move(listener)),
      on_connection_(std::move(on_connection)),
      backoff_(settings_.backoff_initial),
      random_(std::random_device{}()),
      rejections_(clock, {}),
      acceptances_(clock, {}),
      stream_ends_(clock, {}) {}

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
    LogStreamEnd(ended, delivered);
    if (!Sleep(NextWait(delivered))) {
      return;
    }
  }
}

void XdsConfigClient::LogStreamEnd(const grpc::Status& ended, bool delivered) {
  if (in_outage_) {
    return;
  }
  in_outage_ = true;
  // A server that answers and then breaks the stream, again and again, ends an outage each
  // time: the throttle keeps that to a line now and then.
  uint64_t skipped = 0;
  outage_logged_ = stream_ends_.Admit(
      absl::StrCat(ended.error_code(), " ", ended.error_message()), &skipped);
  if (outage_logged_) {
    SLUICE_LOG(WARNING) << SkippedNote(skipped) << "xDS: "
                        << (delivered ? "the stream from " : "no config from ") << settings_.server
                        << ": " << LogText(ended.error_message(), kLoggedMessageBytes)
                        << " (code " << ended.error_code()
                        << "); the config in force keeps deciding; retrying, logged again "
                           "once connected";
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
        if (outage_logged_) {
          SLUICE_LOG(INFO) << "xDS: connected to " << settings_.server << " again";
        }
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

absl::StatusOr<std::unique_ptr<Config>> XdsConfigClient::Read(
    const discovery::DiscoveryResponse& response) const {
  // Checked first: a version is kept and sent back in every later request once accepted, and
  // neither is worth reading resources for when the server is this far off.
  for (const auto& [field, value] :
       {std::pair<absl::string_view, absl::string_view>("version_info", response.version_info()),
        std::pair<absl::string_view, absl::string_view>("nonce", response.nonce())}) {
    if (value.size() > kMaxXdsVersionBytes) {
      return absl::InvalidArgumentError(absl::StrCat(field, " is ", value.size(),
                                                     " bytes, more than the ", kMaxXdsVersionBytes,
                                                     " this client accepts"));
    }
  }
  if (response.type_url() != kRateLimitConfigTypeUrl) {
    return absl::InvalidArgumentError(absl::StrCat("type_url ", LogText(response.type_url()),
                                                   ": this client subscribes to ",
                                                   kRateLimitConfigTypeUrl, " only"));
  }
  return ConfigFromXdsResources(response.resources(), validate_);
}

bool XdsConfigClient::Apply(const discovery::DiscoveryResponse& response, Stream& stream) {
  absl::StatusOr<std::unique_ptr<Config>> config = Read(response);
  if (!config.ok()) {
    const absl::string_view message = config.status().message();
    const std::string kind =
        absl::StrCat(response.version_info(), absl::string_view("\0", 1), message);
    uint64_t skipped = 0;
    if (rejections_.Admit(kind, &skipped)) {
      SLUICE_LOG(ERROR) << SkippedNote(skipped) << "xDS: version "
                        << LogText(response.version_info()) << " rejected, version "
                        << (version_.empty() ? "(none)" : LogText(version_))
                        << " stays in force: " << LogText(message, kLoggedMessageBytes);
    }
    // The nonce is sent back as it came, however long: it is what ties the NACK to the
    // response, and it is not kept.
    discovery::DiscoveryRequest nack = Request(response.nonce());
    nack.mutable_error_detail()->set_code(kInvalidArgument);
    // Escaped as well as cut: a proto3 string must be UTF-8, and the message may quote the
    // server's bytes.
    nack.mutable_error_detail()->set_message(LogText(message, kMaxNackDetailBytes));
    listener_(nullptr, response.version_info(), config.status());
    return stream.Write(nack);
  }
  std::shared_ptr<const Config> accepted = *std::move(config);
  store_.Set(accepted);
  version_ = response.version_info();
  uint64_t skipped = 0;
  if (acceptances_.Admit(version_, &skipped)) {
    SLUICE_LOG(INFO) << SkippedNote(skipped) << "xDS: version " << LogText(version_)
                     << " in force (" << accepted->domains().size() << " domains, "
                     << accepted->RuleCount() << " rules)"
                     << NotLogged(rejections_.TakeSkipped(), "rejected snapshots");
    const std::vector<std::string>& warnings = accepted->warnings();
    for (size_t i = 0; i < warnings.size() && i < kLoggedWarnings; ++i) {
      SLUICE_LOG(WARNING) << "config: " << LogText(warnings[i], kLoggedMessageBytes);
    }
    if (warnings.size() > kLoggedWarnings) {
      SLUICE_LOG(WARNING) << "config: " << warnings.size() - kLoggedWarnings
                          << " more warnings not logged";
    }
  }
  listener_(accepted.get(), version_, absl::OkStatus());
  {
    MutexLock lock(mu_);
    accepted_ = true;
    changed_.NotifyAll();
  }
  return stream.Write(Request(response.nonce()));
}

}  // namespace sluice
