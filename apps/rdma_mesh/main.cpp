// rdma_mesh: every link of a cluster measured over rdma_cm, all pairs, round by round,
// started by mpirun or srun. MPI starts the ranks, exchanges their addresses and results
// and keeps the rounds in step; the measurements are send_bw's (lib/bench/mesh_session).

#include <fstream>
#include <ostream>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lib/bench/mesh_session.hpp"
#include "lib/core/cli.hpp"
#include "lib/core/progress.hpp"
#include "lib/core/wait.hpp"
#include "lib/mpi/mpi_job.hpp"
#include "lib/probe/local_node.hpp"
#include "lib/rdma/cm.hpp"

namespace rdmakit::bw {

// CLI11 reads an option's current value through operator<< (the report's arguments).
static std::ostream& operator<<(std::ostream& out, Operation operation) {
  return out << to_string(operation);
}

}  // namespace rdmakit::bw

namespace {

namespace bw = rdmakit::bw;
namespace mesh = rdmakit::mesh;

struct Options {
  std::string bind;
  std::string netdev;
  std::string device;
  std::uint16_t port = 18600;
  std::vector<std::string> tests{"bw"};
  bw::Operation operation = bw::Operation::send;
  std::uint32_t size = 65536;
  std::uint32_t latency_size = 2;
  std::uint64_t iterations = 1000;
  double duration_s = 0;
  std::uint64_t warmup = 100;
  std::uint32_t depth = 128;
  std::uint32_t inline_size = 64;
  std::uint16_t connections = 4;
  bool one_way = false;
  bool serial = false;
  std::string pairs_file;
  int retests = 1;
  double threshold = mesh::default_bw_threshold;
  double lat_threshold = mesh::default_time_threshold;
};

std::vector<mesh::Test> tests_of(const std::vector<std::string>& names) {
  std::vector<mesh::Test> tests;
  for (const auto& name : names) {
    const auto test = name == "bw" ? mesh::Test::bandwidth : name == "lat" ? mesh::Test::latency : mesh::Test::connect;
    if (std::find(tests.begin(), tests.end(), test) == tests.end()) tests.push_back(test);
  }
  return tests;
}

std::string read_pairs_file(const std::string& path) {
  std::ifstream file(path);
  if (!file) throw rdmakit::UsageError(fmt::format("--pairs {}: cannot read it", path));
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

void validate(const Options& o, bool duration_given, bool iterations_given) {
  if (duration_given && iterations_given) {
    throw rdmakit::UsageError("-n and -D do not combine: give a count or a duration");
  }
  if (!o.bind.empty() && !o.netdev.empty()) {
    throw rdmakit::UsageError("--bind and --netdev both choose the address: give one");
  }
  if (o.lat_threshold <= 1) {
    throw rdmakit::UsageError(
        fmt::format("--lat-threshold {}: a time is an outlier above this many times the median, so it must be above 1",
                    o.lat_threshold));
  }
  // The ranks are not known yet: the pairs are checked against them once the job runs.
  if (!o.pairs_file.empty()) mesh::parse_pair_list(read_pairs_file(o.pairs_file), 1 << 30);
  rdmakit::check_resolvable(o.bind);
}

mesh::MeshSettings settings_of(const Options& o, const rdmakit::CommonOptions& common, int stop_fd) {
  mesh::MeshSettings m;
  m.bw.operation = o.operation;
  m.bw.sizes = {o.size};
  m.bw.budget = {.iterations = o.iterations, .duration = std::nullopt};
  if (o.duration_s > 0) m.bw.budget.duration = std::chrono::nanoseconds(static_cast<long long>(o.duration_s * 1e9));
  m.bw.warmup = o.warmup;
  m.bw.depth = o.depth;
  m.bw.inline_size = o.inline_size;
  m.bw.device = o.device;
  m.bw.limits = {.stop_fd = stop_fd, .timeout = common.timeout()};
  m.tests = tests_of(o.tests);
  m.latency_size = o.latency_size;
  m.connections = o.connections;
  m.base_port = o.port;
  m.one_way = o.one_way;
  m.serial = o.serial;
  m.retests = o.retests;
  m.bw_threshold = o.threshold;
  m.time_threshold = o.lat_threshold;
  return m;
}

void add_options(CLI::App& app, Options& o) {
  app.add_option("--bind", o.bind, "This rank's address (default: --netdev, -d, or the first ACTIVE port's)");
  app.add_option("--netdev", o.netdev, "Use the first address of this netdev");
  app.add_option("-d,--ib-dev", o.device, "Use the first ACTIVE port of this RDMA device");
  app.add_option("-p,--port", o.port, "Base port: rank r listens on PORT + r")
      ->capture_default_str()
      ->check(CLI::Range(1, 65535));
  app.add_option("--test", o.tests, "bw, lat, cm, or a comma-separated combination")
      ->delimiter(',')
      ->check(CLI::IsMember({"bw", "lat", "cm"}))
      ->default_str("bw");
  app.add_option("--op", o.operation, "Bandwidth test: send, write or read")
      ->transform(rdmakit::one_of<bw::Operation>(
          {{"send", bw::Operation::send}, {"write", bw::Operation::write}, {"read", bw::Operation::read}}))
      ->default_str("send");
  app.add_option("-s,--size", o.size, "Bandwidth test: message bytes")
      ->capture_default_str()
      ->check(CLI::Range(1u, bw::max_message_size));
  app.add_option("--lat-size", o.latency_size, "Latency test: message bytes")
      ->capture_default_str()
      ->check(CLI::Range(1u, bw::max_message_size));
  app.add_option("-n,--iters", o.iterations, "Messages per direction (bandwidth) or round trips (latency)")
      ->capture_default_str()
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40));
  app.add_option("-D,--duration", o.duration_s, "Seconds per direction instead of -n")
      ->check(rdmakit::FiniteNumber())
      ->check(CLI::Range(0.001, 86400.0));
  app.add_option("--warmup", o.warmup, "Unmeasured messages before each measurement")->capture_default_str();
  app.add_option("-t,--tx-depth", o.depth, "Work requests in flight (bandwidth)")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  app.add_option("-I,--inline", o.inline_size, "Send messages up to this size inline (0: never)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  app.add_option("-c,--connections", o.connections, "Connection test: connections per direction")
      ->capture_default_str()
      ->check(CLI::Range(1, static_cast<int>(bw::max_queue_pairs)));
  app.add_flag("--one-way", o.one_way, "Measure each pair in one direction only (lower rank to higher)");
  app.add_flag("--serial", o.serial, "One pair at a time: each link without the load of the others");
  app.add_option("--pairs", o.pairs_file, "Measure only the pairs in FILE (lines of two ranks)");
  app.add_option("--retest", o.retests, "Measure outliers and failed pairs again alone, this many times")
      ->capture_default_str()
      ->check(CLI::Range(0, 10));
  app.add_option("--threshold", o.threshold, "Bandwidth outlier: below this times the median")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 0.99));
  app.add_option("--lat-threshold", o.lat_threshold, "Latency and set-up outlier: above this times the median")
      ->capture_default_str()
      ->check(rdmakit::FiniteNumber());
}

}  // namespace

int main(int argc, char** argv) {
  rdmakit::MpiJob job(argc, argv);
  rdmakit::ToolRunner tool("rdma_mesh",
                           "Every pair of ranks measured over rdma_cm (bandwidth, latency, connection set-up), "
                           "started by mpirun or srun",
                           "");
  tool.enable_json_file();
  tool.join_job(job);
  tool.rename_argument("test", "tests");
  tool.rename_argument("op", "operation");
  tool.rename_argument("iters", "iterations");
  tool.rename_argument("duration", "duration_s");
  tool.rename_argument("tx-depth", "depth");
  tool.rename_argument("retest", "retests");
  Options o;
  auto& app = tool.app();
  add_options(app, o);
  rdmakit::ProgressOptions progress_options;
  progress_options.add_to(app);
  auto* iterations = app.get_option("--iters");
  auto* duration = app.get_option("--duration");
  return tool.run(
      argc, argv, [&] { validate(o, duration->count() > 0, iterations->count() > 0); },
      [&](rdmakit::Report& report) {
        // A rank's own address may differ; what is measured and how may not.
        rdmakit::require_same_arguments(
            job, report.arguments,
            {"bind", "netdev", "ib_dev", "json", "json_file", "debug", "log_level", "progress", "quiet"});
        const rdmakit::StopSignal stop;
        auto settings = settings_of(o, tool.common(), stop.fd());
        settings.json_file = tool.json_file();
        auto progress = rdmakit::Progress::for_stderr(progress_options);
        settings.progress = &progress;
        if (o.port + job.size() - 1 > 65535) {
          throw rdmakit::UsageError(
              fmt::format("-p {}: {} ranks need ports up to {}", o.port, job.size(), o.port + job.size() - 1));
        }
        if (!o.pairs_file.empty())
          settings.only_pairs = mesh::parse_pair_list(read_pairs_file(o.pairs_file), job.size());
        rdmakit::diag::ProbeOptions probe;
        probe.limits = settings.bw.limits;
        auto self = rdmakit::diag::describe_local_node(o.bind, o.netdev, o.device, probe);
        self.rank = job.rank();
        self.host = job.host();
        if (self.usable) {
          spdlog::info("rank {}: {} on {} port {} ({})", self.rank, self.address, self.device, self.port,
                       self.address_choice);
        } else {
          spdlog::warn("rank {}: cannot take part: {}: {}", self.rank, self.verdict.value("cause", std::string()),
                       self.verdict.value("summary", std::string()));
        }
        mesh::MeshResults results;
        try {
          mesh::run_mesh(job, settings, self, report, results);
        } catch (...) {
          report.add(std::move(results));
          throw;
        }
        report.add(std::move(results));
      });
}
