#include "lib/pingmesh/pingmesh_session.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <utility>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "lib/base/cpu_use.hpp"
#include "lib/base/error.hpp"
#include "lib/base/host_name.hpp"
#include "lib/base/text_file.hpp"
#include "lib/base/wait.hpp"
#include "lib/net/metrics_endpoint.hpp"
#include "lib/pingmesh/pinglist.hpp"
#include "lib/pingmesh/pingmesh_path.hpp"
#include "lib/pingmesh/pingmesh_probe.hpp"
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

// One path: to whom, how its probes fare, what its windows said, where to send.
struct Path {
  Path(Target target_in, std::uint64_t session, std::uint64_t answer_timeout_ns, const Thresholds& thresholds,
       std::optional<CompletionClock> clock)
      : target(std::move(target_in)), probes(session, answer_timeout_ns, clock), judge(thresholds) {}

  Target target;
  PathProbes probes;
  PathJudge judge;
  std::optional<DatagramAddress> to;
  std::string resolve_error;
  std::uint64_t next_probe_ns = 0;
  std::uint64_t next_resolve_ns = 0;
  PathSnapshot snapshot;
};

// A send whose completion this node needs, by its tag: a probe (its send completion's stamp
// starts the round trip on the device clock), or an answer (its stamp ends the responder's
// delay, which stamps then carry to the prober).
struct ProbeSent {
  std::string peer_address;
  std::uint64_t sequence = 0;
};
struct AnswerSent {
  ReplyRoute route;
  ProbeMessage probe;
  std::uint64_t probe_received_stamp = 0;
};
// At most this many sends tracked: a QP made again drops its sends uncompleted.
constexpr std::size_t max_tracked_sends = 1024;

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

class Pingmesh {
 public:
  Pingmesh(const PingmeshOptions& options, const CommonOptions& common, std::string program,
           const PathDiagnoser& diagnose, int stop_fd, const ReloadSignal& reload)
      : options_(options),
        common_(common),
        program_(std::move(program)),
        diagnose_(diagnose),
        stop_fd_(stop_fd),
        reload_(reload),
        random_(std::random_device{}()) {
    std::random_device seed;
    session_ = (std::uint64_t{seed()} << 32) | seed();
    thresholds_.lossy_ratio = options_.loss_percent / 100;
    thresholds_.slow_factor = options_.slow_factor;
    if (options_.p99_limit_ms > 0) thresholds_.p99_limit_s = options_.p99_limit_ms / 1000;
    node_.node = options_.node_name.empty() ? host_name() : options_.node_name;
    node_.window_s = options_.window_s;
    if (!options_.topology.empty()) topology_ = mesh::read_topology(options_.topology);
    load_pinglist();
    node_.address = options_.bind.empty() ? own_pinglist_address() : options_.bind;
    // Before the QP: a port taken ends the run with a usage error before any probing.
    if (!options_.metrics.empty()) {
      const auto where = parse_listen_address(options_.metrics);
      endpoint_ = std::make_unique<MetricsEndpoint>(
          where, options_.metrics_allow.empty() ? local_subnets(where.host, interface_addresses())
                                                : AllowList::parse(options_.metrics_allow, "--metrics-allow"));
    }
    port_ = std::make_unique<DatagramPort>(DatagramPortOptions{
        .bind_address = node_.address,
        .port = options_.port,
        .receive_slots = 512,
        .send_slots = 256,
        .message_bytes = probe_size,
        .resolve_timeout = std::chrono::milliseconds(static_cast<long long>(std::max(1.0, options_.window_s) * 1000)),
        .stop_fd = stop_fd_,
        .wake_fd = reload_.fd(),
        .host_stamps = options_.host_stamps});
    node_.address = port_->local_address();
    node_.clock = clock_name(port_->stamp_source());
    plan();
  }

  void run(Report& report) {
    const auto window_ns = static_cast<std::uint64_t>(options_.window_s * 1e9);
    const auto started_ns = monotonic_ns();
    const auto end_ns = options_.duration_s > 0 ? started_ns + static_cast<std::uint64_t>(options_.duration_s * 1e9)
                                                : std::numeric_limits<std::uint64_t>::max();
    next_window_ns_ = started_ns + window_ns;
    spdlog::info("{}: probing {} peers from {} port {}, answering {}; round trips on the {} clock", node_.node,
                 paths_.size(), node_.address, options_.port, options_.answer_any ? "anyone" : "the pinglist's peers",
                 node_.clock);
    bool stopped = false;
    for (;;) {
      auto now_ns = monotonic_ns();
      if (now_ns >= end_ns) break;
      take_cm_events(now_ns);
      port_->drain([&](const DatagramArrival& arrival) { on_arrival(arrival); },
                   [&](std::uint64_t tag, std::optional<std::uint64_t> stamp) { on_sent(tag, stamp); });
      if (reload_.take() && reload_pinglist("reread on SIGHUP")) plan();
      now_ns = monotonic_ns();
      resolve_due(now_ns);
      send_due(now_ns);
      if (now_ns >= next_window_ns_) {
        close_window(now_ns);
        next_window_ns_ = std::max(next_window_ns_ + window_ns, now_ns + window_ns / 2);
      }
      auto wake_ns = std::min({next_due_ns(), next_window_ns_, end_ns});
      if (port_->resolving_any()) wake_ns = std::min(wake_ns, now_ns + resolve_poll_ns);
      const auto until = Clock::now() + std::chrono::nanoseconds(wake_ns > now_ns ? wake_ns - now_ns : 0);
      if (port_->sleep(until) == Woken::stopped) {
        stopped = true;
        break;
      }
    }
    if (diagnosis_.valid()) diagnosis_.wait();
    take_diagnosis();
    finish(report);
    // As every rdmakit tool that runs until stopped: interrupted, exit 130 or 143 (the unit
    // counts those as a clean stop), with the report of what ran.
    if (stopped) report.stop(StopReason::interrupted, fmt::format("stopped after {} windows", windows_));
    // A textfile that could not be written at the end is what node_exporter still reads.
    if (prom_file_failure_) {
      report.fail_afterwards(
          ErrorRecord{.message = *prom_file_failure_, .call = {}, .errnum = 0, .hint = {}, .completion = {}});
    }
  }

 private:
  // While a peer's SIDR exchange is under way its deadline is looked at this often.
  static constexpr std::uint64_t resolve_poll_ns = 200'000'000;
  static constexpr auto diagnosis_interval = std::chrono::minutes(10);

  void load_pinglist() {
    peers_ = read_pinglist(options_.pinglist);
    pinglist_time_ = modified(options_.pinglist);
    known_.clear();
    for (const auto& peer : peers_) known_.insert(peer.address);
  }

  std::string own_pinglist_address() const {
    for (const auto& peer : peers_) {
      if (peer.name == node_.node) return peer.address;
    }
    throw UsageError(
        fmt::format("{} does not name this node ({}): give --bind ADDRESS, or --name as the pinglist has it",
                    options_.pinglist, node_.node));
  }

  // This round's targets; paths that stay keep their probes and states.
  void plan() {
    const Rates rates{.in_leaf_per_s = options_.rate_per_s,
                      .across_per_s = options_.rate_across_per_s,
                      .sample_per_leaf = options_.sample_per_leaf,
                      .cap_per_s = options_.rate_cap_per_s};
    const auto planned = plan_targets(peers_, topology_, node_.node, node_.address, rates, round_);
    if (planned.scale < 1 && !cap_said_) {
      spdlog::warn("--rate-cap {}/s scales every rate by {:.3f}", options_.rate_cap_per_s, planned.scale);
      cap_said_ = true;
    }
    std::map<std::string, std::unique_ptr<Path>> next;
    const auto answer_timeout_ns = static_cast<std::uint64_t>(options_.answer_timeout_s * 1e9);
    for (const auto& target : planned.targets) {
      auto found = paths_.find(target.peer.address);
      if (found != paths_.end()) {
        found->second->target = target;
        next.emplace(target.peer.address, std::move(found->second));
      } else {
        auto path = std::make_unique<Path>(target, session_, answer_timeout_ns, thresholds_, port_->completion_clock());
        path->snapshot.peer = target.peer;
        path->snapshot.same_leaf = target.same_leaf;
        path->next_probe_ns = monotonic_ns() + jittered_interval_ns(target.rate_per_s);
        next.emplace(target.peer.address, std::move(path));
      }
    }
    paths_ = std::move(next);
  }

  // 1/rate, give or take 10%, so that nodes started together do not probe in step.
  std::uint64_t jittered_interval_ns(double rate_per_s) {
    std::uniform_real_distribution<double> jitter(0.9, 1.1);
    return static_cast<std::uint64_t>(1e9 / rate_per_s * jitter(random_));
  }

  std::optional<std::string> admission(const std::string& source) const {
    if (options_.answer_any || known_.contains(source)) return std::nullopt;
    return fmt::format("{} is not in {}'s pinglist", source, node_.node);
  }

  void take_cm_events(std::uint64_t now_ns) {
    std::uint64_t refused = 0;
    for (auto& resolution :
         port_->take_cm_events([this](const std::string& source) { return admission(source); }, refused)) {
      auto found = paths_.find(resolution.key);
      if (found == paths_.end()) continue;
      auto& path = *found->second;
      if (resolution.address) {
        path.to = resolution.address;
        if (!path.resolve_error.empty()) spdlog::info("{}: resolved again", path.target.peer.name);
        path.resolve_error.clear();
      } else {
        if (path.resolve_error != resolution.error) spdlog::info("{}: {}", path.target.peer.name, resolution.error);
        path.resolve_error = resolution.error;
        path.next_resolve_ns = now_ns + static_cast<std::uint64_t>(options_.window_s * 1e9);
      }
    }
    if (refused > 0) node_.ignored["unknown_peer_request"] += refused;
  }

  void resolve_due(std::uint64_t now_ns) {
    for (auto& [address, path] : paths_) {
      if (path->to && path->judge.state() != PathState::down) continue;
      if (now_ns < path->next_resolve_ns || port_->resolving(address)) continue;
      // A down path is looked up again once a window: its peer may have restarted with a
      // new QP, which only a new SIDR exchange tells.
      path->next_resolve_ns = now_ns + static_cast<std::uint64_t>(options_.window_s * 1e9);
      try {
        port_->resolve(address, address);
      } catch (const RdmaError& error) {
        path->resolve_error = error.what();
      }
    }
  }

  void send_due(std::uint64_t now_ns) {
    for (auto& [address, path] : paths_) {
      if (!path->to || now_ns < path->next_probe_ns) continue;
      const auto interval = jittered_interval_ns(path->target.rate_per_s);
      // A loop that fell behind (a stopped process, a busy host) starts again from now
      // rather than sending the missed probes in a burst.
      path->next_probe_ns = std::max(path->next_probe_ns + interval, now_ns + interval / 2);
      const auto sent_ns = monotonic_ns();
      const auto ticket = path->probes.next_probe(sent_ns);
      const bool stamped = port_->completion_clock().has_value();
      const auto bytes = encode(ProbeMessage{.kind = ProbeKind::probe,
                                             .wants_stamps = stamped,
                                             .session = ticket.session,
                                             .sequence = ticket.sequence,
                                             .prober_sent_ns = ticket.sent_ns,
                                             .responder_received_ns = 0,
                                             .responder_sent_ns = 0});
      const auto tag = stamped ? track_send(ProbeSent{.peer_address = address, .sequence = ticket.sequence}) : 0;
      if (!port_->send(bytes, *path->to, tag)) {
        ++node_.ignored["send_queue_full"];
        tracked_sends_.erase(tag);
      }
    }
  }

  // A tag for a send whose completion this node needs (its stamp), kept till it completes.
  std::uint64_t track_send(std::variant<ProbeSent, AnswerSent> what) {
    if (tracked_sends_.size() >= max_tracked_sends) tracked_sends_.erase(tracked_sends_.begin());
    const auto tag = next_tag_++;
    tracked_sends_.emplace(tag, std::move(what));
    return tag;
  }

  // A tagged send completed, stamped `stamp` (none: it failed).
  void on_sent(std::uint64_t tag, std::optional<std::uint64_t> stamp) {
    const auto found = tracked_sends_.find(tag);
    if (found == tracked_sends_.end()) return;
    const auto what = std::move(found->second);
    tracked_sends_.erase(found);
    if (!stamp) return;
    if (const auto* probe = std::get_if<ProbeSent>(&what)) {
      if (const auto path = paths_.find(probe->peer_address); path != paths_.end()) {
        path->second->probes.probe_left(probe->sequence, *stamp);
      }
      return;
    }
    const auto& answer = std::get<AnswerSent>(what);
    const auto delay_ns = port_->completion_clock()->ns_between(answer.probe_received_stamp, *stamp);
    if (delay_ns >= max_responder_delay_ns) return;
    try {
      if (!port_->send(encode(stamps_for(answer.probe, delay_ns)), port_->reply_to(answer.route))) {
        ++node_.ignored["send_queue_full"];
      }
    } catch (const RdmaError& error) {
      spdlog::debug("no stamps to {}: {}", answer.route.source, error.what());
      ++node_.ignored["no_way_back"];
    }
  }

  std::uint64_t next_due_ns() const {
    auto due = std::numeric_limits<std::uint64_t>::max();
    for (const auto& [address, path] : paths_) {
      if (path->to) due = std::min(due, path->next_probe_ns);
    }
    return due;
  }

  void on_arrival(const DatagramArrival& arrival) {
    const auto decoded = decode_probe(arrival.bytes);
    if (decoded.outcome != ProbeDecode::ok) {
      ++node_.ignored[std::string(to_string(decoded.outcome))];
      return;
    }
    const auto& message = decoded.message;
    if (arrival.source.empty()) {
      // No address in front of it (IB without a GRH) from a peer this node has not resolved:
      // nobody it could answer or match. A peer it probes is known by its LID and QP.
      ++node_.ignored["unknown_peer"];
      return;
    }
    if (message.kind == ProbeKind::probe) {
      if (admission(arrival.source)) {
        spdlog::debug("a probe from {} (QP {}), not in the pinglist", arrival.source, arrival.source_qp);
        ++node_.ignored["unknown_peer"];
        return;
      }
      std::optional<DatagramAddress> back;
      auto route = arrival.route();
      try {
        back = port_->reply_to(route);
      } catch (const RdmaError& error) {
        // No route to the sender this moment (this node's netdev coming back up): the
        // prober counts the probe lost, this node counts why.
        spdlog::debug("no answer to {}: {}", arrival.source, error.what());
        ++node_.ignored["no_way_back"];
        return;
      }
      const auto answer = encode(answer_to(message, arrival.received_ns, monotonic_ns()));
      const bool stamps = message.wants_stamps && arrival.completion_stamp;
      const auto tag =
          stamps ? track_send(AnswerSent{
                       .route = std::move(route), .probe = message, .probe_received_stamp = *arrival.completion_stamp})
                 : 0;
      if (!port_->send(answer, *back, tag)) {
        ++node_.ignored["send_queue_full"];
        tracked_sends_.erase(tag);
      }
      return;
    }
    auto found = paths_.find(arrival.source);
    if (found == paths_.end()) {
      spdlog::debug("an answer from {} (QP {}), no path of this node's", arrival.source, arrival.source_qp);
      ++node_.ignored["unknown_peer"];
      return;
    }
    const AnswerFields fields{.session = message.session,
                              .sequence = message.sequence,
                              .echoed_sent_ns = message.prober_sent_ns,
                              .responder_delay_ns = message.responder_delay_ns()};
    auto& probes = found->second->probes;
    if (message.kind == ProbeKind::answer) {
      probes.take_answer(fields, arrival.received_ns, arrival.completion_stamp);
    } else if (!port_->completion_clock() || !probes.take_stamps(fields)) {
      // Stamps this node did not ask for, or of no answer of this run's.
      ++node_.ignored["stamps_unmatched"];
    }
  }

  void close_window(std::uint64_t now_ns) {
    ++windows_;
    const auto time = unix_seconds();
    std::vector<PathState> states;
    for (auto& [address, path] : paths_) {
      close_path(*path, now_ns, time);
      // The node is judged on the paths that have worked: a peer that never answered (not
      // started yet, not listening) says nothing of this node.
      if (path->snapshot.answered_total > 0) states.push_back(path->snapshot.verdict.state);
    }
    const bool at_fault = node_at_fault(states);
    if (at_fault != node_.node_at_fault) {
      state_change(nullptr, at_fault ? PathState::ok : PathState::down, at_fault ? PathState::down : PathState::ok,
                   at_fault ? "every path of this node went bad in the same window: its NIC, link or netdev"
                            : "the node's paths are no longer all bad",
                   time);
    }
    node_.node_at_fault = at_fault;
    if (port_->failed() > 0) node_.ignored["send_failed"] = port_->failed();
    take_diagnosis();
    node_.cpu_seconds = cpu_.used().user_s + cpu_.used().system_s;
    publish_metrics();
    ++round_;
    // With a topology the sample under the other leaves rotates every window.
    bool replan = !topology_.empty();
    if (const auto time_now = modified(options_.pinglist); time_now && time_now != pinglist_time_) {
      replan = reload_pinglist("changed") || replan;
    }
    if (replan) plan();
  }

  // One path's window: its figures added to its totals, its verdict, a change said.
  void close_path(Path& path, std::uint64_t now_ns, double time) {
    auto& snapshot = path.snapshot;
    const auto figures = path.probes.close_window(now_ns);
    const auto before = path.judge.state();
    auto verdict = path.judge.judge(figures);
    if (!path.to && figures.sent == 0 && before == PathState::unknown && windows_ > 1) {
      // Never resolved: nothing was sent, so the path's window judges nothing. It is down.
      verdict = {.state = PathState::down, .why = path.resolve_error.empty() ? "not resolved yet" : path.resolve_error};
    }
    if (verdict.state == PathState::down) path.probes.outage_began();
    snapshot.sent_total += figures.sent;
    snapshot.answered_total += figures.answered;
    snapshot.lost_total += figures.lost;
    snapshot.late_total += figures.late;
    snapshot.unexpected_total += figures.unexpected;
    snapshot.device_samples_total += figures.device_samples;
    snapshot.stamps_missing_total += figures.stamps_missing;
    snapshot.last_window = figures;
    const auto previous = snapshot.verdict.state;
    snapshot.verdict = verdict;
    if (verdict.state != previous) {
      ++snapshot.state_changes_total;
      state_change(&snapshot, previous, verdict.state, verdict.why, time);
      if (is_bad(verdict.state)) diagnose(snapshot.peer);
    }
    if (common_.json) print_line(window_line(node_, snapshot, time));
  }

  // True when the changed pinglist was taken.
  bool reload_pinglist(std::string_view why) {
    try {
      load_pinglist();
      spdlog::warn("{} {}: {} peers", options_.pinglist, why, peers_.size());
      return true;
    } catch (const UsageError& error) {
      // A half-written or broken file keeps the last good list; said once per change.
      pinglist_time_ = modified(options_.pinglist);
      spdlog::error("{}; keeping the last good pinglist", error.what());
      return false;
    }
  }

  void state_change(const PathSnapshot* path, PathState from, PathState to, const std::string& why, double time) {
    const auto who = path != nullptr ? fmt::format("{} ({})", path->peer.name, path->peer.address) : "node";
    std::cerr << fmt::format("{}: {} -> {}: {} -> {}: {}\n", program_, node_.node, who, to_string(from), to_string(to),
                             why)
              << std::flush;
    if (common_.json) print_line(state_line(node_, path, from, to, why, time));
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
    diagnosis_ =
        std::async(std::launch::async, [diagnose = diagnose_, address = peer.address, timeout = common_.timeout()] {
          std::string text;
          try {
            auto json = diagnose(address, timeout, text);
            return std::make_pair(std::move(json), std::move(text));
          } catch (const std::exception& error) {
            return std::make_pair(nlohmann::json{{"error", error.what()}}, std::string(error.what()));
          }
        });
  }

  // A finished diagnosis: its verdict logged, a JSON line, and kept for the report.
  void take_diagnosis() {
    if (!diagnosis_.valid() || diagnosis_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
    auto [json, text] = diagnosis_.get();
    std::cerr << fmt::format("{}: {}: diag-connect {}: {}", program_, node_.node, diagnosis_peer_.address, text)
              << (text.ends_with('\n') ? "" : "\n") << std::flush;
    if (common_.json) {
      print_line({{"event", "diagnosis"},
                  {"time", unix_seconds()},
                  {"node", node_.node},
                  {"peer", diagnosis_peer_.name},
                  {"address", diagnosis_peer_.address},
                  {"diagnosis", json}});
    }
    diagnoses_[diagnosis_peer_.address] = std::move(json);
  }

  static void print_line(const nlohmann::json& line) { std::cout << json_line(line) << '\n' << std::flush; }

  NodeSnapshot snapshot() const {
    NodeSnapshot node = node_;
    node.paths.clear();
    for (const auto& [address, path] : paths_) node.paths.push_back(path->snapshot);
    return node;
  }

  void publish_metrics() const {
    if (options_.prom_file.empty() && !endpoint_) return;
    const auto families = metrics_families(snapshot());
    if (endpoint_) endpoint_->publish(families);
    // node_exporter's textfile collector reads the Prometheus text format, not OpenMetrics.
    if (!options_.prom_file.empty())
      write_prom_file(openmetrics::render(textfile_families(families), openmetrics::Format::prometheus_text));
  }

  void write_prom_file(const std::string& text) const {
    // node_exporter reads the file whenever it is scraped: a new file renamed over the old
    // one is never seen half written, and one that cannot be written leaves the old one.
    // Said when it starts failing and when it writes again, not once a window.
    auto failed = write_file_whole(options_.prom_file, text);
    if (failed && !prom_file_failure_) spdlog::error("{}; tried again every window", *failed);
    if (!failed && prom_file_failure_) spdlog::info("{} written again", options_.prom_file);
    prom_file_failure_ = std::move(failed);
  }

  void finish(Report& report) {
    node_.cpu_seconds = cpu_.used().user_s + cpu_.used().system_s;
    auto node = snapshot();
    std::uint64_t answered = 0;
    for (const auto& path : node.paths) answered += path.answered_total;
    report.iterations_completed = answered;
    report.add(PingmeshSummary(node, windows_, diagnoses_, endpoint_ ? endpoint_->scrapes() : 0,
                               endpoint_ ? endpoint_->refused() : 0));
  }

  const PingmeshOptions& options_;
  const CommonOptions& common_;
  std::string program_;  // as installed (rdmakit-rdma_pingmesh): what the log lines say
  mutable std::optional<std::string> prom_file_failure_;  // the last write's, while it fails
  PathDiagnoser diagnose_;
  int stop_fd_;
  const ReloadSignal& reload_;
  std::future<std::pair<nlohmann::json, std::string>> diagnosis_;
  Peer diagnosis_peer_;
  std::map<std::string, Clock::time_point> diagnosed_at_;
  std::map<std::string, nlohmann::json> diagnoses_;
  std::uint64_t session_ = 0;
  std::mt19937_64 random_;
  Thresholds thresholds_;
  mesh::Topology topology_;
  std::vector<Peer> peers_;
  std::set<std::string> known_;
  std::optional<std::filesystem::file_time_type> pinglist_time_;
  NodeSnapshot node_;
  std::unique_ptr<MetricsEndpoint> endpoint_;
  std::unique_ptr<DatagramPort> port_;
  std::map<std::string, std::unique_ptr<Path>> paths_;
  std::map<std::uint64_t, std::variant<ProbeSent, AnswerSent>> tracked_sends_;  // by tag
  std::uint64_t next_tag_ = 1;                                                  // 0 tags nothing
  std::uint64_t next_window_ns_ = 0;
  std::uint64_t windows_ = 0;
  std::uint64_t round_ = 0;
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
