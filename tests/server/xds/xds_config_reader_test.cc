#include "server/xds/xds_config_reader.h"

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "gtest/gtest.h"
#include "server/config/config_loader.h"

namespace sluice {
namespace {

namespace rls = ::ratelimit::config::ratelimit::v3;
using google::protobuf::Any;
using google::protobuf::RepeatedPtrField;
using google::protobuf::Struct;
using ::testing::HasSubstr;

RepeatedPtrField<Any> Pack(const std::vector<rls::RateLimitConfig>& configs) {
  RepeatedPtrField<Any> packed;
  for (const rls::RateLimitConfig& config : configs) {
    packed.Add()->PackFrom(config);
  }
  return packed;
}

absl::StatusOr<std::unique_ptr<Config>> Read(const std::vector<rls::RateLimitConfig>& configs,
                                             bool merge = false) {
  return ConfigFromXdsResources(Pack(configs), ValidateOptions{.merge_domains = merge});
}

// As Read, under --strict_config.
absl::StatusOr<std::unique_ptr<Config>> StrictRead(
    const std::vector<rls::RateLimitConfig>& configs) {
  return ConfigFromXdsResources(Pack(configs), ValidateOptions{.strict = true});
}

rls::RateLimitDescriptor* AddDescriptor(RepeatedPtrField<rls::RateLimitDescriptor>* list,
                                        const std::string& key, const std::string& value,
                                        rls::RateLimitUnit unit, uint32_t limit) {
  rls::RateLimitDescriptor* d = list->Add();
  d->set_key(key);
  d->set_value(value);
  if (unit != rls::UNKNOWN || limit != 0) {
    d->mutable_rate_limit()->set_unit(unit);
    d->mutable_rate_limit()->set_requests_per_unit(limit);
  }
  return d;
}

// The lines of `config`'s listing without the place each rule was declared.
std::vector<std::string> RulesOf(const Config& config) {
  std::vector<std::string> rules;
  for (absl::string_view line : absl::StrSplit(config.Dump(), '\n', absl::SkipEmpty())) {
    rules.emplace_back(line.substr(0, line.rfind(" (")));
  }
  return rules;
}

// A domain `name` with one rule, key "k", 1 a minute.
rls::RateLimitConfig OneDomain(const std::string& name) {
  rls::RateLimitConfig config;
  config.set_name(name);
  config.set_domain(name);
  AddDescriptor(config.mutable_descriptors(), "k", "", rls::MINUTE, 1);
  return config;
}

// The "sluice" metadata entry of `d`, created if missing.
Struct* SluiceKeys(rls::RateLimitDescriptor* d) {
  return (*d->mutable_metadata()->mutable_fields())["sluice"].mutable_struct_value();
}

// envoyproxy/ratelimit's own example (its README's "Example 1"): the resource as an xDS server
// sends it, and the same as YAML, give the same rules.
TEST(XdsConfigReaderTest, ReadsUpstreamsFieldsAsYamlReadsThem) {
  rls::RateLimitConfig config;
  config.set_name("ratelimit-config/mongo");
  config.set_domain("mongo_cps");
  AddDescriptor(config.mutable_descriptors(), "database", "users", rls::SECOND, 500);
  rls::RateLimitDescriptor* parent =
      AddDescriptor(config.mutable_descriptors(), "database", "", rls::UNKNOWN, 0);
  rls::RateLimitDescriptor* child =
      AddDescriptor(parent->mutable_descriptors(), "user", "", rls::MINUTE, 0);
  child->set_shadow_mode(true);
  child->set_detailed_metric(true);
  child->mutable_rate_limit()->set_name("per_user");
  rls::RateLimitDescriptor* unlimited =
      AddDescriptor(config.mutable_descriptors(), "vip", "*", rls::UNKNOWN, 0);
  unlimited->mutable_rate_limit()->set_unlimited(true);
  unlimited->mutable_rate_limit()->add_replaces()->set_name("per_user");
  (*unlimited->mutable_metadata()->mutable_fields())["tier"].set_string_value("gold");

  absl::StatusOr<std::unique_ptr<Config>> from_xds = Read({config});
  ASSERT_TRUE(from_xds.ok()) << from_xds.status();
  const Domain* domain = (*from_xds)->FindDomain("mongo_cps");
  ASSERT_NE(domain, nullptr);
  EXPECT_EQ(domain->file, "xds:ratelimit-config/mongo");

  const DescriptorNode& users = *domain->root.exact_children.at("database_users");
  ASSERT_EQ(users.rules.size(), 1u);
  EXPECT_EQ(users.rules[0].params.limit, 500u);
  const DescriptorNode& any_database = *domain->root.default_children.at("database");
  EXPECT_TRUE(any_database.rules.empty());
  const DescriptorNode& user = *any_database.default_children.at("user");
  ASSERT_EQ(user.rules.size(), 1u);
  // requests_per_unit unset is 0: a limit that admits nothing, as upstream reads it.
  EXPECT_EQ(user.rules[0].params.limit, 0u);
  EXPECT_EQ(user.rules[0].name, "per_user");
  EXPECT_TRUE(user.shadow_mode);
  EXPECT_TRUE(user.detailed_metric);
  ASSERT_EQ(domain->root.wildcard_children.size(), 1u);
  const DescriptorNode& vip = *domain->root.wildcard_children[0];
  ASSERT_EQ(vip.rules.size(), 1u);
  EXPECT_TRUE(vip.rules[0].unlimited);
  EXPECT_THAT(vip.rules[0].replaces, ::testing::ElementsAre("per_user"));
  ASSERT_NE(vip.metadata, nullptr);
  EXPECT_EQ(vip.metadata->fields().at("tier").string_value(), "gold");

  // The same config as YAML: the same rules, node for node.
  constexpr char kYaml[] = R"(domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit: {unit: second, requests_per_unit: 500}
  - key: database
    descriptors:
      - key: user
        shadow_mode: true
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 0, name: per_user}
  - key: vip
    value: "*"
    metadata: {tier: gold}
    rate_limit: {unlimited: true, replaces: [{name: per_user}]}
)";
  absl::StatusOr<std::unique_ptr<Config>> from_yaml = LoadConfigText("mongo.yaml", kYaml);
  ASSERT_TRUE(from_yaml.ok()) << from_yaml.status();
  // The rules are the same; where they were declared differs (a resource has no lines, so
  // the listing's order is the keys').
  EXPECT_THAT(RulesOf(**from_xds), ::testing::UnorderedElementsAreArray(RulesOf(**from_yaml)));
}

// Sluice's rule keys ride in the "sluice" metadata entry, which is taken out of the metadata
// returned to callers.
TEST(XdsConfigReaderTest, ReadsSluicesKeysFromTheReservedMetadataEntry) {
  rls::RateLimitConfig config;
  config.set_domain("api");
  rls::RateLimitDescriptor* d =
      AddDescriptor(config.mutable_descriptors(), "client", "", rls::SECOND, 10);
  Struct* keys = SluiceKeys(d);
  (*keys->mutable_fields())["algorithm"].set_string_value("token_bucket");
  (*keys->mutable_fields())["burst"].set_number_value(25);
  (*keys->mutable_fields())["hash_tag"].set_string_value("api");
  (*keys->mutable_fields())["charge"].set_string_value("always");
  (*keys->mutable_fields())["failure_mode"].set_string_value("deny");
  (*d->mutable_metadata()->mutable_fields())["team"].set_string_value("payments");
  rls::RateLimitDescriptor* bare =
      AddDescriptor(config.mutable_descriptors(), "ip", "", rls::MINUTE, 60);
  (*SluiceKeys(bare)->mutable_fields())["algorithm"].set_string_value("gcra");

  absl::StatusOr<std::unique_ptr<Config>> read = Read({config});
  ASSERT_TRUE(read.ok()) << read.status();
  const Domain* domain = (*read)->FindDomain("api");
  ASSERT_NE(domain, nullptr);
  EXPECT_EQ(domain->failure_mode, FailureMode::kDeny);
  const DescriptorNode& client = *domain->root.default_children.at("client");
  ASSERT_EQ(client.rules.size(), 1u);
  EXPECT_EQ(client.rules[0].params.algorithm, Algorithm::kTokenBucket);
  EXPECT_EQ(client.rules[0].params.burst, 25u);
  EXPECT_EQ(client.rules[0].hash_tag, "api");
  EXPECT_EQ(client.rules[0].charge, Charge::kAlways);
  ASSERT_NE(client.metadata, nullptr);
  EXPECT_EQ(client.metadata->fields().size(), 1u) << "the sluice entry is never echoed back";
  EXPECT_EQ(client.metadata->fields().at("team").string_value(), "payments");
  const DescriptorNode& ip = *domain->root.default_children.at("ip");
  EXPECT_EQ(ip.rules[0].params.algorithm, Algorithm::kGcra);
  EXPECT_EQ(ip.metadata, nullptr) << "metadata that held only Sluice's keys is none";
}

// Verifies what is wrong is said with the resource and the field's path, as for a file.
TEST(XdsConfigReaderTest, ErrorsNameTheResourceAndTheField) {
  auto error_of = [](const rls::RateLimitConfig& config) {
    absl::StatusOr<std::unique_ptr<Config>> read = Read({config});
    EXPECT_FALSE(read.ok());
    EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(read.status().message());
  };
  rls::RateLimitConfig config;
  config.set_name("routes/a");
  config.set_domain("d");
  rls::RateLimitDescriptor* d =
      AddDescriptor(config.mutable_descriptors(), "k", "", rls::UNKNOWN, 5);
  EXPECT_THAT(error_of(config), HasSubstr("xds:routes/a: descriptors[0].rate_limit"));

  d->mutable_rate_limit()->set_unit(rls::HOUR);
  (*SluiceKeys(d)->mutable_fields())["algorithm"].set_string_value("token_bucket");
  (*SluiceKeys(d)->mutable_fields())["burst"].set_number_value(2.5);
  EXPECT_EQ(error_of(config),
            "xds:routes/a: descriptors[0].metadata.sluice.burst: expected a whole number from 0 "
            "to 4294967295, got a number");

  SluiceKeys(d)->mutable_fields()->erase("burst");
  (*SluiceKeys(d)->mutable_fields())["bucket"].set_number_value(1);
  absl::StatusOr<std::unique_ptr<Config>> strict = StrictRead({config});
  ASSERT_FALSE(strict.ok());
  EXPECT_THAT(strict.status().message(),
              HasSubstr("xds:routes/a: descriptors[0].metadata.sluice.bucket: unknown key"));

  SluiceKeys(d)->mutable_fields()->erase("bucket");
  rls::RateLimitDescriptor* child =
      AddDescriptor(d->mutable_descriptors(), "c", "", rls::UNKNOWN, 0);
  (*SluiceKeys(child)->mutable_fields())["algorithm"].set_string_value("gcra");
  EXPECT_EQ(error_of(config),
            "xds:routes/a: descriptors[0].descriptors[0].metadata.sluice.algorithm: a rule key "
            "on a descriptor without rate_limit");

  SluiceKeys(child)->mutable_fields()->clear();
  (*SluiceKeys(child)->mutable_fields())["failure_mode"].set_string_value("deny");
  EXPECT_THAT(error_of(config), HasSubstr("failure_mode is the domain's"));

  child->clear_metadata();
  (*SluiceKeys(d)->mutable_fields())["failure_mode"].set_string_value("deny");
  rls::RateLimitDescriptor* other =
      AddDescriptor(config.mutable_descriptors(), "o", "", rls::HOUR, 1);
  (*SluiceKeys(other)->mutable_fields())["failure_mode"].set_string_value("allow");
  EXPECT_THAT(error_of(config),
              HasSubstr("descriptors[1].metadata.sluice.failure_mode: 'allow' differs from the "
                        "domain's failure_mode 'deny'"));
  (*SluiceKeys(other)->mutable_fields())["failure_mode"].set_string_value("deny");
  EXPECT_TRUE(Read({config}).ok());

  (*d->mutable_metadata()->mutable_fields())["sluice"].set_string_value("token_bucket");
  EXPECT_EQ(error_of(config),
            "xds:routes/a: descriptors[0].metadata.sluice: expected a map of Sluice's rule keys, "
            "got a string");
}

// Verifies a unit number the enum does not name is refused as that number, not as a unit ''
// (its name, which it has none of).
TEST(XdsConfigReaderTest, AnUnknownUnitNumberIsNamedAsANumber) {
  rls::RateLimitConfig config;
  config.set_name("routes/a");
  config.set_domain("d");
  rls::RateLimitDescriptor* d = AddDescriptor(config.mutable_descriptors(), "k", "", rls::HOUR, 5);
  d->mutable_rate_limit()->set_unit(static_cast<rls::RateLimitUnit>(99));
  EXPECT_EQ(Read({config}).status().message(),
            "xds:routes/a: descriptors[0].rate_limit.unit: unknown unit 99 (expected SECOND=1, "
            "MINUTE=2, HOUR=3, DAY=4, MONTH=5, YEAR=6 or WEEK=7)");
}

// Verifies a duplicate is placed by the path of the descriptor it repeats: a resource has no
// lines, and "already defined at line 0" says nothing.
TEST(XdsConfigReaderTest, ADuplicateNamesThePathOfTheFirst) {
  rls::RateLimitConfig config;
  config.set_name("routes/a");
  config.set_domain("d");
  AddDescriptor(config.mutable_descriptors(), "k", "", rls::HOUR, 5);
  AddDescriptor(config.mutable_descriptors(), "k", "", rls::HOUR, 6);
  EXPECT_EQ(Read({config}).status().message(),
            "xds:routes/a: descriptors[1]: duplicate descriptor: key 'k' without a value is "
            "already defined at descriptors[0]");

  config.mutable_descriptors()->RemoveLast();
  rls::RateLimitDescriptor* parent = config.mutable_descriptors(0);
  AddDescriptor(parent->mutable_descriptors(), "user", "*", rls::MINUTE, 1);
  AddDescriptor(parent->mutable_descriptors(), "plan", "gold", rls::MINUTE, 1);
  AddDescriptor(parent->mutable_descriptors(), "user", "*", rls::MINUTE, 2);
  EXPECT_EQ(Read({config}).status().message(),
            "xds:routes/a: descriptors[0].descriptors[2]: duplicate descriptor: key 'user' value "
            "'*' is already defined at descriptors[0].descriptors[0]");

  parent->mutable_descriptors()->RemoveLast();
  AddDescriptor(parent->mutable_descriptors(), "plan", "gold", rls::MINUTE, 2);
  EXPECT_EQ(Read({config}).status().message(),
            "xds:routes/a: descriptors[0].descriptors[2]: duplicate descriptor: key 'plan' value "
            "'gold' is already defined at descriptors[0].descriptors[1]");

  parent->mutable_descriptors()->RemoveLast();
  AddDescriptor(parent->mutable_descriptors(), "plan_gold", "x", rls::MINUTE, 2);
  AddDescriptor(parent->mutable_descriptors(), "plan", "gold_x", rls::MINUTE, 2);
  EXPECT_EQ(Read({config}).status().message(),
            "xds:routes/a: descriptors[0].descriptors[3]: descriptor key 'plan' value 'gold_x' has "
            "the same composite key 'plan_gold_x' as key 'plan_gold' value 'x' at "
            "descriptors[0].descriptors[2]");
}

// Verifies the management server's text in a message is escaped and cut: a resource name, a
// value or a type URL of a megabyte, with control bytes, makes a short line of printable text.
TEST(XdsConfigReaderTest, RemoteTextInMessagesIsEscapedAndCut) {
  auto printable_and_short = [](absl::string_view message) {
    EXPECT_LT(message.size(), 2048u);
    for (char c : message) {
      EXPECT_TRUE(c >= 0x20 && c < 0x7f) << static_cast<int>(c);
    }
  };
  const std::string huge = "a\nb\x1b[2J" + std::string(1 << 20, 'x');
  rls::RateLimitConfig config;
  config.set_name(huge);
  config.set_domain("d");
  AddDescriptor(config.mutable_descriptors(), "k", huge, rls::HOUR, 5);
  AddDescriptor(config.mutable_descriptors(), "k", huge, rls::HOUR, 5);
  const std::string message(Read({config}).status().message());
  printable_and_short(message);
  EXPECT_THAT(message, HasSubstr("xds:a\\x0ab\\x1b[2Jxxx"));
  EXPECT_THAT(message, HasSubstr("...(1048583 bytes)' is already defined at descriptors[0]"));

  config.set_name("routes/a");
  config.mutable_descriptors()->RemoveLast();
  (*SluiceKeys(config.mutable_descriptors(0))->mutable_fields())[huge].set_number_value(1);
  printable_and_short(StrictRead({config}).status().message());
  absl::StatusOr<std::unique_ptr<Config>> lenient = Read({config});
  ASSERT_TRUE(lenient.ok()) << lenient.status();
  ASSERT_EQ((*lenient)->warnings().size(), 1u);
  printable_and_short((*lenient)->warnings()[0]);

  RepeatedPtrField<Any> resources;
  resources.Add()->set_type_url(huge);
  const absl::StatusOr<std::unique_ptr<Config>> read = ConfigFromXdsResources(resources, {});
  printable_and_short(read.status().message());
  EXPECT_THAT(read.status().message(), HasSubstr("resources[0]: a\\x0ab"));
}

// Verifies a key of metadata.sluice this Sluice does not know is ignored, as upstream passes
// metadata through, with one warning per key over the whole snapshot naming the key and its
// first place; the known keys beside it still apply, one with a bad value is still refused, and
// --strict_config refuses the unknown key.
TEST(XdsConfigReaderTest, IgnoresUnknownSluiceKeysWithOneWarningEach) {
  rls::RateLimitConfig a;
  a.set_name("routes/a");
  a.set_domain("a");
  rls::RateLimitDescriptor* d1 = AddDescriptor(a.mutable_descriptors(), "k", "", rls::SECOND, 5);
  (*SluiceKeys(d1)->mutable_fields())["algorithm"].set_string_value("token_bucket");
  (*SluiceKeys(d1)->mutable_fields())["bucket_size"].set_number_value(10);
  (*SluiceKeys(d1)->mutable_fields())["priority"].set_string_value("high");
  rls::RateLimitDescriptor* d2 = AddDescriptor(a.mutable_descriptors(), "j", "", rls::SECOND, 5);
  (*SluiceKeys(d2)->mutable_fields())["bucket_size"].set_number_value(20);
  rls::RateLimitConfig b = OneDomain("b");
  (*SluiceKeys(b.mutable_descriptors(0))->mutable_fields())["bucket_size"].set_bool_value(true);

  absl::StatusOr<std::unique_ptr<Config>> read = Read({a, b});
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_THAT((*read)->warnings(),
              ::testing::ElementsAre(
                  "xds:routes/a: descriptors[0].metadata.sluice.bucket_size: unknown key, "
                  "ignored (this Sluice knows algorithm, burst, unit_multiplier, hash_tag, "
                  "local_share, charge, value_to_metric, share_threshold and failure_mode; "
                  "envoyproxy/ratelimit passes metadata through), on 3 descriptors of this "
                  "snapshot (--strict_config refuses it)",
                  "xds:routes/a: descriptors[0].metadata.sluice.priority: unknown key, ignored "
                  "(this Sluice knows algorithm, burst, unit_multiplier, hash_tag, local_share, "
                  "charge, value_to_metric, share_threshold and failure_mode; "
                  "envoyproxy/ratelimit passes metadata through), on 1 descriptor of this "
                  "snapshot (--strict_config refuses it)"));
  const DescriptorNode& k = *(*read)->domains().at("a")->root.default_children.at("k");
  EXPECT_EQ(k.rules[0].params.algorithm, Algorithm::kTokenBucket);
  EXPECT_EQ(k.metadata, nullptr) << "the sluice entry is never echoed back";

  absl::StatusOr<std::unique_ptr<Config>> strict = StrictRead({a, b});
  ASSERT_FALSE(strict.ok());
  EXPECT_THAT(strict.status().message(),
              HasSubstr("xds:routes/a: descriptors[0].metadata.sluice.bucket_size: unknown key "
                        "(expected algorithm,"));

  (*SluiceKeys(d1)->mutable_fields())["algorithm"].set_string_value("fastest");
  absl::StatusOr<std::unique_ptr<Config>> bad = Read({a, b});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("invalid algorithm 'fastest'"));
  (*SluiceKeys(d1)->mutable_fields())["algorithm"].set_number_value(1);
  EXPECT_THAT(Read({a, b}).status().message(),
              HasSubstr("descriptors[0].metadata.sluice.algorithm: expected a string, got a "
                        "number"));
}

// Verifies the distinct unknown keys listed are bounded: a management server can send a
// million.
TEST(XdsConfigReaderTest, BoundsTheUnknownKeysListed) {
  rls::RateLimitConfig config = OneDomain("a");
  for (int i = 0; i < 1000; ++i) {
    (*SluiceKeys(config.mutable_descriptors(0))->mutable_fields())["x" + std::to_string(i)]
        .set_number_value(i);
  }
  absl::StatusOr<std::unique_ptr<Config>> read = Read({config});
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ((*read)->warnings().size(), 17u);
  EXPECT_EQ((*read)->warnings().back(),
            "xds: 984 more uses of unknown metadata.sluice keys, ignored");
}

// Verifies a key with '*' in a resource matches as in a file: the request's "key_value"
// against the descriptor's "key[_value]", after the exact value and before the key's default.
TEST(XdsConfigReaderTest, MatchesAWildcardKeyAsAFileDoes) {
  rls::RateLimitConfig config;
  config.set_name("routes/kw");
  config.set_domain("kw");
  AddDescriptor(config.mutable_descriptors(), "user", "", rls::SECOND, 1);
  AddDescriptor(config.mutable_descriptors(), "user_*", "", rls::SECOND, 2);
  AddDescriptor(config.mutable_descriptors(), "user", "admin", rls::SECOND, 3);
  absl::StatusOr<std::unique_ptr<Config>> read = Read({config});
  ASSERT_TRUE(read.ok()) << read.status();
  auto limit = [&](absl::string_view key, absl::string_view value) -> int64_t {
    const DescriptorEntryView entries[] = {{key, value}};
    const DescriptorNode* node = (*read)->Match("kw", entries);
    return node == nullptr ? -1 : static_cast<int64_t>(node->rules[0].requests_per_unit);
  };
  EXPECT_EQ(limit("user", "admin"), 3);
  EXPECT_EQ(limit("user", "bob"), 2);
  EXPECT_EQ(limit("user_id", "7"), 2);
  EXPECT_EQ(limit("group", "x"), -1);
  absl::StatusOr<std::unique_ptr<Config>> yaml = LoadConfigText("kw.yaml", R"(domain: kw
descriptors:
  - {key: user, rate_limit: {unit: second, requests_per_unit: 1}}
  - {key: user_*, rate_limit: {unit: second, requests_per_unit: 2}}
  - {key: user, value: admin, rate_limit: {unit: second, requests_per_unit: 3}}
)");
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  EXPECT_EQ(RulesOf(**read), RulesOf(**yaml));
}

// Verifies a snapshot is judged whole: a resource of another type, or two resources of one
// domain (unless domains merge), fail it.
TEST(XdsConfigReaderTest, JudgesTheSnapshotWhole) {
  RepeatedPtrField<Any> resources = Pack({OneDomain("a"), OneDomain("b")});
  Struct not_a_config;
  resources.Add()->PackFrom(not_a_config);
  absl::StatusOr<std::unique_ptr<Config>> read = ConfigFromXdsResources(resources, {});
  EXPECT_EQ(read.status().message(),
            "resources[2]: type.googleapis.com/google.protobuf.Struct: not a "
            "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig");

  rls::RateLimitConfig a1 = OneDomain("a");
  rls::RateLimitConfig a2 = OneDomain("a");
  a2.set_name("second");
  a2.mutable_descriptors(0)->set_key("other");
  EXPECT_THAT(Read({a1, a2}).status().message(), HasSubstr("xds:second"));
  absl::StatusOr<std::unique_ptr<Config>> merged = Read({a1, a2}, /*merge=*/true);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ((*merged)->RuleCount(), 2u);

  absl::StatusOr<std::unique_ptr<Config>> empty = Read({});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE((*empty)->domains().empty());
}

}  // namespace
}  // namespace sluice
