// diag-bind: explains why rdma_bind_addr (or address/route resolution) fails on this host,
// by putting the kernel's and user space's views of the RDMA devices side by side with a
// real attempt, and naming the cause with the command that fixes it.

#include <optional>
#include <utility>

#include <CLI/CLI.hpp>

#include "lib/diag/attached_answer.hpp"
#include "lib/diag/gid_table.hpp"
#include "lib/diag/host_probe.hpp"
#include "lib/diag/sysfs.hpp"
#include "lib/rdma/cm.hpp"
#include "lib/tool/cli.hpp"

namespace {

struct Options {
  std::string address;
  std::uint16_t port = 0;
  std::string port_space = "tcp";
  std::size_t registration_kib = 1024;
  std::string replay_dir;
  bool gids = false;
};

void add_options(CLI::App& app, Options& o) {
  app.add_option("address", o.address,
                 "Address to bind (a local one) or resolve (a remote one); none: check the host only");
  app.add_option("-p,--port", o.port, "Port to bind (0 = any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("--ps", o.port_space, "Port space: tcp, udp or ib")
      ->capture_default_str()
      ->check(CLI::IsMember({"tcp", "udp", "ib"}));
  app.add_option("--mr-size", o.registration_kib, "KiB to register in the locked-memory probe")
      ->capture_default_str()
      ->check(CLI::Range(4, 1 << 22));
  app.add_option("--replay", o.replay_dir,
                 "Diagnose a captured host instead of this one: DIR/sys is its sysfs tree, DIR/facts.json the rest");
  app.add_flag("--gids", o.gids,
               "Print every port's GID table instead; with an address, the GID index to give perftest -x, NCCL, UCX "
               "and Open MPI for it");
}

rdmakit::diag::Diagnosis replay(const Options& o, std::string& captured_address) {
  auto captured = rdmakit::diag::load_replay(o.replay_dir);
  captured_address = captured.address;
  rdmakit::diag::Diagnosis d;
  d.inventory = std::move(captured.inventory);
  d.attempt = std::move(captured.attempt);
  d.target = rdmakit::diag::make_target(o.address.empty() ? captured.address : o.address, o.port, o.port_space);
  return d;
}

// --gids: the GID table, and for an address the entry the index-taking stacks need. `replayed`
// is the captured host under --replay (its attempt's route source is its own address's).
void report_gids(const Options& o, const std::optional<rdmakit::diag::Replay>& replayed, rdmakit::Report& report) {
  using namespace rdmakit::diag;
  const auto host = o.address.empty() ? std::string() : rdmakit::parse_address(o.address, 0).host_string();
  Inventory inventory;
  std::string source;
  if (replayed) {
    inventory = replayed->inventory;
    if (!host.empty() && rdmakit::canonical(host) == rdmakit::canonical(replayed->address)) {
      source = replayed->attempt.route_source;
    }
  } else {
    inventory = collect_inventory(ProbeOptions{});
    if (!host.empty() && !address_is_local(inventory, host)) source = source_toward(host);
  }
  if (inventory.kernel_devices.empty()) {
    throw rdmakit::Unsupported("no RDMA device, so no GID table; run 'diag-bind' to see why");
  }
  std::optional<GidLookup> lookup;
  if (!host.empty()) lookup = look_up_gid(inventory, host, source);
  GidReport gids(gid_rows(inventory), std::move(lookup));
  report.exit_code = gids.exit_code();
  report.add(std::move(gids));
}

}  // namespace

int main(int argc, char** argv) {
  // Another tool's --diagnose, passed on to this program (lib/tool/attached_diagnosis.hpp).
  if (const auto answered = rdmakit::diag::answer_attached_diagnosis(argc, argv)) return *answered;
  rdmakit::ToolRunner runner("diag-bind", "Explain why an RDMA address bind or resolution fails on this host");
  // Nothing connects or is measured; the address diagnosed is the report's "address".
  runner.report_groups({.connection = false, .measurement = false});
  Options options;
  runner.rename_argument("ps", "port_space");
  runner.rename_argument("mr-size", "mr_size_kib");
  add_options(runner.app(), options);
  runner.app().footer(
      "Exit status: 0 the address is usable, 1 a cause was found (see 'verdict'), 2 usage error, 3 the failure could "
      "not be explained (the raw data is printed). With --gids: 0 the table (and an index for the address), 1 the "
      "address has no GID, 77 no RDMA device.");
  rdmakit::diag::Diagnosis d;
  rdmakit::diag::ProbeOptions probe;
  auto target = [&] {
    const auto host =
        options.address.empty() ? std::string() : rdmakit::parse_address(options.address, 0).host_string();
    return rdmakit::diag::make_target(host, options.port, options.port_space);
  };
  bool resolved = false;
  std::string captured_address;
  // Everything that can be wrong with the command line is found before anything runs.
  auto prepare = [&] {
    if (!options.replay_dir.empty()) {
      d = replay(options, captured_address);
      return;
    }
    // A resolver that cannot answer now (EAI_AGAIN) is not the command line's fault: the run
    // resolves again and fails with it.
    resolved = rdmakit::check_resolvable(options.address);
    if (resolved) d.target = target();
  };
  return runner.run(argc, argv, prepare, [&](rdmakit::Report& report) {
    if (options.gids) {
      std::optional<rdmakit::diag::Replay> replayed;
      if (!options.replay_dir.empty()) replayed = {d.inventory, d.attempt, captured_address};
      report_gids(options, replayed, report);
      return;
    }
    if (options.replay_dir.empty()) {
      if (!resolved) d.target = target();
      probe.limits.timeout = runner.common().timeout();
      probe.registration_bytes = options.registration_kib << 10;
      d.inventory = rdmakit::diag::collect_inventory(probe);
      d.attempt = rdmakit::diag::run_attempt(d.target, probe);
    }
    d.verdict = rdmakit::diag::diagnose(d.target, d.inventory, d.attempt);
    report.exit_code = d.verdict.exit_code;
    report.add(rdmakit::diag::DiagnosisResult(d));
  });
}
