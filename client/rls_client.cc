#include "client/rls_client.h"

#include <algorithm>

#include "absl/strings/string_view.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "grpcpp/grpcpp.h"

namespace sluice {
namespace {

std::string UnitText(RlsResponse::RateLimit::Unit unit) {
  return absl::AsciiStrToLower(RlsResponse::RateLimit::Unit_Name(unit));
}

std::string CodeText(RlsResponse::Code code) { return RlsResponse::Code_Name(code); }

}  // namespace

RlsClient::RlsClient(const std::string& address)
    : RlsClient(grpc::CreateChannel(address, grpc::InsecureChannelCredentials())) {}

RlsClient::RlsClient(std::shared_ptr<grpc::Channel> channel)
    : stub_(envoy::service::ratelimit::v3::RateLimitService::NewStub(std::move(channel))) {}

absl::StatusOr<RlsResponse> RlsClient::ShouldRateLimit(const RlsRequest& request,
                                                       absl::Duration timeout) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(timeout));
  RlsResponse response;
  grpc::Status status = stub_->ShouldRateLimit(&context, request, &response);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        status.error_message());
  }
  return response;
}

absl::StatusOr<RlsRequest> BuildRequest(absl::string_view domain,
                                        const std::vector<std::string>& descriptors,
                                        uint32_t hits) {
  RlsRequest request;
  request.set_domain(std::string(domain));
  if (hits > 0) {
    request.set_hits_addend(hits);
  }
  for (const std::string& spec : descriptors) {
    auto* descriptor = request.add_descriptors();
    for (absl::string_view part : absl::StrSplit(spec, ',')) {
      if (part.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("empty entry in descriptor '", spec, "'"));
      }
      auto* entry = descriptor->add_entries();
      size_t eq = part.find('=');
      entry->set_key(std::string(part.substr(0, eq)));
      if (eq != absl::string_view::npos) {
        entry->set_value(std::string(part.substr(eq + 1)));
      }
      if (entry->key().empty()) {
        return absl::InvalidArgumentError(absl::StrCat("empty key in descriptor '", spec, "'"));
      }
    }
  }
  return request;
}

std::string FormatResponseTable(const RlsRequest& request, const RlsResponse& response) {
  std::vector<std::vector<std::string>> rows = {
      {"DESCRIPTOR", "CODE", "LIMIT", "REMAINING", "RESET"}};
  for (int i = 0; i < response.statuses_size(); ++i) {
    const auto& status = response.statuses(i);
    std::string descriptor;
    if (i < request.descriptors_size()) {
      std::vector<std::string> parts;
      for (const auto& e : request.descriptors(i).entries()) {
        parts.push_back(absl::StrCat(e.key(), "=", e.value()));
      }
      descriptor = absl::StrJoin(parts, ",");
    }
    std::string limit = "-";
    if (status.has_current_limit()) {
      limit = absl::StrCat(status.current_limit().requests_per_unit(), "/",
                           UnitText(status.current_limit().unit()));
      if (!status.current_limit().name().empty()) {
        absl::StrAppend(&limit, " (", status.current_limit().name(), ")");
      }
    }
    std::string reset = "-";
    if (status.has_duration_until_reset()) {
      double seconds = static_cast<double>(status.duration_until_reset().seconds()) +
                       status.duration_until_reset().nanos() / 1e9;
      reset = absl::StrFormat("%.3fs", seconds);
    }
    rows.push_back({descriptor, CodeText(status.code()), limit,
                    status.has_current_limit() ? absl::StrCat(status.limit_remaining()) : "-",
                    reset});
  }
  std::vector<size_t> widths(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) {
      widths[c] = std::max(widths[c], row[c].size());
    }
  }
  std::string out;
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) {
      absl::StrAppend(&out, row[c]);
      if (c + 1 < row.size()) {
        out.append(widths[c] - row[c].size() + 2, ' ');
      }
    }
    out.push_back('\n');
  }
  absl::StrAppend(&out, "overall: ", CodeText(response.overall_code()));
  for (const auto& header : response.response_headers_to_add()) {
    absl::StrAppend(&out, "  ", header.key(), ": ", header.value());
  }
  out.push_back('\n');
  return out;
}

}  // namespace sluice
