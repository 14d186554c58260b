#pragma once
// One walk over a tool's CLI11 definition, shared by shell completion and the report's
// "arguments", so that what the shell offers and what a report records cannot drift from
// what the tool accepts.

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/base/cli_declarations.hpp"

namespace rdmakit {

// The options a user can see: those in a help group (group "" hides one), positionals
// included, in the order they were added.
std::vector<const CLI::Option*> visible_options(const CLI::App& app);
std::vector<CLI::Option*> visible_options(CLI::App& app);

// The pieces of `text` between `separator`s (one empty piece for empty text), as in a type
// name's "TEXT:{a,b}" or a set's "a,b".
std::vector<std::string_view> split_on(std::string_view text, char separator);

// One member of an option's fixed value set: what the user types and, for a transformer,
// what it becomes ("write" -> "1"); `value` equals `name` for a plain set.
struct SetMember {
  std::string name;
  std::string value;
};

// The first "{...}" of a type name such as "TEXT:{tcp,udp,ib}", "{a->1,b->2}" or
// "ENUM:value in {a->1,b->2} OR {1,2}", as CLI::IsMember and CLI::(Checked)Transformer
// describe themselves; empty when the option has no fixed set.
std::vector<SetMember> value_set(const std::string& type_name);

// Report keys that differ from an option's long name ("timeout" -> "timeout_s").
using ArgumentKeys = std::map<std::string, std::string>;

// The report's "arguments": every visible option but --help and --version, keyed by its
// long name with '-' as '_' (a positional by its name, an option with only a short name by
// that), unless `renamed` names another key. A value is the option's as given, else the
// current value of the variable it is bound to (call after parsing and after any
// adjustment the tool makes), else its default text; typed by the option: a flag as a
// bool, INT/UINT/FLOAT as a number, a member of a transformer's set by its name, other
// values as strings, several values as an array, and an option with no value (an unset
// std::optional) as null.
// Not const: reading a bound variable goes through the option's default capture.
nlohmann::json arguments_of(CLI::App& app, const ArgumentKeys& renamed = {});

}  // namespace rdmakit
