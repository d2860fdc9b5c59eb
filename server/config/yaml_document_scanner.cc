#include "server/config/yaml_document_scanner.h"

#include <sstream>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "yaml-cpp/depthguard.h"
#include "yaml-cpp/eventhandler.h"
#include "yaml-cpp/yaml.h"

namespace sluice {
namespace {

// Thrown by DocumentScanner to stop the parser at the first problem: yaml-cpp's event API has
// no other way to abort. Never leaves ScanYamlText.
struct ScanStop {
  absl::Status status;
  // > 0: not a problem, the line where a second document starts, which a scan that reads the
  // first document only stops at.
  int second_document_line = 0;
};

// Reads one file's YAML stream through the parser's events, before any node tree is built, and
// stops it (throwing ScanStop) at the first of:
//   - a second document with content (one file holds one domain);
//   - more than kMaxDocuments documents, or a document that starts where the previous one
//     started (yaml-cpp 0.7 reports empty documents without end on some malformed input);
//   - nesting deeper than kMaxDepth;
//   - the expanded size of the configuration passing the budget: every node, and the bytes of
//     every scalar, counted as the loader's walk will visit them, i.e. an alias as the whole
//     content of its anchor, each time it is used. yaml-cpp builds an alias as a shared
//     reference, so without this a few hundred bytes of nested aliases cost gigabytes and
//     minutes once walked into metadata or descriptors.
// The count goes on across files: `budget` is shared by every file of one load.
class DocumentScanner final : public YAML::EventHandler {
 public:
  static constexpr int kMaxDocuments = 64;
  // Deeper than any valid file: 64 levels of descriptors take about 130, and metadata of the
  // deepest one at most 64 more.
  static constexpr int kMaxDepth = 256;

  // `first_document_only`: stop (ScanStop::second_document_line) where a second document with
  // content starts, instead of refusing it.
  DocumentScanner(absl::string_view file, YamlBudget& budget, bool first_document_only)
      : file_(file), budget_(budget), first_document_only_(first_document_only) {}

  void OnDocumentStart(const YAML::Mark& mark) override {
    const int line = LineOfMark(mark);
    if (documents_ > 0 && mark.pos == last_start_pos_) {
      Stop(line, "", "YAML syntax error: the parser cannot get past this point (a stray ','?)");
    }
    if (++documents_ > kMaxDocuments) {
      Stop(line, "",
           absl::StrCat("more than ", kMaxDocuments, " YAML documents in the file (at most ",
                        kMaxDocuments, " are read: one holding the domain, the rest empty)"));
    }
    last_start_pos_ = mark.pos;
    has_content_ = false;
    frames_.clear();
    anchors_.clear();  // anchors are per document
  }
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    // A document's root null is the empty document (a trailing "---"): no content.
    Leaf(mark, anchor, Size{1, 0}, /*content=*/!frames_.empty());
  }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                const std::string& value) override {
    const Size size{1, static_cast<int64_t>(value.size())};
    Leaf(mark, anchor, size);
    if (!frames_.empty() && frames_.back().map && frames_.back().at_value) {
      frames_.back().key = value;  // Leaf flipped the map to its value: this was a key
    }
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    Content(mark);
    Size size{1, 0};  // an alias of a node still open is a cycle: the walk's depth limits end it
    auto it = anchors_.find(anchor);
    if (it != anchors_.end() && it->second.closed) {
      size = it->second.size;
    }
    Charge(mark, size, it != anchors_.end() ? it->second.line : 0);
    Completed(size);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    Open(mark, anchor, /*map=*/false);
  }
  void OnSequenceEnd() override { Close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    Open(mark, anchor, /*map=*/true);
  }
  void OnMapEnd() override { Close(); }

 private:
  // Expanded size: nodes, and bytes of scalar text.
  struct Size {
    int64_t nodes = 0;
    int64_t bytes = 0;
  };
  struct Anchor {
    Size size;
    int line = 0;
    bool closed = false;
  };
  // An open map or sequence.
  struct Frame {
    bool map = false;
    bool at_value = false;  // map: the next node is the value of `key`
    std::string key;        // map: the current key, when it is a scalar
    size_t index = 0;       // sequence: the index of the next item
    YAML::anchor_t anchor = 0;
    Size size;  // expanded size of the collection so far, itself included
  };

  static int LineOfMark(const YAML::Mark& mark) { return mark.line >= 0 ? mark.line + 1 : 1; }

  [[noreturn]] void Stop(int line, absl::string_view path, absl::string_view what) const {
    throw ScanStop{
        path.empty()
            ? absl::InvalidArgumentError(absl::StrCat(file_, ":", line, ": ", what))
            : absl::InvalidArgumentError(absl::StrCat(file_, ":", line, ": ", path, ": ", what))};
  }

  // The field path of the node being read, as the loader's errors write it:
  // "descriptors[0].metadata.x"; past 24 levels, the middle is left out ("[...]").
  std::string Path() const {
    constexpr size_t kHead = 16;
    constexpr size_t kTail = 8;
    std::string path;
    for (size_t i = 0; i < frames_.size(); ++i) {
      const Frame& frame = frames_[i];
      if (frames_.size() > kHead + kTail && i >= kHead && i < frames_.size() - kTail) {
        if (i == kHead) {
          absl::StrAppend(&path, "[...]");
        }
        continue;
      }
      if (!frame.map) {
        absl::StrAppend(&path, "[", frame.index, "]");
      } else if (frame.at_value) {
        absl::StrAppend(&path, path.empty() ? "" : ".", frame.key);
      }
    }
    return path;
  }

  void Content(const YAML::Mark& mark) {
    if (has_content_) {
      return;
    }
    has_content_ = true;
    if (++with_content_ == 2) {
      if (first_document_only_) {
        throw ScanStop{absl::OkStatus(), LineOfMark(mark)};
      }
      Stop(LineOfMark(mark), "",
           "more than one YAML document in the file (one file holds one domain)");
    }
  }

  // Adds `size` to the budget; `anchor_line` is the line of the anchor when an alias brings it.
  void Charge(const YAML::Mark& mark, Size size, int anchor_line) {
    budget_.nodes += size.nodes;
    budget_.scalar_bytes += size.bytes;
    const bool nodes_over = budget_.nodes > budget_.max_nodes;
    if (!nodes_over && budget_.scalar_bytes <= budget_.max_scalar_bytes) {
      return;
    }
    std::string what = nodes_over
                           ? absl::StrCat("the configuration grows past ", budget_.max_nodes,
                                          " YAML nodes (--config_max_nodes)")
                           : absl::StrCat("the configuration grows past ", budget_.max_scalar_bytes,
                                          " bytes of YAML scalars (--config_max_scalar_bytes)");
    absl::StrAppend(&what,
                    ", counted over all files with every alias expanded each time it is "
                    "used");
    if (anchor_line > 0) {
      absl::StrAppend(&what, "; this alias repeats the anchor at line ", anchor_line, " (",
                      size.nodes, " nodes, ", size.bytes, " bytes)");
    }
    Stop(LineOfMark(mark), Path(), what);
  }

  void Leaf(const YAML::Mark& mark, YAML::anchor_t anchor, Size size, bool content = true) {
    if (content) {
      Content(mark);
    }
    Charge(mark, size, 0);
    if (anchor != YAML::NullAnchor) {
      anchors_[anchor] = Anchor{size, LineOfMark(mark), true};
    }
    Completed(size);
  }

  void Open(const YAML::Mark& mark, YAML::anchor_t anchor, bool map) {
    Content(mark);
    if (static_cast<int>(frames_.size()) >= kMaxDepth) {
      Stop(LineOfMark(mark), Path(), absl::StrCat("nested more than ", kMaxDepth, " levels deep"));
    }
    Charge(mark, Size{1, 0}, 0);
    if (anchor != YAML::NullAnchor) {
      anchors_[anchor] = Anchor{Size{}, LineOfMark(mark), false};
    }
    Frame frame;
    frame.map = map;
    frame.anchor = anchor;
    frame.size = Size{1, 0};
    frames_.push_back(std::move(frame));
  }

  void Close() {
    const Frame frame = std::move(frames_.back());
    frames_.pop_back();
    if (frame.anchor != YAML::NullAnchor) {
      Anchor& anchor = anchors_[frame.anchor];
      anchor.size = frame.size;
      anchor.closed = true;
    }
    Completed(frame.size);
  }

  // A node of `size` was read whole: it counts in its parent, which moves on to the next key,
  // value or item.
  void Completed(Size size) {
    if (frames_.empty()) {
      return;
    }
    Frame& parent = frames_.back();
    parent.size.nodes += size.nodes;
    parent.size.bytes += size.bytes;
    if (parent.map) {
      parent.at_value = !parent.at_value;
      if (!parent.at_value) {
        parent.key.clear();
      }
    } else {
      ++parent.index;
    }
  }

  const std::string file_;
  YamlBudget& budget_;
  const bool first_document_only_;
  int documents_ = 0;
  int last_start_pos_ = 0;
  bool has_content_ = false;  // the current document has a node
  int with_content_ = 0;      // documents with a node
  std::vector<Frame> frames_;
  absl::flat_hash_map<YAML::anchor_t, Anchor> anchors_;
};

}  // namespace

absl::Status ScanYamlText(absl::string_view file_name, const std::string& text,
                          YamlBudget& budget, std::string* rest_ignored) {
  try {
    std::istringstream in(text);
    YAML::Parser parser(in);
    DocumentScanner scanner(file_name, budget, rest_ignored != nullptr);
    while (parser.HandleNextDocument(scanner)) {
    }
  } catch (const ScanStop& stop) {
    if (stop.second_document_line > 0) {
      *rest_ignored = absl::StrCat(
          file_name, ":", stop.second_document_line,
          ": ignored from here to the end of the file: a second YAML document, which "
          "envoyproxy/ratelimit does not read either (one file holds one domain; "
          "--strict_config refuses it)");
    }
    return stop.status;
  } catch (const YAML::Exception& e) {
    return YamlExceptionError(file_name, e);
  }
  return absl::OkStatus();
}

absl::Status YamlExceptionError(absl::string_view file_name, const YAML::Exception& error) {
  const int line = error.mark.line >= 0 ? error.mark.line + 1 : 1;
  if (const auto* deep = dynamic_cast<const YAML::DeepRecursion*>(&error)) {
    return absl::InvalidArgumentError(absl::StrCat(file_name, ":", line, ": YAML nested more than ",
                                                   deep->depth() - 1,
                                                   " levels deep (the parser's limit)"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(file_name, ":", line, ": YAML syntax error: ", error.msg,
                   error.mark.column >= 0 ? absl::StrCat(" (column ", error.mark.column + 1, ")")
                                          : std::string()));
}

}  // namespace sluice
