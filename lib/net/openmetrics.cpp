#include "lib/net/openmetrics.hpp"

#include <charconv>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "lib/base/text_file.hpp"

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

// The Prometheus text format knows counters and gauges of these: a stateset's samples and an
// info's single 1 are gauges there (as OpenMetrics' own converters write them).
std::string_view type_name(Type type, Format format) {
  switch (type) {
    case Type::counter: return "counter";
    case Type::gauge: return "gauge";
    case Type::stateset: return format == Format::openmetrics ? "stateset" : "gauge";
    case Type::info: return format == Format::openmetrics ? "info" : "gauge";
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

// Backslash and newline escaped, and double quotes where `quotes`.
std::string escape(std::string_view text, bool quotes) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"' && quotes) {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string escaped(std::string_view value) {
  return escape(value, true);
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

void append_metadata(std::string& text, const Family& family, Format format) {
  if (format == Format::openmetrics) {
    text += fmt::format("# TYPE {} {}\n", family.name, type_name(family.type, format));
    if (!family.unit.empty()) text += fmt::format("# UNIT {} {}\n", family.name, family.unit);
    if (!family.help.empty()) text += fmt::format("# HELP {} {}\n", family.name, escaped(family.help));
    return;
  }
  // The text format's metadata names the samples: a counter's TYPE line names x_total.
  const std::string name = sample_name(family);
  // Only backslash and newline are escaped there: an escaped quote would read as two characters.
  if (!family.help.empty()) text += fmt::format("# HELP {} {}\n", name, escape(family.help, false));
  text += fmt::format("# TYPE {} {}\n", name, type_name(family.type, format));
}

}  // namespace

std::string render(const std::vector<Family>& families, Format format) {
  std::string text;
  for (const Family& family : families) {
    if (!valid_name(family.name, true)) throw std::invalid_argument("OpenMetrics: bad metric name " + family.name);
    if (!family.unit.empty() && !family.name.ends_with("_" + family.unit)) {
      throw std::invalid_argument(
          fmt::format("OpenMetrics: {} does not end with its unit {}", family.name, family.unit));
    }
    append_metadata(text, family, format);
    const std::string name = sample_name(family);
    for (const Sample& sample : family.samples) append_sample(text, name, sample);
  }
  if (format == Format::openmetrics) text += "# EOF\n";
  return text;
}

std::string_view content_type(Format format) {
  return format == Format::openmetrics ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
                                       : "text/plain; version=0.0.4; charset=utf-8";
}

namespace {

// A media range's quality: its q parameter, 1 without one, 0 for one that does not parse.
double quality(std::string_view parameters) {
  while (!parameters.empty()) {
    const auto semicolon = parameters.find(';');
    const auto parameter = trimmed(parameters.substr(0, semicolon));
    if (parameter.starts_with("q=")) {
      double q = 0;
      const auto digits = parameter.substr(2);
      const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), q);
      return error == std::errc() && end == digits.data() + digits.size() ? q : 0;
    }
    if (semicolon == std::string_view::npos) break;
    parameters.remove_prefix(semicolon + 1);
  }
  return 1;
}

}  // namespace

Format negotiate(std::string_view accept) {
  while (!accept.empty()) {
    const auto comma = accept.find(',');
    const auto range = accept.substr(0, comma);
    const auto semicolon = range.find(';');
    const auto media_type = trimmed(range.substr(0, semicolon));
    const auto parameters = semicolon == std::string_view::npos ? std::string_view() : range.substr(semicolon + 1);
    if (media_type == "application/openmetrics-text" && quality(parameters) > 0) return Format::openmetrics;
    if (comma == std::string_view::npos) break;
    accept.remove_prefix(comma + 1);
  }
  return Format::prometheus_text;
}

}  // namespace rdmakit::openmetrics
