#pragma once
// One rdma_pingmesh node over the datagram port it is handed: the schedule (each path's next
// probe and lookup), the responder (a probe answered, an answer or its stamps matched to its
// path) and each window's close (every path judged, the node's own fault). No RDMA and no
// clock of its own: the session hands it lib/rdma's datagram port and CLOCK_MONOTONIC, the
// unit tests a fake port and a clock they set (tests/unit/pingmesh_node_test.cpp).
//
// Port is what the node sends and resolves through:
//   Port::Address     where a datagram goes (copyable)
//   Port::Route       the way back to a datagram's sender, kept past its arrival; .source
//   Port::Arrival     a datagram that arrived: .bytes, .source, .source_qp, .received_ns,
//                     .completion_stamp, .route()
//   Port::Resolution  a lookup's end: .key, .address (an optional Address), .error
//   completion_clock(), resolve(key, address), resolving(key), send(bytes, to, tag) -> bool,
//   reply_to(route) -> Address, failed(); resolve and reply_to throw RdmaError.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lib/base/error.hpp"
#include "lib/pingmesh/pinglist.hpp"
#include "lib/pingmesh/pingmesh_path.hpp"
#include "lib/pingmesh/pingmesh_probe.hpp"
#include "lib/pingmesh/pingmesh_report.hpp"
#include "lib/rdma/completion_clock.hpp"
#include "lib/topology/topology.hpp"

namespace rdmakit::pingmesh {

struct NodeSettings {
  std::string node;     // this node's name
  std::string address;  // the address it probes from
  std::string clock;    // whose clock stamps its completions, as the report names it
  double window_s = 10;
  double answer_timeout_s = 1;  // an answer later than this counts the probe lost
  bool answer_any = false;      // answer peers outside the pinglist too
  Rates rates;
  Thresholds thresholds;
  std::uint64_t session = 0;  // this run's number, in every probe
  std::uint64_t seed = 0;     // the jitter's
};

// What a closing window tells the session (its log lines, JSON lines and diagnoses).
struct NodeEvents {
  // A path's state changed (no path: the node's own fault came or went), at `time` (Unix s).
  std::function<void(const PathSnapshot* path, PathState from, PathState to, const std::string& why, double time)>
      state_changed;
  // A path's window closed.
  std::function<void(const PathSnapshot& path, double time)> window_closed;
  // A path went bad: diag-connect may look at it.
  std::function<void(const Peer& peer)> went_bad;
};

// At most this many sends tracked: a QP made again drops its sends uncompleted.
inline constexpr std::size_t max_tracked_sends = 1024;

template <class Port>
class Node {
 public:
  using MonotonicClock = std::function<std::uint64_t()>;

  Node(NodeSettings settings, Port& port, MonotonicClock clock, NodeEvents events)
      : settings_(std::move(settings)),
        port_(port),
        clock_(std::move(clock)),
        events_(std::move(events)),
        random_(settings_.seed) {
    node_.node = settings_.node;
    node_.address = settings_.address;
    node_.clock = settings_.clock;
    node_.window_s = settings_.window_s;
  }

  // The pinglist's peers: whom this node answers (unless it answers anyone), and whom plan()
  // chooses its targets among.
  void take_peers(std::vector<Peer> peers) {
    peers_ = std::move(peers);
    known_.clear();
    for (const auto& peer : peers_) known_.insert(peer.address);
  }
  const std::vector<Peer>& peers() const { return peers_; }

  // This round's targets (with a topology the sample under the other leaves rotates every
  // window); paths that stay keep their probes and states. Returns the scale the cap put on
  // every rate (1: none).
  double plan(const mesh::Topology& topology) {
    const auto planned = plan_targets(peers_, topology, node_.node, node_.address, settings_.rates, round_);
    std::map<std::string, std::unique_ptr<Path>> next;
    const auto answer_timeout_ns = static_cast<std::uint64_t>(settings_.answer_timeout_s * 1e9);
    for (const auto& target : planned.targets) {
      auto found = paths_.find(target.peer.address);
      if (found != paths_.end()) {
        found->second->target = target;
        next.emplace(target.peer.address, std::move(found->second));
      } else {
        auto path = std::make_unique<Path>(target, settings_.session, answer_timeout_ns, settings_.thresholds,
                                           port_.completion_clock());
        path->snapshot.peer = target.peer;
        path->snapshot.same_leaf = target.same_leaf;
        path->next_probe_ns = clock_() + jittered_interval_ns(target.rate_per_s);
        next.emplace(target.peer.address, std::move(path));
      }
    }
    paths_ = std::move(next);
    return planned.scale;
  }
  std::size_t path_count() const { return paths_.size(); }

  // Whether a SIDR request (or a probe) from `source` is answered: none, or why not.
  std::optional<std::string> admission(const std::string& source) const {
    if (settings_.answer_any || known_.contains(source)) return std::nullopt;
    return fmt::format("{} is not in {}'s pinglist", source, node_.node);
  }

  // The ends of this node's lookups, and how many peers' requests the port refused.
  void take_resolutions(const std::vector<typename Port::Resolution>& resolutions, std::uint64_t refused,
                        std::uint64_t now_ns) {
    for (const auto& resolution : resolutions) {
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
        path.next_resolve_ns = now_ns + window_ns();
      }
    }
    if (refused > 0) node_.ignored["unknown_peer_request"] += refused;
  }

  // Looks up each path not resolved yet, or down, whose time has come.
  void resolve_due(std::uint64_t now_ns) {
    for (auto& [address, path] : paths_) {
      if (path->to && path->judge.state() != PathState::down) continue;
      if (now_ns < path->next_resolve_ns || port_.resolving(address)) continue;
      // A down path is looked up again once a window: its peer may have restarted with a
      // new QP, which only a new SIDR exchange tells.
      path->next_resolve_ns = now_ns + window_ns();
      try {
        port_.resolve(address, address);
      } catch (const RdmaError& error) {
        path->resolve_error = error.what();
      }
    }
  }

  // Sends each resolved path's probe whose time has come.
  void send_due(std::uint64_t now_ns) {
    for (auto& [address, path] : paths_) {
      if (!path->to || now_ns < path->next_probe_ns) continue;
      const auto interval = jittered_interval_ns(path->target.rate_per_s);
      // A loop that fell behind (a stopped process, a busy host) starts again from now
      // rather than sending the missed probes in a burst.
      path->next_probe_ns = std::max(path->next_probe_ns + interval, now_ns + interval / 2);
      const auto ticket = path->probes.next_probe(clock_());
      const bool stamped = port_.completion_clock().has_value();
      const auto bytes = encode(ProbeMessage{.kind = ProbeKind::probe,
                                             .wants_stamps = stamped,
                                             .session = ticket.session,
                                             .sequence = ticket.sequence,
                                             .prober_sent_ns = ticket.sent_ns,
                                             .responder_received_ns = 0,
                                             .responder_sent_ns = 0});
      const auto tag = stamped ? track_send(ProbeSent{.peer_address = address, .sequence = ticket.sequence}) : 0;
      if (!port_.send(bytes, *path->to, tag)) {
        ++node_.ignored["send_queue_full"];
        tracked_sends_.erase(tag);
      }
    }
  }

  // When the next probe is due: the session sleeps till then (or a datagram).
  std::uint64_t next_due_ns() const {
    auto due = std::numeric_limits<std::uint64_t>::max();
    for (const auto& [address, path] : paths_) {
      if (path->to) due = std::min(due, path->next_probe_ns);
    }
    return due;
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
    const auto delay_ns = port_.completion_clock()->ns_between(answer.probe_received_stamp, *stamp);
    if (delay_ns >= max_responder_delay_ns) return;
    try {
      if (!port_.send(encode(stamps_for(answer.probe, delay_ns)), port_.reply_to(answer.route), 0)) {
        ++node_.ignored["send_queue_full"];
      }
    } catch (const RdmaError& error) {
      spdlog::debug("no stamps to {}: {}", answer.route.source, error.what());
      ++node_.ignored["no_way_back"];
    }
  }

  // A datagram that arrived: a probe answered, an answer or its stamps given to its path,
  // anything else counted by why it was ignored.
  void on_arrival(const typename Port::Arrival& arrival) {
    const auto decoded = decode_probe(arrival.bytes);
    if (decoded.outcome != ProbeDecode::ok) {
      ++node_.ignored[std::string(to_string(decoded.outcome))];
      return;
    }
    if (arrival.source.empty()) {
      // No address in front of it (IB without a GRH) from a peer this node has not resolved:
      // nobody it could answer or match. A peer it probes is known by its LID and QP.
      ++node_.ignored["unknown_peer"];
      return;
    }
    if (decoded.message.kind == ProbeKind::probe) {
      answer(arrival, decoded.message);
    } else {
      take_answer(arrival, decoded.message);
    }
  }

  // Closes the window at `now_ns` (`time`: Unix seconds, for the lines): every path's
  // figures and verdict, then the node's.
  void close_window(std::uint64_t now_ns, double time) {
    ++windows_;
    std::vector<PathState> states;
    for (auto& [address, path] : paths_) {
      close_path(*path, now_ns, time);
      // The node is judged on the paths that have worked: a peer that never answered (not
      // started yet, not listening) says nothing of this node.
      if (path->snapshot.answered_total > 0) states.push_back(path->snapshot.verdict.state);
    }
    const bool at_fault = node_at_fault(states);
    if (at_fault != node_.node_at_fault && events_.state_changed) {
      events_.state_changed(nullptr, at_fault ? PathState::ok : PathState::down,
                            at_fault ? PathState::down : PathState::ok,
                            at_fault ? "every path of this node went bad in the same window: its NIC, link or netdev"
                                     : "the node's paths are no longer all bad",
                            time);
    }
    node_.node_at_fault = at_fault;
    if (port_.failed() > 0) node_.ignored["send_failed"] = port_.failed();
    ++round_;
  }
  std::uint64_t windows() const { return windows_; }

  // The node as the report and the metrics show it, its paths in address order.
  NodeSnapshot snapshot() const {
    NodeSnapshot node = node_;
    node.paths.clear();
    for (const auto& [address, path] : paths_) node.paths.push_back(path->snapshot);
    return node;
  }
  // What the window lines name the node by (its paths are not kept up to date here).
  const NodeSnapshot& node() const { return node_; }
  void set_cpu_seconds(double seconds) { node_.cpu_seconds = seconds; }

 private:
  // One path: to whom, how its probes fare, what its windows said, where to send.
  struct Path {
    Path(Target target_in, std::uint64_t run_session, std::uint64_t answer_timeout_ns, const Thresholds& thresholds,
         std::optional<CompletionClock> device_clock)
        : target(std::move(target_in)), probes(run_session, answer_timeout_ns, device_clock), judge(thresholds) {}

    Target target;
    PathProbes probes;
    PathJudge judge;
    std::optional<typename Port::Address> to;
    std::string resolve_error;
    std::uint64_t next_probe_ns = 0;
    std::uint64_t next_resolve_ns = 0;
    PathSnapshot snapshot;
  };
  // A send whose completion this node needs, by its tag: a probe (its send completion's
  // stamp starts the round trip on the device clock), or an answer (its stamp ends the
  // responder's delay, which stamps then carry to the prober).
  struct ProbeSent {
    std::string peer_address;
    std::uint64_t sequence = 0;
  };
  struct AnswerSent {
    typename Port::Route route;
    ProbeMessage probe;
    std::uint64_t probe_received_stamp = 0;
  };

  std::uint64_t window_ns() const { return static_cast<std::uint64_t>(settings_.window_s * 1e9); }

  // 1/rate, give or take 10%, so that nodes started together do not probe in step.
  std::uint64_t jittered_interval_ns(double rate_per_s) {
    std::uniform_real_distribution<double> jitter(0.9, 1.1);
    return static_cast<std::uint64_t>(1e9 / rate_per_s * jitter(random_));
  }

  // A tag for a send whose completion this node needs (its stamp), kept till it completes.
  std::uint64_t track_send(std::variant<ProbeSent, AnswerSent> what) {
    if (tracked_sends_.size() >= max_tracked_sends) tracked_sends_.erase(tracked_sends_.begin());
    const auto tag = next_tag_++;
    tracked_sends_.emplace(tag, std::move(what));
    return tag;
  }

  void answer(const typename Port::Arrival& arrival, const ProbeMessage& probe) {
    if (admission(arrival.source)) {
      spdlog::debug("a probe from {} (QP {}), not in the pinglist", arrival.source, arrival.source_qp);
      ++node_.ignored["unknown_peer"];
      return;
    }
    std::optional<typename Port::Address> back;
    auto route = arrival.route();
    try {
      back = port_.reply_to(route);
    } catch (const RdmaError& error) {
      // No route to the sender this moment (this node's netdev coming back up): the prober
      // counts the probe lost, this node counts why.
      spdlog::debug("no answer to {}: {}", arrival.source, error.what());
      ++node_.ignored["no_way_back"];
      return;
    }
    const auto bytes = encode(answer_to(probe, arrival.received_ns, clock_()));
    const bool stamps = probe.wants_stamps && arrival.completion_stamp;
    const auto tag =
        stamps ? track_send(AnswerSent{
                     .route = std::move(route), .probe = probe, .probe_received_stamp = *arrival.completion_stamp})
               : 0;
    if (!port_.send(bytes, *back, tag)) {
      ++node_.ignored["send_queue_full"];
      tracked_sends_.erase(tag);
    }
  }

  void take_answer(const typename Port::Arrival& arrival, const ProbeMessage& message) {
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
    } else if (!port_.completion_clock() || !probes.take_stamps(fields)) {
      // Stamps this node did not ask for, or of no answer of this run's.
      ++node_.ignored["stamps_unmatched"];
    }
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
      if (events_.state_changed) events_.state_changed(&snapshot, previous, verdict.state, verdict.why, time);
      if (is_bad(verdict.state) && events_.went_bad) events_.went_bad(snapshot.peer);
    }
    if (events_.window_closed) events_.window_closed(snapshot, time);
  }

  NodeSettings settings_;
  Port& port_;
  MonotonicClock clock_;
  NodeEvents events_;
  std::mt19937_64 random_;
  std::vector<Peer> peers_;
  std::set<std::string> known_;
  NodeSnapshot node_;
  std::map<std::string, std::unique_ptr<Path>> paths_;
  std::map<std::uint64_t, std::variant<ProbeSent, AnswerSent>> tracked_sends_;  // by tag
  std::uint64_t next_tag_ = 1;                                                  // 0 tags nothing
  std::uint64_t windows_ = 0;
  std::uint64_t round_ = 0;
};

}  // namespace rdmakit::pingmesh
