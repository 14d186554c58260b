#pragma once
// What monitoring reads of an rdma_pingmesh node, every window: the /metrics endpoint's
// OpenMetrics families and node_exporter's textfile (the Prometheus text format), the file
// replaced whole or left as it was.

#include <optional>
#include <string>
#include <utility>

#include "lib/pingmesh/pingmesh_report.hpp"

namespace rdmakit {
class MetricsEndpoint;
}

namespace rdmakit::pingmesh {

class Publisher {
 public:
  // `prom_file`: node_exporter's textfile, "" for none; `endpoint`: none for no /metrics.
  Publisher(std::string prom_file, MetricsEndpoint* endpoint) : prom_file_(std::move(prom_file)), endpoint_(endpoint) {}

  void publish(const NodeSnapshot& node);
  // Why the textfile was not written the last time, while it fails.
  const std::optional<std::string>& prom_file_failure() const { return prom_file_failure_; }

 private:
  void write_prom_file(const std::string& text);

  std::string prom_file_;
  MetricsEndpoint* endpoint_;
  std::optional<std::string> prom_file_failure_;
};

}  // namespace rdmakit::pingmesh
