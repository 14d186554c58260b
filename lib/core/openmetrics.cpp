#include "lib/core/openmetrics.hpp"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace rdmakit::openmetrics {
namespace {

bool valid_name(std::string_view name, bool colons) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colons && c == ':');
    if (!letter && (i == 0 || c < '0' || c > '9')) return false;
  }
  return true;
}

std::string_view type_name(Type type) {
  switch (type) {
    case Type::counter: return "counter";
    case Type::gauge: return "gauge";
    case Type::stateset: return "stateset";
    case Type::info: return "info";
  }
  return "unknown";
}

std::string number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", value);
}

// The sample name: counters' samples end in _total, info families' in _info.
std::string sample_name(const Family& family) {
  if (family.type == Type::counter) return family.name + "_total";
  if (family.type == Type::info) return family.name + "_info";
  return family.name;
}

}  // namespace

std::string escaped(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

namespace {

// One sample line; a label value escaped as the format wants it.
void append_sample(std::string& text, const std::string& name, const Sample& sample) {
  text += name;
  if (!sample.labels.empty()) {
    text += '{';
    for (std::size_t i = 0; i < sample.labels.size(); ++i) {
      const Label& label = sample.labels[i];
      if (!valid_name(label.name, false)) throw std::invalid_argument("OpenMetrics: bad label name " + label.name);
      text += fmt::format("{}{}=\"{}\"", i == 0 ? "" : ",", label.name, escaped(label.value));
    }
    text += '}';
  }
  text += ' ';
  text += number(sample.value);
  text += '\n';
}

}  // namespace

std::string render(const std::vector<Family>& families) {
  std::string text;
  for (const Family& family : families) {
    if (!valid_name(family.name, true)) throw std::invalid_argument("OpenMetrics: bad metric name " + family.name);
    if (!family.unit.empty() && !family.name.ends_with("_" + family.unit)) {
      throw std::invalid_argument(
          fmt::format("OpenMetrics: {} does not end with its unit {}", family.name, family.unit));
    }
    text += fmt::format("# TYPE {} {}\n", family.name, type_name(family.type));
    if (!family.unit.empty()) text += fmt::format("# UNIT {} {}\n", family.name, family.unit);
    if (!family.help.empty()) text += fmt::format("# HELP {} {}\n", family.name, escaped(family.help));
    const std::string name = sample_name(family);
    for (const Sample& sample : family.samples) append_sample(text, name, sample);
  }
  text += "# EOF\n";
  return text;
}

}  // namespace rdmakit::openmetrics
