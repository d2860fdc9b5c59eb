#include "server/trace/otlp/otlp_encoding.h"
#include "server/trace/otlp/otlp_wire.h"

#include <map>
#include <string>
#include <vector>

#include "google/protobuf/unknown_field_set.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

namespace common = ::opentelemetry::proto::common::v1;
namespace trace = ::opentelemetry::proto::trace::v1;
using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;

constexpr TraceId kTrace = {0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6,
                            0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36};
constexpr SpanId kSpan = {0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7};
constexpr SpanId kParent = {0x53, 0x99, 0x5c, 0x3f, 0x42, 0xcd, 0x8a, 0xd8};

template <size_t N>
std::string Bytes(const std::array<uint8_t, N>& id) {
  return std::string(reinterpret_cast<const char*>(id.data()), N);
}

SpanData ChildOfRemote() {
  SpanData span;
  span.trace_id = kTrace;
  span.span_id = kSpan;
  span.parent_span_id = kParent;
  span.trace_state = "vendor=opaque";
  span.trace_flags = 1;
  span.remote_parent = true;
  span.name = "ShouldRateLimit";
  span.kind = SpanKind::kServer;
  span.start_unix_nanos = 1700000000123456789;
  span.end_unix_nanos = 1700000000223456789;
  return span;
}

OtlpResource Resource() {
  OtlpResource resource;
  resource.service_name = "ratelimit";
  resource.service_namespace = "edge";
  resource.service_instance_id = "pod-7";
  resource.service_version = "1.4.0";
  return resource;
}

// The resource's string attributes by key (every one Sluice sends is a string).
std::map<std::string, std::string> ResourceAttributes(
    const opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest& request) {
  std::map<std::string, std::string> attributes;
  for (const common::KeyValue& kv : request.resource_spans(0).resource().attributes()) {
    EXPECT_EQ(kv.value().value_case(), common::AnyValue::kStringValue) << kv.key();
    attributes[kv.key()] = kv.value().string_value();
  }
  return attributes;
}

// The fields of a serialized message by number, decoded by wire type only: what any OTLP
// receiver sees, independent of the .proto this build generated code from.
std::multimap<int, UnknownField> WireFields(const std::string& bytes, UnknownFieldSet* set) {
  EXPECT_TRUE(set->ParseFromString(bytes));
  std::multimap<int, UnknownField> fields;
  for (int i = 0; i < set->field_count(); ++i) {
    fields.emplace(set->field(i).number(), set->field(i));
  }
  return fields;
}

// Verifies a span continuing a caller's trace: ids as bytes, the parent's id, trace state, name,
// kind, times, and flags saying "sampled, parent known to be remote, and it is".
TEST(OtlpEncodingTest, EncodesAChildOfARemoteParent) {
  trace::Span out;
  EncodeSpan(ChildOfRemote(), &out);
  EXPECT_EQ(out.trace_id(), Bytes(kTrace));
  EXPECT_EQ(out.span_id(), Bytes(kSpan));
  EXPECT_EQ(out.parent_span_id(), Bytes(kParent));
  EXPECT_EQ(out.trace_state(), "vendor=opaque");
  EXPECT_EQ(out.flags(), 0x301u);
  EXPECT_EQ(out.name(), "ShouldRateLimit");
  EXPECT_EQ(out.kind(), trace::Span::SPAN_KIND_SERVER);
  EXPECT_EQ(out.start_time_unix_nano(), 1700000000123456789u);
  EXPECT_EQ(out.end_time_unix_nano(), 1700000000223456789u);
  EXPECT_FALSE(out.has_status());
}

// Verifies a root span: no parent id at all (not eight zero bytes), and flags saying the parent
// is known not to be remote; a local child keeps its parent with the same flags.
TEST(OtlpEncodingTest, RootHasNoParentIdAndLocalFlags) {
  SpanData root = ChildOfRemote();
  root.parent_span_id = SpanId{};
  root.remote_parent = false;
  trace::Span out;
  EncodeSpan(root, &out);
  EXPECT_TRUE(out.parent_span_id().empty());
  EXPECT_EQ(out.flags(), 0x101u);

  SpanData child = ChildOfRemote();
  child.remote_parent = false;
  child.trace_state.clear();
  child.kind = SpanKind::kClient;
  trace::Span child_out;
  EncodeSpan(child, &child_out);
  EXPECT_EQ(child_out.parent_span_id(), Bytes(kParent));
  EXPECT_EQ(child_out.flags(), 0x101u);
  EXPECT_EQ(child_out.kind(), trace::Span::SPAN_KIND_CLIENT);
  EXPECT_TRUE(child_out.trace_state().empty());

  SpanData unsampled = root;
  unsampled.trace_flags = 0;
  trace::Span unsampled_out;
  EncodeSpan(unsampled, &unsampled_out);
  EXPECT_EQ(unsampled_out.flags(), 0x100u);
}

// Verifies each attribute type becomes its AnyValue case, in order, with the dropped count.
TEST(OtlpEncodingTest, EncodesAttributeTypesAndDroppedCount) {
  SpanData span = ChildOfRemote();
  span.Add("ratelimit.domain", "edge");
  span.Add("ratelimit.hits", int64_t{-3});
  span.Add("ratelimit.over_limit", true);
  span.Add("ratelimit.fill", 0.25);
  span.dropped_attributes = 4;
  trace::Span out;
  EncodeSpan(span, &out);
  ASSERT_EQ(out.attributes_size(), 4);
  EXPECT_EQ(out.attributes(0).key(), "ratelimit.domain");
  EXPECT_EQ(out.attributes(0).value().string_value(), "edge");
  EXPECT_EQ(out.attributes(1).key(), "ratelimit.hits");
  EXPECT_EQ(out.attributes(1).value().value_case(), common::AnyValue::kIntValue);
  EXPECT_EQ(out.attributes(1).value().int_value(), -3);
  EXPECT_EQ(out.attributes(2).value().value_case(), common::AnyValue::kBoolValue);
  EXPECT_TRUE(out.attributes(2).value().bool_value());
  EXPECT_EQ(out.attributes(3).value().value_case(), common::AnyValue::kDoubleValue);
  EXPECT_EQ(out.attributes(3).value().double_value(), 0.25);
  EXPECT_EQ(out.dropped_attributes_count(), 4u);
}

// Verifies the status: an error's code and message; an ok's code.
TEST(OtlpEncodingTest, EncodesStatus) {
  SpanData failed = ChildOfRemote();
  failed.SetError("redis unavailable");
  trace::Span out;
  EncodeSpan(failed, &out);
  EXPECT_EQ(out.status().code(), trace::Status::STATUS_CODE_ERROR);
  EXPECT_EQ(out.status().message(), "redis unavailable");

  SpanData ok = ChildOfRemote();
  ok.status = SpanStatus::kOk;
  trace::Span ok_out;
  EncodeSpan(ok, &ok_out);
  EXPECT_EQ(ok_out.status().code(), trace::Status::STATUS_CODE_OK);
}

// Verifies the request's shape: one ResourceSpans with the service's attributes, the SDK's, and
// the schema URL; one ScopeSpans named "sluice" holding the spans in order.
TEST(OtlpEncodingTest, RequestCarriesResourceAndScope) {
  SpanData second = ChildOfRemote();
  second.name = "redis EVALSHA";
  const std::vector<SpanData> spans = {ChildOfRemote(), second};
  const auto request = EncodeExportRequest(spans, Resource());
  ASSERT_EQ(request.resource_spans_size(), 1);
  EXPECT_EQ(request.resource_spans(0).schema_url(), "https://opentelemetry.io/schemas/1.7.0");
  const std::map<std::string, std::string> expected = {
      {"service.name", "ratelimit"},       {"service.namespace", "edge"},
      {"service.instance.id", "pod-7"},    {"service.version", "1.4.0"},
      {"telemetry.sdk.name", "sluice"},    {"telemetry.sdk.language", "cpp"},
  };
  EXPECT_EQ(ResourceAttributes(request), expected);
  ASSERT_EQ(request.resource_spans(0).scope_spans_size(), 1);
  const trace::ScopeSpans& scope = request.resource_spans(0).scope_spans(0);
  EXPECT_EQ(scope.scope().name(), "sluice");
  ASSERT_EQ(scope.spans_size(), 2);
  EXPECT_EQ(scope.spans(0).name(), "ShouldRateLimit");
  EXPECT_EQ(scope.spans(1).name(), "redis EVALSHA");
}

// Verifies the optional resource attributes are left out when empty, not sent empty.
TEST(OtlpEncodingTest, LeavesOutEmptyNamespaceAndVersion) {
  OtlpResource resource = Resource();
  resource.service_namespace.clear();
  resource.service_version.clear();
  const std::vector<SpanData> spans = {ChildOfRemote()};
  const std::map<std::string, std::string> attributes =
      ResourceAttributes(EncodeExportRequest(spans, resource));
  EXPECT_EQ(attributes.count("service.namespace"), 0u);
  EXPECT_EQ(attributes.count("service.version"), 0u);
  EXPECT_EQ(attributes.at("service.name"), "ratelimit");
  EXPECT_EQ(attributes.at("service.instance.id"), "pod-7");
}

// Verifies the bytes on the wire carry OTLP's field numbers and wire types (from the OTLP
// specification, written here by hand): ids and name length-delimited at 1, 2, 4, 5; kind a
// varint at 6; times fixed64 at 7 and 8; flags fixed32 at 16; status at 15 with its code at 3.
TEST(OtlpEncodingTest, WireFieldsAreOtlps) {
  SpanData span = ChildOfRemote();
  span.SetError("boom");
  span.Add("k", int64_t{7});
  trace::Span out;
  EncodeSpan(span, &out);
  UnknownFieldSet set;
  const auto fields = WireFields(out.SerializeAsString(), &set);
  auto one = [&](int number) -> const UnknownField& {
    EXPECT_EQ(fields.count(number), 1u) << "field " << number;
    return fields.find(number)->second;
  };
  EXPECT_EQ(one(1).length_delimited(), Bytes(kTrace));
  EXPECT_EQ(one(2).length_delimited(), Bytes(kSpan));
  EXPECT_EQ(one(3).length_delimited(), "vendor=opaque");
  EXPECT_EQ(one(4).length_delimited(), Bytes(kParent));
  EXPECT_EQ(one(5).length_delimited(), "ShouldRateLimit");
  EXPECT_EQ(one(6).type(), UnknownField::TYPE_VARINT);
  EXPECT_EQ(one(6).varint(), 2u);
  EXPECT_EQ(one(7).type(), UnknownField::TYPE_FIXED64);
  EXPECT_EQ(one(7).fixed64(), 1700000000123456789u);
  EXPECT_EQ(one(8).type(), UnknownField::TYPE_FIXED64);
  EXPECT_EQ(one(9).type(), UnknownField::TYPE_LENGTH_DELIMITED);
  EXPECT_EQ(one(16).type(), UnknownField::TYPE_FIXED32);
  EXPECT_EQ(one(16).fixed32(), 0x301u);

  UnknownFieldSet status_set;
  const auto status = WireFields(one(15).length_delimited(), &status_set);
  ASSERT_EQ(status.count(3), 1u);
  EXPECT_EQ(status.find(3)->second.varint(), 2u);
  ASSERT_EQ(status.count(2), 1u);
  EXPECT_EQ(status.find(2)->second.length_delimited(), "boom");

  // KeyValue{key 1, value 2}; AnyValue.int_value at 3.
  UnknownFieldSet attribute_set;
  const auto attribute = WireFields(one(9).length_delimited(), &attribute_set);
  EXPECT_EQ(attribute.find(1)->second.length_delimited(), "k");
  UnknownFieldSet value_set;
  const auto value = WireFields(attribute.find(2)->second.length_delimited(), &value_set);
  ASSERT_EQ(value.count(3), 1u);
  EXPECT_EQ(value.find(3)->second.varint(), 7u);
}

// Verifies the request's nesting on the wire: ExportTraceServiceRequest.resource_spans at 1,
// ResourceSpans {resource 1, scope_spans 2, schema_url 3}, ScopeSpans {scope 1, spans 2}.
TEST(OtlpEncodingTest, RequestNestingOnTheWire) {
  const std::vector<SpanData> spans = {ChildOfRemote()};
  UnknownFieldSet request_set, resource_spans_set, scope_spans_set, scope_set;
  const auto request = WireFields(EncodeExportRequest(spans, Resource()).SerializeAsString(),
                                  &request_set);
  ASSERT_EQ(request.count(1), 1u);
  const auto resource_spans =
      WireFields(request.find(1)->second.length_delimited(), &resource_spans_set);
  ASSERT_EQ(resource_spans.count(1), 1u);
  ASSERT_EQ(resource_spans.count(2), 1u);
  EXPECT_EQ(resource_spans.find(3)->second.length_delimited(),
            "https://opentelemetry.io/schemas/1.7.0");
  const auto scope_spans =
      WireFields(resource_spans.find(2)->second.length_delimited(), &scope_spans_set);
  ASSERT_EQ(scope_spans.count(2), 1u);
  const auto scope = WireFields(scope_spans.find(1)->second.length_delimited(), &scope_set);
  EXPECT_EQ(scope.find(1)->second.length_delimited(), "sluice");
}

// Verifies that the exporters' direct writer sends exactly the bytes the message encoder's
// request serializes to, for spans with every field kind: a remote parent and trace state, a
// root, each attribute type (a negative integer, an empty string, false, 0), dropped
// attributes, an error status, an unset kind and time; with and without the optional resource
// attributes; and for no span at all.
TEST(OtlpEncodingTest, WireWriterWritesTheMessagesBytes) {
  std::vector<SpanData> spans(3);
  spans[0].trace_id[0] = 0xab;
  spans[0].span_id[7] = 1;
  spans[0].parent_span_id[0] = 2;
  spans[0].remote_parent = true;
  spans[0].trace_state = "vendor=abc";
  spans[0].name = "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
  spans[0].kind = SpanKind::kServer;
  spans[0].start_unix_nanos = 1700000000123456789;
  spans[0].end_unix_nanos = 1700000000223456789;
  spans[0].Add("ratelimit.domain", "edge");
  spans[0].Add("empty", "");
  spans[0].Add("negative", int64_t{-5});
  spans[0].Add("zero", int64_t{0});
  spans[0].Add("no", false);
  spans[0].Add("ratio", 0.25);
  spans[0].Add("long", std::string(300, 'x'));
  spans[0].dropped_attributes = 3;
  spans[0].SetError("redis 127.0.0.1:6379: deadline exceeded");
  spans[1].trace_id[15] = 1;
  spans[1].span_id[0] = 9;
  spans[1].name = "redis";
  spans[1].kind = SpanKind::kClient;
  spans[1].start_unix_nanos = 5;
  spans[1].end_unix_nanos = 6;
  spans[1].Add("sluice.redis.keys", int64_t{1} << 40);
  spans[2].trace_id[3] = 7;  // no kind, no times, no name, not sampled
  spans[2].span_id[3] = 7;
  spans[2].trace_flags = 0;
  for (const OtlpResource& resource :
       {Resource(), OtlpResource{"sluice", "", "instance", ""}}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{3}}) {
      const absl::Span<const SpanData> batch(spans.data(), n);
      std::string wire;
      AppendExportRequest(batch, resource, &wire);
      EXPECT_EQ(wire, EncodeExportRequest(batch, resource).SerializeAsString())
          << n << " spans, namespace '" << resource.service_namespace << "'";
    }
  }
}

}  // namespace
}  // namespace sluice
