#include "lib/tool/shell_completion.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <stdexcept>
#include <string_view>

#include <CLI/CLI.hpp>

#include "lib/tool/option_walk.hpp"

namespace rdmakit {

namespace {

// Words go into `compgen -W '...'`, which expands them again, and into `case` patterns:
// anything beyond these characters could expand, glob or break the quoting.
bool is_plain_word(std::string_view word) {
  if (word.empty()) {
    return false;
  }
  return std::ranges::all_of(word, [](const char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 ||
           std::string_view("_.:+/@%-").find(c) != std::string_view::npos;
  });
}

// The names of an option's fixed set, where the generated script can quote them.
std::vector<std::string> set_of(const std::string& type_name) {
  std::vector<std::string> names;
  for (auto& member : value_set(type_name)) {
    if (is_plain_word(member.name)) {
      names.push_back(std::move(member.name));
    }
  }
  return names;
}

CompletionOption::Path path_of(const std::string& type_name) {
  // Validator descriptions are appended after ':'; a set may itself hold a ':'.
  const std::string_view head(type_name.data(), std::min(type_name.size(), type_name.find('{')));
  auto path = CompletionOption::Path::none;
  for (const auto token : split_on(head, ':')) {
    if (token == "FILE" || token.starts_with("PATH")) {
      path = CompletionOption::Path::file;
    } else if (token == "DIR" && path == CompletionOption::Path::none) {
      path = CompletionOption::Path::directory;
    }
  }
  return path;
}

std::string joined(const std::vector<std::string>& words, std::string_view separator) {
  std::string out;
  for (const auto& word : words) {
    if (!out.empty()) {
      out += separator;
    }
    out += word;
  }
  return out;
}

std::string function_name(const std::string& program) {
  std::string name = "_rdmakit_complete_";
  for (const char c : program) {
    name += std::isalnum(static_cast<unsigned char>(c)) != 0 ? c : '_';
  }
  return name;
}

}  // namespace

std::vector<CompletionOption> completion_options(const CLI::App& app) {
  std::vector<CompletionOption> options;
  for (const CLI::Option* option : visible_options(app)) {
    if (!option->nonpositional()) {
      continue;
    }
    CompletionOption out;
    for (const auto& name : option->get_snames()) {
      if (is_plain_word(name)) {
        out.names.push_back("-" + name);
      }
    }
    for (const auto& name : option->get_lnames()) {
      if (is_plain_word(name)) {
        out.names.push_back("--" + name);
      }
    }
    if (out.names.empty()) {
      continue;
    }
    out.takes_value = option->get_items_expected_max() > 0;
    if (out.takes_value) {
      const auto type_name = option->get_type_name();
      out.values = set_of(type_name);
      out.path = path_of(type_name);
    }
    options.push_back(std::move(out));
  }
  return options;
}

std::string bash_completion(const CLI::App& app, const std::string& program) {
  if (!is_plain_word(program)) {
    throw std::invalid_argument("'" + program + "' is not a plain command name");
  }
  const auto options = completion_options(app);
  std::vector<std::string> long_names;
  std::vector<std::string> all_names;
  std::vector<std::string> unlisted;  // options whose value nothing can list (numbers, addresses)
  std::string arms;
  for (const auto& option : options) {
    for (const auto& name : option.names) {
      all_names.push_back(name);
      if (name.starts_with("--")) {
        long_names.push_back(name);
      }
    }
    if (!option.takes_value) {
      continue;
    }
    const auto pattern = joined(option.names, " | ");
    if (!option.values.empty()) {
      arms += "    " + pattern + ") mapfile -t COMPREPLY < <(compgen -W '" + joined(option.values, " ") +
              "' -- \"$cur\") ;;\n";
    } else if (option.path != CompletionOption::Path::none) {
      const char* kind = option.path == CompletionOption::Path::directory ? "-d" : "-f";
      arms += "    " + pattern +
              ")\n      compopt -o filenames 2>/dev/null || true\n      mapfile -t COMPREPLY < <(compgen " + kind +
              " -- \"$cur\") ;;\n";
    } else {
      unlisted.insert(unlisted.end(), option.names.begin(), option.names.end());
    }
  }
  if (!unlisted.empty()) {
    arms += "    " + joined(unlisted, " | ") + ") ;;\n";
  }

  const auto function = function_name(program);
  std::string script;
  script += "# bash completion for " + program + ", generated from its command line by\n";
  script += "# '" + program + " --bash-completion=" + program + "'.\n";
  script += function + "() {\n";
  script += "  local cur=${COMP_WORDS[COMP_CWORD]} prev= option= prefix= joined=\n";
  script += "  if ((COMP_CWORD > 0)); then prev=${COMP_WORDS[COMP_CWORD - 1]}; fi\n";
  script += "  # COMP_WORDBREAKS usually splits --option=value into three words; rejoin them.\n";
  script += "  if [[ $cur == = ]]; then\n";
  script += "    option=$prev cur= joined=1\n";
  script += "  elif [[ $prev == = ]] && ((COMP_CWORD > 1)); then\n";
  script += "    option=${COMP_WORDS[COMP_CWORD - 2]} joined=1\n";
  script += "  elif [[ $cur == --*=* ]]; then\n";
  script += "    option=${cur%%=*} prefix=${cur%%=*}= cur=${cur#*=} joined=1\n";
  script += "  else\n";
  script += "    option=$prev\n";
  script += "  fi\n";
  script += "  COMPREPLY=()\n";
  script += "  case $option in\n";
  script += arms;
  script += "    *)\n";
  script += "      if [[ -n $joined ]]; then\n";
  script += "        :\n";
  script += "      elif [[ -z $cur || $cur == --* ]]; then\n";
  script += "        mapfile -t COMPREPLY < <(compgen -W '" + joined(long_names, " ") + "' -- \"$cur\")\n";
  script += "      elif [[ $cur == -* ]]; then\n";
  script += "        mapfile -t COMPREPLY < <(compgen -W '" + joined(all_names, " ") + "' -- \"$cur\")\n";
  script += "      fi ;;\n";
  script += "  esac\n";
  script += "  if [[ -n $prefix ]]; then COMPREPLY=(\"${COMPREPLY[@]/#/$prefix}\"); fi\n";
  script += "  return 0\n";
  script += "}\n";
  script += "complete -F " + function + " " + program + "\n";
  return script;
}

// The program name asked for by --bash-completion[=NAME] anywhere before "--". Without NAME:
// the name this process was started under, which is the installed one, packager's prefix
// included. Only the '=' form takes a name, so a positional argument is never mistaken for one.
std::optional<std::string> completion_request(int argc, char** argv, const std::string& fallback) {
  constexpr std::string_view flag = "--bash-completion";
  std::string started_as = argc > 0 ? std::filesystem::path(argv[0]).filename().string() : fallback;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") {
      break;
    }
    if (arg == flag) {
      return started_as;
    }
    if (arg.starts_with(flag) && arg[flag.size()] == '=') {
      const auto name = arg.substr(flag.size() + 1);
      return name.empty() ? started_as : std::string(name);
    }
  }
  return std::nullopt;
}

}  // namespace rdmakit
