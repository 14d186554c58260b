#include "lib/diag/bind_session.hpp"

#include <utility>

#include <CLI/CLI.hpp>

#include "lib/diag/gid_table.hpp"
#include "lib/diag/host_probe.hpp"
#include "lib/diag/sysfs.hpp"
#include "lib/rdma/cm.hpp"

namespace rdmakit::diag {

namespace {

// --gids: the GID table, and for an address the entry the index-taking stacks need. `replayed`
// is the captured host under --replay (its attempt's route source is its own address's).
void report_gids(const BindOptions& o, const std::optional<Replay>& replayed, Report& report) {
  const auto host = o.address.empty() ? std::string() : parse_address(o.address, 0).host_string();
  Inventory inventory;
  std::string source;
  if (replayed) {
    inventory = replayed->inventory;
    if (!host.empty() && canonical(host) == canonical(replayed->address)) source = replayed->attempt.route_source;
  } else {
    inventory = collect_inventory(ProbeOptions{});
    if (!host.empty() && !address_is_local(inventory, host)) source = source_toward(host);
  }
  if (inventory.kernel_devices.empty()) {
    throw Unsupported("no RDMA device, so no GID table; run '" + report.siblings.diag_bind() + "' to see why");
  }
  std::optional<GidLookup> lookup;
  if (!host.empty()) lookup = look_up_gid(inventory, host, source);
  GidReport gids(gid_rows(inventory), std::move(lookup), report.siblings);
  report.exit_code = gids.exit_code();
  report.add(std::move(gids));
}

}  // namespace

void BindOptions::add_to(ToolRunner& tool) {
  tool.rename_argument("ps", "port_space");
  tool.rename_argument("mr-size", "mr_size_kib");
  auto& app = tool.app();
  app.add_option("address", address,
                 "Address to bind (a local one) or resolve (a remote one); none: check the host only");
  app.add_option("-p,--port", port, "Port to bind (0 = any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("--ps", port_space, "Port space: tcp, udp or ib")
      ->capture_default_str()
      ->check(CLI::IsMember({"tcp", "udp", "ib"}));
  app.add_option("--mr-size", registration_kib, "KiB to register in the locked-memory probe")
      ->capture_default_str()
      ->check(CLI::Range(4, 1 << 22));
  app.add_option("--replay", replay_dir,
                 "Diagnose a captured host instead of this one: DIR/sys is its sysfs tree, DIR/facts.json the rest");
  app.add_flag("--gids", gids,
               "Print every port's GID table instead; with an address, the GID index to give perftest -x, NCCL, UCX "
               "and Open MPI for it");
}

Target BindSession::target() const {
  const auto host = options_.address.empty() ? std::string() : parse_address(options_.address, 0).host_string();
  return make_target(host, options_.port, options_.port_space);
}

void BindSession::prepare() {
  if (!options_.replay_dir.empty()) {
    auto captured = load_replay(options_.replay_dir);
    captured_address_ = captured.address;
    diagnosis_.inventory = std::move(captured.inventory);
    diagnosis_.attempt = std::move(captured.attempt);
    diagnosis_.target =
        make_target(options_.address.empty() ? captured.address : options_.address, options_.port, options_.port_space);
    return;
  }
  resolved_ = check_resolvable(options_.address);
  if (resolved_) diagnosis_.target = target();
}

void BindSession::run(const CommonOptions& common, Report& report) {
  auto& d = diagnosis_;
  if (options_.gids) {
    std::optional<Replay> replayed;
    if (!options_.replay_dir.empty()) replayed = {d.inventory, d.attempt, captured_address_};
    report_gids(options_, replayed, report);
    return;
  }
  if (options_.replay_dir.empty()) {
    if (!resolved_) d.target = target();
    ProbeOptions probe;
    probe.limits.timeout = common.timeout();
    probe.registration_bytes = options_.registration_kib << 10;
    probe.siblings = report.siblings;
    d.inventory = collect_inventory(probe);
    d.attempt = run_attempt(d.target, probe);
  }
  d.verdict = diagnose(d.target, d.inventory, d.attempt, report.siblings);
  report.exit_code = d.verdict.exit_code;
  report.add(DiagnosisResult(d));
}

}  // namespace rdmakit::diag
