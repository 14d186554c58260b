#include "lib/pingmesh/pingmesh_publisher.hpp"

#include <spdlog/spdlog.h>

#include "lib/base/text_file.hpp"
#include "lib/net/metrics_endpoint.hpp"
#include "lib/net/openmetrics.hpp"

namespace rdmakit::pingmesh {

void Publisher::publish(const NodeSnapshot& node) {
  if (prom_file_.empty() && endpoint_ == nullptr) return;
  const auto families = metrics_families(node);
  if (endpoint_ != nullptr) endpoint_->publish(families);
  // node_exporter's textfile collector reads the Prometheus text format, not OpenMetrics.
  if (!prom_file_.empty()) {
    write_prom_file(openmetrics::render(textfile_families(families), openmetrics::Format::prometheus_text));
  }
}

void Publisher::write_prom_file(const std::string& text) {
  // node_exporter reads the file whenever it is scraped: a new file renamed over the old one
  // is never seen half written, and one that cannot be written leaves the old one. Said when
  // it starts failing and when it writes again, not once a window.
  auto failed = write_file_whole(prom_file_, text);
  if (failed && !prom_file_failure_) spdlog::error("{}; tried again every window", *failed);
  if (!failed && prom_file_failure_) spdlog::info("{} written again", prom_file_);
  prom_file_failure_ = std::move(failed);
}

}  // namespace rdmakit::pingmesh
