// rdma_mesh: every link of a cluster measured over rdma_cm, all pairs, round by round,
// started by mpirun or srun. MPI starts the ranks, exchanges their addresses and results
// and keeps the rounds in step; the measurements are send_bw's (lib/mesh/rdma_mesh_session).

#include <string_view>

#include <spdlog/spdlog.h>

#include "lib/base/wait.hpp"
#include "lib/mesh/local_node.hpp"
#include "lib/mesh/mesh_options.hpp"
#include "lib/mesh/mpi_job.hpp"
#include "lib/tool/cli.hpp"

namespace {

namespace mesh = rdmakit::mesh;

// This rank as the others will see it: its address, device and port, or why it cannot
// take part.
mesh::Node describe_self(const rdmakit::MpiJob& job, const mesh::MeshOptions& o, const mesh::MeshSettings& m,
                         const rdmakit::SiblingNames& siblings) {
  rdmakit::diag::ProbeOptions probe;
  probe.limits = m.bw.limits;
  probe.siblings = siblings;
  auto self = rdmakit::diag::describe_local_node(o.bind, o.netdev, m.bw.device, probe);
  self.rank = job.rank();
  self.host = job.host();
  if (self.usable) {
    spdlog::info("rank {}: {} on {} port {} ({})", self.rank, self.address, self.device, self.port,
                 self.address_choice);
  } else {
    spdlog::warn("rank {}: cannot take part: {}: {}", self.rank, self.verdict.value("cause", std::string()),
                 self.verdict.value("summary", std::string()));
  }
  return self;
}

// --analyse reads a saved report: no MPI (not even MPI_Init, which a plain shell may not
// have the means for) and no device. Decided before the command line is parsed, since the
// job is joined while it is.
bool analysing(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view argument(argv[i]);
    if (argument == "--") return false;
    if (argument == "--analyse" || argument.starts_with("--analyse=")) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  rdmakit::MpiJob job(argc, argv);
  rdmakit::ToolRunner tool("rdma_mesh",
                           "Every pair of ranks measured over rdma_cm (bandwidth, latency, connection set-up), "
                           "started by mpirun or srun",
                           "");
  tool.enable_json_file();
  const bool offline = analysing(argc, argv);
  if (!offline) tool.join_job(job);
  tool.rename_argument("test", "tests");
  tool.rename_argument("op", "operation");
  tool.rename_argument("iters", "iterations");
  tool.rename_argument("duration", "duration_s");
  tool.rename_argument("tx-depth", "depth");
  tool.rename_argument("retest", "retests");
  mesh::MeshOptions o;
  o.add_to(tool.app());
  return tool.run(
      argc, argv, [&] { o.validate(); },
      [&](rdmakit::Report& report) {
        if (offline) {
          mesh::MeshResults results;
          try {
            mesh::analyse_saved_mesh(o.analyse_settings(), report, results);
          } catch (...) {
            report.add(std::move(results));
            throw;
          }
          report.add(std::move(results));
          return;
        }
        // A rank's own address may differ; what is measured and how may not.
        rdmakit::require_same_arguments(
            job, report.arguments,
            {"bind", "netdev", "ib_dev", "json", "json_file", "debug", "log_level", "progress", "quiet"});
        const rdmakit::StopSignal stop;
        auto settings = o.settings_for(job.size(), tool.common(), stop.fd());
        settings.json_file = tool.json_file();
        auto progress = rdmakit::Progress::for_stderr(o.progress);
        settings.progress = &progress;
        const auto self = describe_self(job, o, settings, report.siblings);
        mesh::MeshResults results;
        try {
          mesh::run_rdma_mesh(job, settings, self, report, results);
        } catch (...) {
          report.add(std::move(results));
          throw;
        }
        report.add(std::move(results));
      });
}
