#pragma once
// Shell completion generated from a tool's CLI11 definition, so that what the shell offers
// cannot drift from what the tool accepts.

#include <optional>
#include <string>
#include <vector>

#include "lib/base/cli_declarations.hpp"

namespace rdmakit {

// What completion needs to know about one option.
struct CompletionOption {
  std::vector<std::string> names;   // "-p", "--port": short names first, as typed
  bool takes_value = false;         // false for flags
  std::vector<std::string> values;  // the fixed set (IsMember, Transformer keys), else empty
  enum class Path { none, file, directory } path = Path::none;
};

// The options of `app` a user can type: positionals and hidden options (group "") are
// left out, and so are names and values the generated script could not quote. Values come
// from a validator whose description is a set ("{a,b}", as CLI::IsMember and
// CLI::Transformer describe themselves, or CheckedTransformer's "value in {a->1} OR {1}");
// file names complete for an option typed FILE or PATH (type_name, CLI::ExistingFile) and
// directories for DIR.
std::vector<CompletionOption> completion_options(const CLI::App& app);

// A bash script defining a completion function for `app` and registering it with
// `complete -F` for `program`: the name the tool is installed under, which may carry the
// packager's prefix. `program` must be a plain command name (no quotes or whitespace);
// throws std::invalid_argument otherwise.
std::string bash_completion(const CLI::App& app, const std::string& program);

// The program name asked for by --bash-completion[=NAME] anywhere before "--" (none when it is
// not asked for); without NAME, argv[0]'s file name, else `fallback`.
std::optional<std::string> completion_request(int argc, char** argv, const std::string& fallback);

}  // namespace rdmakit
