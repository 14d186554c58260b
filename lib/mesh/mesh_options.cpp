#include "lib/mesh/mesh_options.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "lib/base/error.hpp"
#include "lib/rdma/cm.hpp"
#include "lib/tool/cli_checks.hpp"

namespace rdmakit::mesh {

namespace {

std::vector<Test> tests_of(const std::vector<std::string>& names) {
  std::vector<Test> tests;
  for (const auto& name : names) {
    const auto test = test_named(name).value();  // CLI11 took bw, lat, cm only
    if (std::find(tests.begin(), tests.end(), test) == tests.end()) tests.push_back(test);
  }
  return tests;
}

std::string names_of(const std::vector<Test>& tests) {
  std::string names;
  for (const auto test : tests) names += (names.empty() ? "" : ",") + std::string(to_string(test));
  return names;
}

std::string read_pairs_file(const std::string& path) {
  std::ifstream file(path);
  if (!file) throw UsageError(fmt::format("--pairs {}: cannot read it", path));
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

}  // namespace

void MeshOptions::add_to(CLI::App& app) {
  MeshSettings& m = settings;
  const auto options_before = app.get_options().size();
  app.add_option("--bind", bind, "This rank's address (default: --netdev, -d, or the first ACTIVE port's)");
  app.add_option("--netdev", netdev, "Use the first address of this netdev");
  app.add_option("-d,--ib-dev", m.bw.device, "Use the first ACTIVE port of this RDMA device");
  app.add_option("-p,--port", m.base_port, "Base port: rank r listens on PORT + r")
      ->capture_default_str()
      ->check(CLI::Range(1, 65535));
  app.add_option("--test", tests, "bw, lat, cm, or a comma-separated combination")
      ->delimiter(',')
      ->check(CLI::IsMember({"bw", "lat", "cm"}))
      ->default_str(names_of(m.tests));
  add_measure_options(app, m.bw, measure,
                      {.operation = "Bandwidth test: send, write or read",
                       .atomic = nullptr,
                       .size = "Bandwidth test: message bytes",
                       .sweep = nullptr,
                       .iterations = "Messages per direction (bandwidth) or round trips (latency)",
                       .duration = "Seconds per direction instead of -n",
                       .warmup = "Unmeasured messages before each measurement",
                       .depth = "Work requests in flight (bandwidth)",
                       .inline_names = "-I,--inline",
                       .inline_size = "Send messages up to this size inline (0: never)"});
  app.add_option("--lat-size", m.latency_size, "Latency test: message bytes")
      ->capture_default_str()
      ->check(CLI::Range(1U, bw::max_message_size));
  app.add_option("-c,--connections", m.connections, "Connection test: connections per direction")
      ->capture_default_str()
      ->check(CLI::Range(1, static_cast<int>(bw::max_queue_pairs)));
  app.add_flag("--one-way", m.one_way, "Measure each pair in one direction only (lower rank to higher)");
  app.add_flag("--serial", m.serial, "One pair at a time: each link without the load of the others");
  app.add_option("--pairs", pairs_file, "Measure only the pairs in FILE (lines of two ranks)");
  app.add_flag("--quick", m.quick,
               "Health check: one round, every rank in one pair (rank r with r + N/2), both directions");
  app.add_option("--retest", m.retests,
                 "Most passes measuring outliers and failed pairs again, while each leaves fewer")
      ->capture_default_str()
      ->check(CLI::Range(0, 10));
  app.add_option("--threshold", m.bw_threshold, "Bandwidth outlier: below this times the median")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 0.99));
  app.add_option("--lat-threshold", m.time_threshold, "Latency and set-up outlier: above this times the median")
      ->capture_default_str()
      ->check(FiniteNumber());
  threshold_option = app.get_option("--threshold");
  lat_threshold_option = app.get_option("--lat-threshold");
  // What measures has no meaning for a report already measured (validate() refuses it).
  const auto options = app.get_options();
  for (std::size_t i = options_before; i < options.size(); ++i) {
    if (options[i] != threshold_option && options[i] != lat_threshold_option) measuring.push_back(options[i]);
  }
  progress.add_to(app);
  app.add_option("--topology", topology_file,
                 "Where the hosts hang: Slurm's topology.conf or 'host switch' lines (default under "
                 "Slurm: its topology.conf)");
  app.add_option("--rule", rule, "What makes a direction bad: median (--threshold) or clusterkit")
      ->capture_default_str()
      ->check(CLI::IsMember({"median", "clusterkit"}));
  app.add_option("--analyse", analyse_file, "Judge this saved --json report again: no MPI, no device");
}

void MeshOptions::validate() const {
  if (!analyse_file.empty()) {
    for (const auto* option : measuring) {
      if (option->count() > 0) {
        throw UsageError(
            fmt::format("{} measures, and --analyse judges a report already measured: give one", option->get_name()));
      }
    }
  }
  check_count_or_duration(measure.duration_given(), measure.iterations_given());
  if (!bind.empty() && !netdev.empty()) {
    throw UsageError("--bind and --netdev both choose the address: give one");
  }
  if (settings.time_threshold <= 1) {
    throw UsageError(
        fmt::format("--lat-threshold {}: a time is an outlier above this many times the median, so it must be above 1",
                    settings.time_threshold));
  }
  if (settings.quick && !pairs_file.empty()) {
    throw UsageError("--quick and --pairs both choose the pairs: give one");
  }
  // The ranks are not known yet: the pairs are checked against them once the job runs.
  if (!pairs_file.empty()) parse_pair_list(read_pairs_file(pairs_file), 1 << 30);
  check_resolvable(bind);
}

namespace {

// --topology's file, else Slurm's own under Slurm, else none.
std::optional<Topology> topology_for(const std::string& file) {
  if (!file.empty()) return read_topology(file);
  if (const auto slurm = slurm_topology_file([](const char* name) { return std::getenv(name); })) {
    return read_topology(*slurm);
  }
  return std::nullopt;
}

std::optional<double> given(const CLI::Option* option, double value) {
  return option != nullptr && option->count() > 0 ? std::optional(value) : std::nullopt;
}

Rule rule_named(const std::string& name) {
  return name == "clusterkit" ? Rule::clusterkit : Rule::median;
}

}  // namespace

MeshSettings MeshOptions::settings_for(int ranks, const CommonOptions& common, int stop_fd) const {
  if (settings.base_port + ranks - 1 > 65535) {
    throw UsageError(
        fmt::format("-p {}: {} ranks need ports up to {}", settings.base_port, ranks, settings.base_port + ranks - 1));
  }
  MeshSettings m = settings;
  m.bw.sizes = {measure.size};
  m.bw.budget.duration = measure.duration();
  m.bw.limits = {.stop_fd = stop_fd, .timeout = common.timeout()};
  if (!tests.empty()) m.tests = tests_of(tests);
  if (!pairs_file.empty()) m.only_pairs = parse_pair_list(read_pairs_file(pairs_file), ranks);
  m.rule = rule_named(rule);
  m.topology = topology_for(topology_file);
  return m;
}

AnalyseSettings MeshOptions::analyse_settings() const {
  return AnalyseSettings{.report_file = analyse_file,
                         .topology = topology_for(topology_file),
                         .rule = rule_named(rule),
                         .bw_threshold = given(threshold_option, settings.bw_threshold),
                         .time_threshold = given(lat_threshold_option, settings.time_threshold)};
}

}  // namespace rdmakit::mesh
