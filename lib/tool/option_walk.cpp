#include "lib/tool/option_walk.hpp"

#include <cstdint>
#include <string_view>

#include <CLI/CLI.hpp>

namespace rdmakit {

namespace {

template <typename App>
auto visible_in(App& app) {
  auto options = app.get_options();
  std::erase_if(options, [](const CLI::Option* option) { return option->get_group().empty(); });
  return options;
}

}  // namespace

std::vector<const CLI::Option*> visible_options(const CLI::App& app) {
  return visible_in(app);
}

std::vector<CLI::Option*> visible_options(CLI::App& app) {
  return visible_in(app);
}

std::vector<std::string_view> split_on(std::string_view text, char separator) {
  std::vector<std::string_view> pieces;
  std::size_t start = 0;
  while (start <= text.size()) {
    auto end = text.find(separator, start);
    if (end == std::string_view::npos) {
      end = text.size();
    }
    pieces.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return pieces;
}

std::vector<SetMember> value_set(const std::string& type_name) {
  const auto open = type_name.find('{');
  const auto close = type_name.find('}', open);
  if (open == std::string::npos || close == std::string::npos) {
    return {};
  }
  std::vector<SetMember> members;
  for (const auto item : split_on(std::string_view(type_name).substr(open + 1, close - open - 1), ',')) {
    const auto arrow = item.find("->");
    const auto name = item.substr(0, arrow);
    const auto value = arrow == std::string_view::npos ? name : item.substr(arrow + 2);
    members.push_back({std::string(name), std::string(value)});
  }
  return members;
}

namespace {

std::string key_of(const CLI::Option& option, const ArgumentKeys& renamed) {
  std::string name;
  if (!option.get_lnames().empty()) {
    name = option.get_lnames().front();
  } else if (!option.nonpositional()) {
    name = option.get_name();
  } else if (!option.get_snames().empty()) {
    name = option.get_snames().front();
  }
  if (const auto found = renamed.find(name); found != renamed.end()) {
    return found->second;
  }
  for (auto& c : name) {
    c = c == '-' ? '_' : c;
  }
  return name;
}

// The option's values as text: the bound variable's current value, read through CLI11's
// default function (and the registered default text put back, so help is untouched), so
// that what the tool made of its flags shows; else as given; else the registered default
// text. A std::optional or a type without operator<< has no current text.
std::vector<std::string> texts_of(CLI::Option& option) {
  const std::string registered = option.get_default_str();
  option.capture_default_str();
  const std::string current = option.get_default_str();
  option.default_str(registered);
  if (option.get_items_expected_max() <= 1 && !current.empty()) {
    return {current};
  }
  if (option.count() > 0) {
    return option.results();
  }
  if (registered.empty()) {
    return {};
  }
  return {registered};
}

bool is_number_type(std::string_view type) {
  return type == "INT" || type == "UINT" || type == "FLOAT" || type == "BOOLEAN" || type == "ENUM";
}

nlohmann::json typed(const std::string& text, std::string_view type, const std::vector<SetMember>& set) {
  for (const auto& member : set) {
    if (member.value == text && member.name != member.value) {
      return member.name;  // a transformer's result, reported as the name the user types
    }
  }
  if (type == "INT") {
    std::int64_t number = 0;
    if (CLI::detail::lexical_cast(text, number)) return number;
  } else if (type == "UINT") {
    std::uint64_t number = 0;
    if (CLI::detail::lexical_cast(text, number)) return number;
  } else if (type == "FLOAT") {
    double number = 0;
    if (CLI::detail::lexical_cast(text, number)) return number;
  } else if (type == "BOOLEAN") {
    bool flag = false;
    if (CLI::detail::lexical_cast(text, flag)) return flag;
  }
  return text;
}

nlohmann::json value_of(CLI::Option& option) {
  if (option.get_items_expected_max() == 0) {
    return option.count() > 0 && option.as<bool>();
  }
  const auto type_name = option.get_type_name();
  const std::string_view type = std::string_view(type_name).substr(0, type_name.find(':'));
  const auto set = value_set(type_name);
  const auto texts = texts_of(option);
  if (texts.empty()) {
    return is_number_type(type) ? nlohmann::json(nullptr) : nlohmann::json("");
  }
  if (option.get_items_expected_max() > 1) {
    auto values = nlohmann::json::array();
    for (const auto& text : texts) {
      values.push_back(typed(text, type, set));
    }
    return values;
  }
  return typed(texts.back(), type, set);
}

}  // namespace

nlohmann::json arguments_of(CLI::App& app, const ArgumentKeys& renamed) {
  auto arguments = nlohmann::json::object();
  for (CLI::Option* option : visible_options(app)) {
    if (option == app.get_help_ptr() || option == app.get_help_all_ptr() || option == app.get_version_ptr()) {
      continue;
    }
    arguments[key_of(*option, renamed)] = value_of(*option);
  }
  return arguments;
}

}  // namespace rdmakit
