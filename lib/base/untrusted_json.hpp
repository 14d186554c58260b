#pragma once
// JSON a peer sent: the one way to parse it. nlohmann's parser keeps its own stack, but every
// later walk of the value (dump, comparison, a report that embeds it) recurses, so a few MiB
// of '[' would overflow the stack there; a document nested deeper than its reader allows is
// refused before it is parsed.

#include <cstddef>
#include <string_view>

#include <nlohmann/json.hpp>

namespace rdmakit {

// The deepest nesting of arrays and objects in `bytes` (brackets inside strings not counted).
std::size_t json_nesting_depth(std::string_view bytes);

// `bytes` as one JSON value nested at most `max_depth` deep; throws ProtocolError naming
// `what` ("the agent's answer") for anything else, with nlohmann's words for the error.
nlohmann::json parse_untrusted_json(std::string_view bytes, std::size_t max_depth, std::string_view what);

}  // namespace rdmakit
