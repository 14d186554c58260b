#pragma once
// Metric families as the two text formats Prometheus' consumers read: OpenMetrics 1.0 (what
// Prometheus asks a /metrics endpoint for) and the Prometheus text format 0.0.4 (what
// node_exporter's textfile collector and promtool read, and what a scraper that does not ask
// for OpenMetrics gets). Names follow Prometheus' conventions: the unit in the name
// (_seconds), counters' samples ending in _total.

#include <string>
#include <string_view>
#include <vector>

namespace rdmakit::openmetrics {

enum class Type { counter, gauge, stateset, info };

struct Label {
  std::string name;
  std::string value;
};

struct Sample {
  std::vector<Label> labels;
  double value = 0;
};

struct Family {
  std::string name;  // without _total; ends with _<unit> when a unit is given
  Type type = Type::gauge;
  std::string unit;  // "seconds", "ratio", ... or empty
  std::string help;
  std::vector<Sample> samples;
};

enum class Format {
  // Each family's TYPE, UNIT and HELP lines and its samples, closed by "# EOF".
  openmetrics,
  // HELP and TYPE lines only, named as the samples are (a counter's with _total); a stateset
  // or info family becomes the gauge OpenMetrics' own converters make of it; no "# EOF".
  prometheus_text,
};

// The exposition of `families`, in order. Throws std::invalid_argument for a name that is
// not [a-zA-Z_:][a-zA-Z0-9_:]*, a label name that is not [a-zA-Z_][a-zA-Z0-9_]*, or a unit
// the family's name does not end with: text a scraper would refuse whole.
std::string render(const std::vector<Family>& families, Format format = Format::openmetrics);

// The Content-Type of a format's text, as an HTTP answer names it.
std::string_view content_type(Format format);

// The format a scraper's Accept header asks for: OpenMetrics where it names
// application/openmetrics-text with a quality above 0, the Prometheus text format otherwise
// (no header, text/plain, */*), as Prometheus' client libraries answer.
Format negotiate(std::string_view accept);

// A label value as both formats write it: backslash, double quote and newline escaped.
std::string escaped(std::string_view value);

}  // namespace rdmakit::openmetrics
