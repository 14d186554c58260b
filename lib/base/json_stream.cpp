#include "lib/base/json_stream.hpp"

#include <algorithm>
#include <iterator>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "lib/base/error.hpp"

namespace rdmakit {

namespace {

using json = nlohmann::json;

std::vector<std::vector<std::string>> split_patterns(const std::vector<std::string>& patterns) {
  std::vector<std::vector<std::string>> split;
  for (const auto& pattern : patterns) {
    std::vector<std::string> segments;
    std::string_view rest = pattern;
    while (true) {
      const auto slash = rest.find('/');
      segments.emplace_back(rest.substr(0, slash));
      if (slash == std::string_view::npos) break;
      rest.remove_prefix(slash + 1);
    }
    split.push_back(std::move(segments));
  }
  return split;
}

// One document built from SAX events: a streamed element, or the part of the report kept.
class Builder {
 public:
  json& root() { return root_; }
  bool empty() const { return open_.empty(); }
  void key(std::string name) { key_ = std::move(name); }
  void value(json v) {
    if (open_.empty()) {
      root_ = std::move(v);
    } else {
      place(std::move(v));
    }
  }
  void open(json empty) {
    if (open_.empty()) {
      root_ = std::move(empty);
      open_.push_back(&root_);
    } else {
      open_.push_back(&place(std::move(empty)));
    }
  }
  void close() { open_.pop_back(); }

 private:
  json& place(json v) {
    auto& top = *open_.back();
    if (top.is_array()) {
      top.push_back(std::move(v));
      return top.back();
    }
    // The key moved in, not copied: a million records of twenty keys each.
    return top.get_ref<json::object_t&>().insert_or_assign(std::move(key_), std::move(v)).first->second;
  }

  json root_;
  std::vector<json*> open_;
  std::string key_;
};

class StreamHandler {
 public:
  StreamHandler(const JsonStreamPlan& plan, const JsonStreamSink& sink)
      : streamed_(split_patterns(plan.streamed)), skipped_(plan.skipped), max_depth_(plan.max_depth), sink_(sink) {}

  bool null() { return scalar(json()); }
  bool boolean(bool v) { return scalar(json(v)); }
  bool number_integer(json::number_integer_t v) { return scalar(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return scalar(json(v)); }
  bool number_float(json::number_float_t v, const std::string& /*text*/) { return scalar(json(v)); }
  bool string(std::string& v) { return scalar(json(std::move(v))); }
  static bool binary(json::binary_t& /*v*/) { return true; }
  bool start_object(std::size_t /*elements*/) { return open(json::object()); }
  bool start_array(std::size_t /*elements*/) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(std::string& name) {
    if (element_depth_ > 0) {
      element_.key(std::move(name));
    } else if (skip_depth_ == 0) {
      key_ = name;
      kept_.key(std::move(name));
    }
    return true;
  }
  static bool parse_error(std::size_t position, const std::string& /*token*/,
                          const nlohmann::detail::exception& error) {
    throw ProtocolError(fmt::format("not a complete JSON document at byte {}: {}", position, error.what()));
  }

  json& kept() { return kept_.root(); }

 private:
  // Where the value about to start sits, and what becomes of it.
  enum class Fate { kept, streamed, skipped };

  Fate fate_of_next() {
    if (kept_open_.empty()) return Fate::kept;  // the document itself
    auto& parent = kept_open_.back();
    if (parent.array) {
      next_segment_.clear();
      fmt::format_to(std::back_inserter(next_segment_), "{}", parent.next_index++);
    } else {
      next_segment_ = key_;
    }
    if (kept_open_.size() == 1 && std::ranges::find(skipped_, next_segment_) != skipped_.end()) return Fate::skipped;
    const auto depth = path_.size() + 1;
    for (const auto& pattern : streamed_) {
      if (pattern.size() != depth) continue;
      bool matches = pattern.back() == "*" || pattern.back() == next_segment_;
      for (std::size_t i = 0; matches && i < path_.size(); ++i) matches = pattern[i] == "*" || pattern[i] == path_[i];
      if (matches) return Fate::streamed;
    }
    return Fate::kept;
  }

  // The path of the value about to start, in element_path_ (its strings' buffers reused).
  void set_element_path() {
    element_path_.resize(path_.size() + 1);
    std::copy(path_.begin(), path_.end(), element_path_.begin());
    element_path_.back() = next_segment_;
  }

  void hand_over(json& value) {
    set_element_path();
    sink_(element_path_, value);
  }

  bool scalar(json v) {
    if (element_depth_ > 0) {
      element_.value(std::move(v));
      return true;
    }
    if (skip_depth_ > 0) return true;
    switch (fate_of_next()) {
      case Fate::kept: kept_.value(std::move(v)); break;
      case Fate::streamed: hand_over(v); break;
      case Fate::skipped: break;
    }
    return true;
  }

  bool open(json empty) {
    if (kept_open_.size() + element_depth_ + skip_depth_ >= max_depth_) {
      throw ProtocolError(fmt::format("JSON nested deeper than {} levels", max_depth_));
    }
    if (element_depth_ > 0) {
      ++element_depth_;
      element_.open(std::move(empty));
      return true;
    }
    if (skip_depth_ > 0) {
      ++skip_depth_;
      return true;
    }
    const bool array = empty.is_array();
    switch (fate_of_next()) {
      case Fate::kept:
        if (!kept_open_.empty()) path_.push_back(next_segment_);
        kept_open_.push_back(Container{.array = array, .next_index = 0});
        kept_.open(std::move(empty));
        break;
      case Fate::streamed:
        set_element_path();
        element_depth_ = 1;
        element_.open(std::move(empty));
        break;
      case Fate::skipped: skip_depth_ = 1; break;
    }
    return true;
  }

  bool close() {
    if (element_depth_ > 0) {
      element_.close();
      if (--element_depth_ == 0) sink_(element_path_, element_.root());
      return true;
    }
    if (skip_depth_ > 0) {
      --skip_depth_;
      return true;
    }
    kept_.close();
    kept_open_.pop_back();
    if (!path_.empty()) path_.pop_back();
    return true;
  }

  struct Container {
    bool array = false;
    std::size_t next_index = 0;
  };

  std::vector<std::vector<std::string>> streamed_;
  std::vector<std::string> skipped_;
  std::size_t max_depth_;
  const JsonStreamSink& sink_;

  Builder kept_;
  std::vector<Container> kept_open_;  // the kept document's containers open, outermost first
  std::vector<std::string> path_;     // their segments, but the document's own
  std::string key_;                   // the last key read in a kept object
  std::string next_segment_;
  Builder element_;
  std::vector<std::string> element_path_;
  std::size_t element_depth_ = 0;
  std::size_t skip_depth_ = 0;
};

// The document's bytes a chunk at a time, as the input iterator nlohmann's parser takes: its
// adapter for an istream costs a virtual call a byte, a third of the time of a 400 MB read.
class Chunks {
 public:
  explicit Chunks(std::istream& in) : in_(in), buffer_(std::size_t{1} << 20) { fill(); }
  bool empty() const { return position_ == length_; }
  const char& current() const { return buffer_[position_]; }
  // False at the end of the input.
  bool advance() {
    if (++position_ < length_) return true;
    fill();
    return !empty();
  }

 private:
  void fill() {
    in_.read(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    length_ = static_cast<std::size_t>(in_.gcount());
    position_ = 0;
  }
  std::istream& in_;
  std::vector<char> buffer_;
  std::size_t position_ = 0;
  std::size_t length_ = 0;
};

class ChunkIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  ChunkIterator() = default;  // the end
  explicit ChunkIterator(Chunks& chunks) : chunks_(chunks.empty() ? nullptr : &chunks) {}
  reference operator*() const { return chunks_->current(); }
  ChunkIterator& operator++() {
    if (!chunks_->advance()) chunks_ = nullptr;
    return *this;
  }
  ChunkIterator operator++(int) {
    auto before = *this;
    ++*this;
    return before;
  }
  friend bool operator==(const ChunkIterator& a, const ChunkIterator& b) { return a.chunks_ == b.chunks_; }

 private:
  Chunks* chunks_ = nullptr;
};

}  // namespace

json read_json_stream(std::istream& in, const JsonStreamPlan& plan, const JsonStreamSink& sink) {
  StreamHandler handler(plan, sink);
  Chunks chunks(in);
  json::sax_parse(ChunkIterator(chunks), ChunkIterator(), &handler);
  return std::move(handler.kept());
}

}  // namespace rdmakit
