#include "lib/pingmesh/pingmesh_report.hpp"

#include <array>
#include <functional>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "lib/net/openmetrics.hpp"

namespace rdmakit::pingmesh {
namespace {

using openmetrics::Family;
using openmetrics::Label;
using openmetrics::Sample;
using openmetrics::Type;

constexpr std::array all_states{PathState::unknown, PathState::ok, PathState::lossy, PathState::slow, PathState::down};

std::vector<Label> path_labels(const PathSnapshot& path) {
  return {{"peer", path.peer.name}, {"address", path.peer.address}, {"same_leaf", path.same_leaf ? "1" : "0"}};
}

std::vector<Label> with(std::vector<Label> labels, Label extra) {
  labels.push_back(std::move(extra));
  return labels;
}

Family family(std::string name, Type type, std::string unit, std::string help) {
  return Family{std::move(name), type, std::move(unit), std::move(help), {}};
}

// A counter family with one sample a path, its value read by `total`.
Family per_path_counter(const NodeSnapshot& node, std::string name, std::string help,
                        const std::function<std::uint64_t(const PathSnapshot&)>& total) {
  Family counter = family(std::move(name), Type::counter, "", std::move(help));
  for (const PathSnapshot& path : node.paths) {
    counter.samples.push_back(Sample{path_labels(path), static_cast<double>(total(path))});
  }
  return counter;
}

// The last window's round trip and responder delay, as quantiles (1: the window's maximum);
// a path whose window had no answer has no sample.
std::vector<Family> window_gauges(const NodeSnapshot& node) {
  Family rtt = family("rdmakit_pingmesh_rtt_seconds", Type::gauge, "seconds",
                      "The network's round trip in the last window (the prober's less the responder's delay)");
  Family delay = family("rdmakit_pingmesh_responder_delay_seconds", Type::gauge, "seconds",
                        "Between the responder's receive and its answer, in the last window");
  Family loss = family("rdmakit_pingmesh_loss_ratio", Type::gauge, "ratio",
                       "Probes lost of those whose fate was known in the last window");
  for (const PathSnapshot& path : node.paths) {
    const WindowFigures& window = path.last_window;
    loss.samples.push_back(Sample{path_labels(path), window.loss_ratio});
    if (window.rtt) {
      const std::array<std::pair<const char*, double>, 3> quantiles{
          {{"0.5", window.rtt->p50_us}, {"0.99", window.rtt->p99_us}, {"1", window.rtt->max_us}}};
      for (const auto& [quantile, value_us] : quantiles) {
        rtt.samples.push_back(Sample{with(path_labels(path), {"quantile", quantile}), value_us / 1e6});
      }
    }
    if (window.responder_delay) {
      delay.samples.push_back(
          Sample{with(path_labels(path), {"quantile", "0.5"}), window.responder_delay->p50_us / 1e6});
    }
  }
  return {std::move(rtt), std::move(delay), std::move(loss)};
}

Family path_states(const NodeSnapshot& node) {
  Family states = family("rdmakit_pingmesh_path_state", Type::stateset, "",
                         "The path's state after its last window: ok, lossy, slow, down, or unknown before one");
  for (const PathSnapshot& path : node.paths) {
    for (const PathState state : all_states) {
      states.samples.push_back(
          Sample{with(path_labels(path), {"rdmakit_pingmesh_path_state", std::string(to_string(state))}),
                 path.verdict.state == state ? 1.0 : 0.0});
    }
  }
  return states;
}

nlohmann::json micros_or_null(const std::optional<LatencySummary>& summary, double LatencySummary::*field) {
  return summary ? nlohmann::json((*summary).*field) : nlohmann::json(nullptr);
}

}  // namespace

std::vector<Family> metrics_families(const NodeSnapshot& node) {
  std::vector<Family> families;
  families.push_back(per_path_counter(node, "rdmakit_pingmesh_probes_sent", "Probes sent to the peer",
                                      [](const PathSnapshot& path) { return path.sent_total; }));
  families.push_back(per_path_counter(node, "rdmakit_pingmesh_probes_answered", "Probes the peer answered in time",
                                      [](const PathSnapshot& path) { return path.answered_total; }));
  families.push_back(per_path_counter(node, "rdmakit_pingmesh_probes_lost",
                                      "Probes whose answer did not come within the answer timeout",
                                      [](const PathSnapshot& path) { return path.lost_total; }));
  families.push_back(per_path_counter(node, "rdmakit_pingmesh_answers_late",
                                      "Answers that came after their probe was counted lost",
                                      [](const PathSnapshot& path) { return path.late_total; }));
  families.push_back(per_path_counter(node, "rdmakit_pingmesh_answers_unexpected",
                                      "Answers to no probe in flight: duplicates, replays, forgeries",
                                      [](const PathSnapshot& path) { return path.unexpected_total; }));
  families.push_back(per_path_counter(node, "rdmakit_pingmesh_rtt_device_samples",
                                      "Round trips taken on both devices' completion clocks (the rest on the hosts')",
                                      [](const PathSnapshot& path) { return path.device_samples_total; }));
  families.push_back(per_path_counter(node, "rdmakit_pingmesh_stamps_missing",
                                      "Answers whose device stamps did not come in time: taken on the hosts' clocks",
                                      [](const PathSnapshot& path) { return path.stamps_missing_total; }));
  families.push_back(per_path_counter(node, "rdmakit_pingmesh_path_state_changes", "Changes of the path's state",
                                      [](const PathSnapshot& path) { return path.state_changes_total; }));
  for (Family& gauge : window_gauges(node)) families.push_back(std::move(gauge));
  families.push_back(path_states(node));

  Family fault = family("rdmakit_pingmesh_node_fault", Type::gauge, "",
                        "1 when every path of this node went bad in the last window: the fault is this node's");
  fault.samples.push_back(Sample{{}, node.node_at_fault ? 1.0 : 0.0});
  families.push_back(std::move(fault));
  Family ignored = family("rdmakit_pingmesh_datagrams_ignored", Type::counter, "",
                          "Datagrams neither answered nor taken as an answer, by reason");
  for (const auto& [reason, count] : node.ignored) {
    ignored.samples.push_back(Sample{{{"reason", reason}}, static_cast<double>(count)});
  }
  families.push_back(std::move(ignored));
  Family window = family("rdmakit_pingmesh_window_seconds", Type::gauge, "seconds", "The length of a window");
  window.samples.push_back(Sample{{}, node.window_s});
  families.push_back(std::move(window));
  Family info = family("rdmakit_pingmesh", Type::info, "", "This prober: its node, address and clock");
  info.samples.push_back(Sample{{{"node", node.node}, {"address", node.address}, {"clock", node.clock}}, 1});
  families.push_back(std::move(info));
  Family cpu = family("process_cpu_seconds", Type::counter, "seconds", "User and system CPU time of this process");
  cpu.samples.push_back(Sample{{}, node.cpu_seconds});
  families.push_back(std::move(cpu));
  return families;
}

std::vector<Family> textfile_families(std::vector<Family> families) {
  for (Family& family : families) {
    if (family.name == "process_cpu_seconds") family.name = "rdmakit_pingmesh_cpu_seconds";
  }
  return families;
}

nlohmann::json window_line(const NodeSnapshot& node, const PathSnapshot& path, double unix_seconds) {
  const WindowFigures& window = path.last_window;
  return {
      {"event", "window"},
      {"time", unix_seconds},
      {"node", node.node},
      {"peer", path.peer.name},
      {"address", path.peer.address},
      {"sent", window.sent},
      {"answered", window.answered},
      {"lost", window.lost},
      {"late", window.late},
      {"unexpected", window.unexpected},
      {"loss_ratio", window.loss_ratio},
      {"rtt_us",
       {{"p50", micros_or_null(window.rtt, &LatencySummary::p50_us)},
        {"p99", micros_or_null(window.rtt, &LatencySummary::p99_us)},
        {"max", micros_or_null(window.rtt, &LatencySummary::max_us)}}},
      {"responder_delay_us", {{"p50", micros_or_null(window.responder_delay, &LatencySummary::p50_us)}}},
      {"rtt_device_samples", window.device_samples},
      {"stamps_missing", window.stamps_missing},
      {"state", to_string(path.verdict.state)},
      {"why", path.verdict.why},
  };
}

nlohmann::json path_totals(const PathSnapshot& path) {
  return {{"peer", path.peer.name},
          {"address", path.peer.address},
          {"same_leaf", path.same_leaf},
          {"sent", path.sent_total},
          {"answered", path.answered_total},
          {"lost", path.lost_total},
          {"late", path.late_total},
          {"unexpected", path.unexpected_total},
          {"rtt_device_samples", path.device_samples_total},
          {"stamps_missing", path.stamps_missing_total},
          {"state_changes", path.state_changes_total},
          {"state", to_string(path.verdict.state)},
          {"why", path.verdict.why}};
}

nlohmann::json state_line(const NodeSnapshot& node, const PathSnapshot* path, PathState from, PathState to,
                          const std::string& why, double unix_seconds) {
  return {
      {"event", "state"},
      {"time", unix_seconds},
      {"node", node.node},
      {"peer", path != nullptr ? nlohmann::json(path->peer.name) : nlohmann::json(nullptr)},
      {"address", path != nullptr ? nlohmann::json(path->peer.address) : nlohmann::json(nullptr)},
      {"from", to_string(from)},
      {"to", to_string(to)},
      {"why", why},
  };
}

}  // namespace rdmakit::pingmesh
