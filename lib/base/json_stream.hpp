#pragma once
// A JSON document too large to hold parsed, read as a stream: the values at the paths a
// reader names (every element of a report's long lists) are handed over one at a time, each
// a small document of its own that a described reader (lib/base/described_json.hpp) then
// reads, and the rest of the document is kept whole. A saved 1024-rank rdma_mesh report in
// its per-direction form is a million such elements and 500 MB: held parsed it would take
// several GB; streamed, the reader keeps only what it makes of each element.

#include <cstddef>
#include <functional>
#include <istream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace rdmakit {

struct JsonStreamPlan {
  // Paths of the values handed over one at a time, their segments separated by '/', "*"
  // standing for any key or index: "pairs/*" is every element of the top-level "pairs",
  // "matrices/*/first/*" every row of every test's "first". Their containers stay in the kept
  // document, without them.
  std::vector<std::string> streamed;
  // Top-level keys read past and dropped (a section the reader derives again).
  std::vector<std::string> skipped;
  // Deeper nesting is refused: a file of nothing but '[' would otherwise grow the reader's
  // stack without bound.
  std::size_t max_depth = 64;
};

// A streamed value and where it was: its path's segments, indices as decimal text
// ({"matrices", "bw", "first", "17"}). The reader may move the value out.
using JsonStreamSink = std::function<void(const std::vector<std::string>& path, nlohmann::json& value)>;

// Reads one JSON document from `in`, handing each value at a streamed path to `sink` as soon
// as it is complete, and returns the rest. Throws ProtocolError for bytes that are not one
// complete JSON document ("not a complete JSON document at byte 1234: ...") or nest deeper
// than the plan allows; what `sink` throws passes through.
nlohmann::json read_json_stream(std::istream& in, const JsonStreamPlan& plan, const JsonStreamSink& sink);

}  // namespace rdmakit
