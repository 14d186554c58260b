#pragma once
// The OpenMetrics text exposition (what Prometheus scrapes, and node_exporter's textfile
// collector reads): metric families, each with its TYPE, UNIT and HELP lines and its
// samples, and the closing "# EOF". Names follow Prometheus' conventions: the unit in the
// name (_seconds), counters' samples ending in _total.

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

// The exposition of `families`, in order. Throws std::invalid_argument for a name that is
// not [a-zA-Z_:][a-zA-Z0-9_:]*, a label name that is not [a-zA-Z_][a-zA-Z0-9_]*, or a unit
// the family's name does not end with: text a scraper would refuse whole.
std::string render(const std::vector<Family>& families);

// A label value as the format writes it: backslash, double quote and newline escaped.
std::string escaped(std::string_view value);

}  // namespace rdmakit::openmetrics
