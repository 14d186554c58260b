#include "lib/pingmesh/pingmesh_session.hpp"

#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <future>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "lib/base/cpu_use.hpp"
#include "lib/base/error.hpp"
#include "lib/base/file_descriptor.hpp"
#include "lib/base/host_name.hpp"
#include "lib/base/wait.hpp"
#include "lib/net/metrics_endpoint.hpp"
#include "lib/pingmesh/pinglist.hpp"
#include "lib/pingmesh/pingmesh_node.hpp"
#include "lib/pingmesh/pingmesh_path.hpp"
#include "lib/pingmesh/pingmesh_probe.hpp"
#include "lib/pingmesh/pingmesh_publisher.hpp"
#include "lib/pingmesh/pingmesh_report.hpp"
#include "lib/rdma/datagram_port.hpp"
#include "lib/tool/cli_checks.hpp"
#include "lib/topology/topology.hpp"

namespace rdmakit {

using namespace pingmesh;

void PingmeshOptions::add_to(ToolRunner& tool) {
  auto& app = tool.app();
  app.add_option("--pinglist", pinglist, "The peers: a file of \"ADDRESS [NAME]\" lines, reread when it changes")
      ->required();
  app.add_option("--topology", topology,
                 "Slurm's topology.conf (or \"host switch\" lines): every peer under this node's leaf, a "
                 "rotating sample under the others");
  app.add_option("--name", node_name, "This node's name in the pinglist and topology (default: the host name)");
  app.add_option("--bind", bind, "The address to probe from and answer on (default: this node's pinglist address)");
  app.add_option("-p,--port", port, "rdma_cm UDP port, the same on every node")
      ->capture_default_str()
      ->check(CLI::Range(1, 65535));
  app.add_option("--rate", rate_per_s, "Probes per second to each peer under this node's leaf (or each peer)")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 1000.0));
  app.add_option("--rate-across", rate_across_per_s, "Probes per second to each sampled peer under another leaf")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 1000.0));
  app.add_option("--sample-per-leaf", sample_per_leaf, "Peers sampled under each other leaf every window (0: all)")
      ->capture_default_str();
  app.add_option("--rate-cap", rate_cap_per_s, "Probes per second to every peer together; rates scale down above it")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 100000.0));
  app.add_option("--window", window_s, "Seconds a window: each path's figures and state")
      ->capture_default_str()
      ->check(CLI::Range(0.5, 3600.0));
  app.add_option("--answer-timeout", answer_timeout_s, "Seconds after which an unanswered probe counts as lost")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 60.0));
  app.add_option("--loss-threshold", loss_percent, "A path is lossy above this loss in a window (percent)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100.0));
  app.add_option("--slow-factor", slow_factor, "A path is slow when its p99 exceeds this times its learned baseline")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1000.0));
  app.add_option("--p99-limit", p99_limit_ms, "A path is slow when its p99 exceeds this (ms) instead")
      ->check(CLI::Range(0.001, 60000.0));
  app.add_option("--duration", duration_s, "Seconds to run (default: until Ctrl-C or SIGTERM)")
      ->check(CLI::Range(0.0, 1e9));
  app.add_flag("--answer-any", answer_any, "Answer probes from peers outside the pinglist too (counted otherwise)");
  app.add_option("--metrics", metrics,
                 "Serve the metrics at http://ADDRESS:PORT/metrics, OpenMetrics to a scraper that asks for it "
                 "([ADDRESS:]PORT; address 127.0.0.1 unless given)");
  app.add_option("--metrics-allow", metrics_allow,
                 "Who may scrape --metrics: CIDR[,CIDR...] (default: the subnets of its address; 127.0.0.0/8 "
                 "for 127.0.0.1)")
      ->delimiter(',');
  app.add_flag("--host-stamps", host_stamps,
               "Where the device has no completion timestamps, stamp completions with the host's clock when "
               "polled (tests the exchange of device times on any device)");
  app.add_option("--prom-file", prom_file,
                 "Write the metrics here every window, atomically, in the Prometheus text format that "
                 "node_exporter's textfile collector reads");
}

void PingmeshOptions::check() const {
  if (!metrics.empty()) parse_listen_address(metrics);
  AllowList::parse(metrics_allow, "--metrics-allow");
  if (metrics.empty() && !metrics_allow.empty()) throw UsageError("--metrics-allow without --metrics");
  if (answer_timeout_s > window_s * 10) {
    throw UsageError(fmt::format("--answer-timeout {} s is more than ten windows of {} s", answer_timeout_s, window_s));
  }
  if (!prom_file.empty()) {
    const auto folder = std::filesystem::path(prom_file).parent_path();
    if (!folder.empty() && !std::filesystem::is_directory(folder)) {
      throw UsageError(fmt::format("--prom-file {}: no folder {}", prom_file, folder.string()));
    }
  }
}

namespace {

// The clock round trips are taken on, as the report names it.
std::string clock_name(StampSource source) {
  switch (source) {
    case StampSource::device: return "device";
    case StampSource::host: return "host-completions";
    case StampSource::none: return "software";
  }
  return "software";
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The file's modification time, to see a pinglist change; nullopt when it cannot be read.
std::optional<std::filesystem::file_time_type> modified(const std::string& path) {
  std::error_code error;
  const auto time = std::filesystem::last_write_time(path, error);
  if (error) return std::nullopt;
  return time;
}

// The report's section: the node and every path's totals and last state.
class PingmeshSummary final : public ReportSection {
 public:
  PingmeshSummary(const NodeSnapshot& node, std::uint64_t windows, std::map<std::string, nlohmann::json> diagnoses,
                  std::uint64_t scrapes, std::uint64_t scrapes_refused)
      : node_(node),
        windows_(windows),
        diagnoses_(std::move(diagnoses)),
        scrapes_(scrapes),
        scrapes_refused_(scrapes_refused) {}

  void add_to(nlohmann::json& document) const override {
    auto paths = nlohmann::json::array();
    for (const auto& path : node_.paths) {
      paths.push_back(path_totals(path));
      if (const auto found = diagnoses_.find(path.peer.address); found != diagnoses_.end()) {
        paths.back()["diagnosis"] = found->second;
      }
    }
    document["pingmesh"] = {{"node", node_.node},
                            {"address", node_.address},
                            {"clock", node_.clock},
                            {"window_s", node_.window_s},
                            {"windows", windows_},
                            {"node_at_fault", node_.node_at_fault},
                            {"ignored", node_.ignored},
                            {"cpu_seconds", node_.cpu_seconds},
                            {"scrapes", scrapes_},
                            {"scrapes_refused", scrapes_refused_},
                            {"paths", paths}};
  }

  std::string text() const override {
    std::string out = fmt::format("{} ({}), {} windows of {} s, {} clock, {:.2f} s of CPU\n", node_.node, node_.address,
                                  windows_, node_.window_s, node_.clock, node_.cpu_seconds);
    out += fmt::format("{:<20} {:<16} {:>9} {:>9} {:>7}  {}\n", "peer", "address", "sent", "answered", "lost", "state");
    for (const auto& path : node_.paths) {
      out += fmt::format("{:<20} {:<16} {:>9} {:>9} {:>7}  {}\n", path.peer.name, path.peer.address, path.sent_total,
                         path.answered_total, path.lost_total, to_string(path.verdict.state));
    }
    for (const auto& [why, count] : node_.ignored) out += fmt::format("ignored ({}): {}\n", why, count);
    return out;
  }

 private:
  NodeSnapshot node_;
  std::uint64_t windows_;
  std::map<std::string, nlohmann::json> diagnoses_;  // by peer address: the last one
  std::uint64_t scrapes_;                            // GET /metrics answered
  std::uint64_t scrapes_refused_;                    // from outside --metrics-allow
};

// lib/rdma's datagram port as the node sends and resolves through it.
class DatagramProbePort {
 public:
  using Address = DatagramAddress;
  using Route = ReplyRoute;
  using Arrival = DatagramArrival;
  using Resolution = rdmakit::Resolution;

  explicit DatagramProbePort(DatagramPort& port) : port_(port) {}
  std::optional<CompletionClock> completion_clock() const { return port_.completion_clock(); }
  void resolve(const std::string& key, const std::string& address) { port_.resolve(key, address); }
  bool resolving(const std::string& key) const { return port_.resolving(key); }
  bool send(std::span<const std::uint8_t> bytes, const Address& to, std::uint64_t tag) {
    return port_.send(bytes, to, tag);
  }
  Address reply_to(const Route& route) { return port_.reply_to(route); }
  std::uint64_t failed() const { return port_.failed(); }

 private:
  DatagramPort& port_;
};

// The daemon: the node over the datagram port, woken by the port, the windows, the
// pinglist's changes and SIGHUP; its lines, diagnoses and metrics.
class Pingmesh {
 public:
  Pingmesh(const PingmeshOptions& options, const CommonOptions& common, std::string program,
           const PathDiagnoser& diagnose, int stop_fd, const ReloadSignal& reload)
      : options_(options),
        common_(common),
        program_(std::move(program)),
        diagnose_(diagnose),
        stop_fd_(stop_fd),
        reload_(reload) {
    if (!options_.topology.empty()) topology_ = mesh::read_topology(options_.topology);
    auto peers = read_pinglist(options_.pinglist);
    pinglist_time_ = modified(options_.pinglist);
    const auto name = options_.node_name.empty() ? host_name() : options_.node_name;
    const auto address = options_.bind.empty() ? own_pinglist_address(peers, name) : options_.bind;
    // Before the QP: a port taken ends the run with a usage error before any probing.
    if (!options_.metrics.empty()) {
      const auto where = parse_listen_address(options_.metrics);
      endpoint_ = std::make_unique<MetricsEndpoint>(
          where, options_.metrics_allow.empty() ? local_subnets(where.host, interface_addresses())
                                                : AllowList::parse(options_.metrics_allow, "--metrics-allow"));
    }
    publisher_ = std::make_unique<Publisher>(options_.prom_file, endpoint_.get());
    port_ = std::make_unique<DatagramPort>(DatagramPortOptions{
        .bind_address = address,
        .port = options_.port,
        .receive_slots = 512,
        .send_slots = 256,
        .message_bytes = probe_size,
        .resolve_timeout = std::chrono::milliseconds(static_cast<long long>(std::max(1.0, options_.window_s) * 1000)),
        .stop_fd = stop_fd_,
        .wake_fd = reload_.fd(),
        .host_stamps = options_.host_stamps});
    probe_port_ = std::make_unique<DatagramProbePort>(*port_);
    node_ = std::make_unique<Node<DatagramProbePort>>(node_settings(name), *probe_port_, monotonic_ns, node_events());
    node_->take_peers(std::move(peers));
    plan();
  }
  // A run that ends by an exception does not wait for a diagnosis either.
  ~Pingmesh() { give_up_diagnosis(); }
  Pingmesh(const Pingmesh&) = delete;
  Pingmesh& operator=(const Pingmesh&) = delete;
  Pingmesh(Pingmesh&&) = delete;
  Pingmesh& operator=(Pingmesh&&) = delete;

  void run(Report& report) {
    const auto window_ns = static_cast<std::uint64_t>(options_.window_s * 1e9);
    const auto started_ns = monotonic_ns();
    const auto end_ns = options_.duration_s > 0 ? started_ns + static_cast<std::uint64_t>(options_.duration_s * 1e9)
                                                : std::numeric_limits<std::uint64_t>::max();
    auto next_window_ns = started_ns + window_ns;
    spdlog::info("{}: probing {} peers from {} port {}, answering {}; round trips on the {} clock", node_->node().node,
                 node_->path_count(), node_->node().address, options_.port,
                 options_.answer_any ? "anyone" : "the pinglist's peers", node_->node().clock);
    bool stopped = false;
    for (;;) {
      auto now_ns = monotonic_ns();
      if (now_ns >= end_ns) break;
      std::uint64_t refused = 0;
      auto resolutions =
          port_->take_cm_events([this](const std::string& source) { return node_->admission(source); }, refused);
      node_->take_resolutions(resolutions, refused, now_ns);
      port_->drain([&](const DatagramArrival& arrival) { node_->on_arrival(arrival); },
                   [&](std::uint64_t tag, std::optional<std::uint64_t> stamp) { node_->on_sent(tag, stamp); });
      if (reload_.take() && reload_pinglist("reread on SIGHUP")) plan();
      now_ns = monotonic_ns();
      node_->resolve_due(now_ns);
      node_->send_due(now_ns);
      if (now_ns >= next_window_ns) {
        close_window(now_ns);
        next_window_ns = std::max(next_window_ns + window_ns, now_ns + window_ns / 2);
      }
      auto wake_ns = std::min({node_->next_due_ns(), next_window_ns, end_ns});
      if (port_->resolving_any()) wake_ns = std::min(wake_ns, now_ns + resolve_poll_ns);
      const auto until = Clock::now() + std::chrono::nanoseconds(wake_ns > now_ns ? wake_ns - now_ns : 0);
      if (port_->sleep(until) == Woken::stopped) {
        stopped = true;
        break;
      }
    }
    give_up_diagnosis();
    take_diagnosis();
    finish(report);
    // As every rdmakit tool that runs until stopped: interrupted, exit 130 or 143 (the unit
    // counts those as a clean stop), with the report of what ran.
    if (stopped) report.stop(StopReason::interrupted, fmt::format("stopped after {} windows", node_->windows()));
    // A textfile that could not be written at the end is what node_exporter still reads.
    if (const auto& failure = publisher_->prom_file_failure()) {
      report.fail_afterwards(ErrorRecord{.message = *failure, .call = {}, .errnum = 0, .hint = {}, .completion = {}});
    }
  }

 private:
  // While a peer's SIDR exchange is under way its deadline is looked at this often.
  static constexpr std::uint64_t resolve_poll_ns = 200'000'000;
  static constexpr auto diagnosis_interval = std::chrono::minutes(10);

  NodeSettings node_settings(const std::string& name) const {
    std::random_device seed;
    NodeSettings settings{.node = name,
                          .address = port_->local_address(),
                          .clock = clock_name(port_->stamp_source()),
                          .window_s = options_.window_s,
                          .answer_timeout_s = options_.answer_timeout_s,
                          .answer_any = options_.answer_any,
                          .rates = {.in_leaf_per_s = options_.rate_per_s,
                                    .across_per_s = options_.rate_across_per_s,
                                    .sample_per_leaf = options_.sample_per_leaf,
                                    .cap_per_s = options_.rate_cap_per_s},
                          .thresholds = {},
                          .session = (std::uint64_t{seed()} << 32) | seed(),
                          .seed = (std::uint64_t{seed()} << 32) | seed()};
    settings.thresholds.lossy_ratio = options_.loss_percent / 100;
    settings.thresholds.slow_factor = options_.slow_factor;
    if (options_.p99_limit_ms > 0) settings.thresholds.p99_limit_s = options_.p99_limit_ms / 1000;
    return settings;
  }

  NodeEvents node_events() {
    return {.state_changed = [this](const PathSnapshot* path, PathState from, PathState to, const std::string& why,
                                    double time) { state_change(path, from, to, why, time); },
            .window_closed =
                [this](const PathSnapshot& path, double time) {
                  if (common_.json) print_line(window_line(node_->node(), path, time));
                },
            .went_bad = [this](const Peer& peer) { diagnose(peer); }};
  }

  std::string own_pinglist_address(const std::vector<Peer>& peers, const std::string& name) const {
    for (const auto& peer : peers) {
      if (peer.name == name) return peer.address;
    }
    throw UsageError(
        fmt::format("{} does not name this node ({}): give --bind ADDRESS, or --name as the pinglist has it",
                    options_.pinglist, name));
  }

  // This round's targets; paths that stay keep their probes and states.
  void plan() {
    const auto scale = node_->plan(topology_);
    if (scale < 1 && !cap_said_) {
      spdlog::warn("--rate-cap {}/s scales every rate by {:.3f}", options_.rate_cap_per_s, scale);
      cap_said_ = true;
    }
  }

  void close_window(std::uint64_t now_ns) {
    node_->close_window(now_ns, unix_seconds());
    take_diagnosis();
    node_->set_cpu_seconds(cpu_.used().user_s + cpu_.used().system_s);
    publisher_->publish(node_->snapshot());
    // With a topology the sample under the other leaves rotates every window.
    bool replan = !topology_.empty();
    if (const auto time_now = modified(options_.pinglist); time_now && time_now != pinglist_time_) {
      replan = reload_pinglist("changed") || replan;
    }
    if (replan) plan();
  }

  // True when the changed pinglist was taken.
  bool reload_pinglist(std::string_view why) {
    try {
      auto peers = read_pinglist(options_.pinglist);
      pinglist_time_ = modified(options_.pinglist);
      spdlog::warn("{} {}: {} peers", options_.pinglist, why, peers.size());
      node_->take_peers(std::move(peers));
      return true;
    } catch (const UsageError& error) {
      // A half-written or broken file keeps the last good list; said once per change.
      pinglist_time_ = modified(options_.pinglist);
      spdlog::error("{}; keeping the last good pinglist", error.what());
      return false;
    }
  }

  void state_change(const PathSnapshot* path, PathState from, PathState to, const std::string& why, double time) {
    const auto& node = node_->node();
    const auto who = path != nullptr ? fmt::format("{} ({})", path->peer.name, path->peer.address) : "node";
    std::cerr << fmt::format("{}: {} -> {}: {} -> {}: {}\n", program_, node.node, who, to_string(from), to_string(to),
                             why)
              << std::flush;
    if (common_.json) print_line(state_line(node, path, from, to, why, time));
  }

  // diag-connect's probe of the path to `peer`, on a thread of its own so that probing and
  // answering go on: one at a time, and at most once in diagnosis_interval a peer.
  void diagnose(const Peer& peer) {
    if (!diagnose_ || diagnosis_.valid()) return;
    const auto now = Clock::now();
    const auto last = diagnosed_at_.find(peer.address);
    if (last != diagnosed_at_.end() && now - last->second < diagnosis_interval) return;
    diagnosed_at_[peer.address] = now;
    diagnosis_peer_ = peer;
    spdlog::info("diagnosing the path to {} ({})", peer.name, peer.address);
    diagnosis_ = std::async(std::launch::async, [diagnose = diagnose_, address = peer.address,
                                                 timeout = common_.timeout(), cancel_fd = diagnosis_cancel_.get()] {
      std::string text;
      try {
        auto json = diagnose(address, timeout, cancel_fd, text);
        return std::make_pair(std::move(json), std::move(text));
      } catch (const std::exception& error) {
        return std::make_pair(nlohmann::json{{"error", error.what()}}, std::string(error.what()));
      }
    });
  }

  // A diagnosis under way is given up, not waited for: its probe and the agent's answer take
  // up to --timeout each, and the run ends now (SIGTERM within 2 s, --duration).
  void give_up_diagnosis() {
    if (!diagnosis_.valid() || diagnosis_.wait_for(std::chrono::seconds(0)) == std::future_status::ready) return;
    const std::uint64_t one = 1;
    if (write(diagnosis_cancel_.get(), &one, sizeof(one)) < 0) spdlog::debug("diagnosis: eventfd write failed");
    diagnosis_.wait();
    diagnosis_ = {};
    spdlog::info("the diagnosis of {} was given up: the run ended", diagnosis_peer_.address);
  }

  // A finished diagnosis: its verdict logged, a JSON line, and kept for the report.
  void take_diagnosis() {
    if (!diagnosis_.valid() || diagnosis_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
    auto [json, text] = diagnosis_.get();
    const auto& node = node_->node();
    std::cerr << fmt::format("{}: {}: diag-connect {}: {}", program_, node.node, diagnosis_peer_.address, text)
              << (text.ends_with('\n') ? "" : "\n") << std::flush;
    if (common_.json) {
      print_line({{"event", "diagnosis"},
                  {"time", unix_seconds()},
                  {"node", node.node},
                  {"peer", diagnosis_peer_.name},
                  {"address", diagnosis_peer_.address},
                  {"diagnosis", json}});
    }
    diagnoses_[diagnosis_peer_.address] = std::move(json);
  }

  static void print_line(const nlohmann::json& line) { std::cout << json_line(line) << '\n' << std::flush; }

  void finish(Report& report) {
    node_->set_cpu_seconds(cpu_.used().user_s + cpu_.used().system_s);
    auto node = node_->snapshot();
    std::uint64_t answered = 0;
    for (const auto& path : node.paths) answered += path.answered_total;
    report.iterations_completed = answered;
    report.add(PingmeshSummary(node, node_->windows(), diagnoses_, endpoint_ ? endpoint_->scrapes() : 0,
                               endpoint_ ? endpoint_->refused() : 0));
  }

  const PingmeshOptions& options_;
  const CommonOptions& common_;
  std::string program_;  // as installed (rdmakit-rdma_pingmesh): what the log lines say
  PathDiagnoser diagnose_;
  int stop_fd_;
  const ReloadSignal& reload_;
  // Written when the run ends: the diagnosis under way ends its child then. Before the
  // future, so that it outlives a diagnosis still running when the daemon goes.
  FileDescriptor diagnosis_cancel_{eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
  std::future<std::pair<nlohmann::json, std::string>> diagnosis_;
  Peer diagnosis_peer_;
  std::map<std::string, Clock::time_point> diagnosed_at_;
  std::map<std::string, nlohmann::json> diagnoses_;
  mesh::Topology topology_;
  std::optional<std::filesystem::file_time_type> pinglist_time_;
  // Declaration order is teardown order reversed: the node before the port it sends on.
  std::unique_ptr<MetricsEndpoint> endpoint_;
  std::unique_ptr<Publisher> publisher_;
  std::unique_ptr<DatagramPort> port_;
  std::unique_ptr<DatagramProbePort> probe_port_;
  std::unique_ptr<Node<DatagramProbePort>> node_;
  bool cap_said_ = false;
  CpuClock cpu_;
};

}  // namespace

void run_pingmesh(const PingmeshOptions& options, const CommonOptions& common, const std::string& program,
                  const PathDiagnoser& diagnose, Report& report) {
  // Both before any thread starts (the metrics server's, the diagnosis'), which inherit the
  // blocked signals.
  const StopSignal stop(StopSignal::Hangup::reloads);
  const ReloadSignal reload;
  Pingmesh pingmesh(options, common, program, diagnose, stop.fd(), reload);
  pingmesh.run(report);
}

}  // namespace rdmakit
