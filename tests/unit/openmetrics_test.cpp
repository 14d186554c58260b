#include "lib/net/openmetrics.hpp"

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

TEST(OpenMetrics, PrometheusTextNamesSamplesAndHasNoEof) {
  const std::vector<Family> families{
      family("rdmakit_pingmesh_probes_sent", Type::counter, "", "Probes \"sent\"\\n", {{{{"peer", "nodeb"}}, 120}}),
      family("rdmakit_pingmesh_rtt_seconds", Type::gauge, "seconds", "", {{{}, 0.5}}),
      family("rdmakit_pingmesh_path_state", Type::stateset, "", "",
             {{{{"peer", "nodeb"}, {"rdmakit_pingmesh_path_state", "ok"}}, 1}}),
      family("rdmakit_pingmesh", Type::info, "", "This prober", {{{{"node", "a"}}, 1}}),
  };
  EXPECT_EQ(render(families, Format::prometheus_text),
            "# HELP rdmakit_pingmesh_probes_sent_total Probes \"sent\"\\\\n\n"
            "# TYPE rdmakit_pingmesh_probes_sent_total counter\n"
            "rdmakit_pingmesh_probes_sent_total{peer=\"nodeb\"} 120\n"
            "# TYPE rdmakit_pingmesh_rtt_seconds gauge\n"
            "rdmakit_pingmesh_rtt_seconds 0.5\n"
            "# TYPE rdmakit_pingmesh_path_state gauge\n"
            "rdmakit_pingmesh_path_state{peer=\"nodeb\",rdmakit_pingmesh_path_state=\"ok\"} 1\n"
            "# HELP rdmakit_pingmesh_info This prober\n"
            "# TYPE rdmakit_pingmesh_info gauge\n"
            "rdmakit_pingmesh_info{node=\"a\"} 1\n");
  EXPECT_EQ(render({}, Format::prometheus_text), "");
}

// What Prometheus 2.x and 3.x send, what curl and node_exporter-style scrapers send.
TEST(OpenMetrics, NegotiatesAsPrometheusClientLibrariesDo) {
  EXPECT_EQ(negotiate("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
                      "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
            Format::openmetrics);
  EXPECT_EQ(negotiate("text/plain;version=0.0.4;q=0.5, application/openmetrics-text; version=1.0.0; q=0.9"),
            Format::openmetrics);
  EXPECT_EQ(negotiate(""), Format::prometheus_text);
  EXPECT_EQ(negotiate("*/*"), Format::prometheus_text);
  EXPECT_EQ(negotiate("text/plain;version=0.0.4"), Format::prometheus_text);
  EXPECT_EQ(negotiate("application/openmetrics-text;q=0"), Format::prometheus_text);
  EXPECT_EQ(negotiate("application/openmetrics-text;q=x"), Format::prometheus_text);
  EXPECT_EQ(content_type(Format::prometheus_text), "text/plain; version=0.0.4; charset=utf-8");
}

TEST(OpenMetrics, RefusesWhatAScraperWouldRefuse) {
  EXPECT_THROW(render({family("1abc", Type::gauge, "", "", {})}), std::invalid_argument);
  EXPECT_THROW(render({family("rtt", Type::gauge, "seconds", "", {})}), std::invalid_argument);
  EXPECT_THROW(render({family("x", Type::gauge, "", "", {{{{"bad-label", "v"}}, 1}})}), std::invalid_argument);
  EXPECT_EQ(render({}), "# EOF\n");
}

}  // namespace
}  // namespace rdmakit::openmetrics
