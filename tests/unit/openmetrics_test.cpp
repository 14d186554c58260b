#include "lib/core/openmetrics.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace rdmakit::openmetrics {
namespace {

Family family(std::string name, Type type, std::string unit, std::string help, std::vector<Sample> samples) {
  return Family{std::move(name), type, std::move(unit), std::move(help), std::move(samples)};
}

TEST(OpenMetrics, FamiliesWithTheirMetadataAndEof) {
  const std::vector<Family> families{
      family("rdmakit_pingmesh_probes_sent", Type::counter, "", "Probes sent",
             {{{{"peer", "nodeb"}}, 120}, {{{"peer", "nodec"}}, 7}}),
      family("rdmakit_pingmesh_rtt_seconds", Type::gauge, "seconds", "Network round trip",
             {{{{"peer", "nodeb"}, {"quantile", "0.99"}}, 0.000125}}),
      family("rdmakit_pingmesh_path_state", Type::stateset, "", "",
             {{{{"peer", "nodeb"}, {"rdmakit_pingmesh_path_state", "ok"}}, 1}}),
  };
  EXPECT_EQ(render(families),
            "# TYPE rdmakit_pingmesh_probes_sent counter\n"
            "# HELP rdmakit_pingmesh_probes_sent Probes sent\n"
            "rdmakit_pingmesh_probes_sent_total{peer=\"nodeb\"} 120\n"
            "rdmakit_pingmesh_probes_sent_total{peer=\"nodec\"} 7\n"
            "# TYPE rdmakit_pingmesh_rtt_seconds gauge\n"
            "# UNIT rdmakit_pingmesh_rtt_seconds seconds\n"
            "# HELP rdmakit_pingmesh_rtt_seconds Network round trip\n"
            "rdmakit_pingmesh_rtt_seconds{peer=\"nodeb\",quantile=\"0.99\"} 0.000125\n"
            "# TYPE rdmakit_pingmesh_path_state stateset\n"
            "rdmakit_pingmesh_path_state{peer=\"nodeb\",rdmakit_pingmesh_path_state=\"ok\"} 1\n"
            "# EOF\n");
}

TEST(OpenMetrics, EscapesLabelValuesAndSpecialNumbers) {
  EXPECT_EQ(escaped("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  const std::vector<Family> families{
      family("x", Type::gauge, "", "",
             {{{}, std::numeric_limits<double>::quiet_NaN()}, {{}, std::numeric_limits<double>::infinity()}})};
  EXPECT_EQ(render(families), "# TYPE x gauge\nx NaN\nx +Inf\n# EOF\n");
}

TEST(OpenMetrics, RefusesWhatAScraperWouldRefuse) {
  EXPECT_THROW(render({family("1abc", Type::gauge, "", "", {})}), std::invalid_argument);
  EXPECT_THROW(render({family("rtt", Type::gauge, "seconds", "", {})}), std::invalid_argument);
  EXPECT_THROW(render({family("x", Type::gauge, "", "", {{{{"bad-label", "v"}}, 1}})}), std::invalid_argument);
  EXPECT_EQ(render({}), "# EOF\n");
}

}  // namespace
}  // namespace rdmakit::openmetrics
