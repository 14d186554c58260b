#include "lib/mesh/rdma_mesh_session.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "lib/base/error.hpp"
#include "lib/base/stats.hpp"
#include "lib/base/text_file.hpp"
#include "lib/mesh/mesh_analyse.hpp"
#include "lib/mesh/mesh_json.hpp"
#include "lib/mesh/mesh_messages.hpp"

namespace rdmakit::mesh {

namespace {

Attempt failure(Outcome outcome, nlohmann::json error) {
  return Attempt{
      .outcome = outcome, .figure = std::nullopt, .figures = nlohmann::json::object(), .error = std::move(error)};
}

nlohmann::json message_only(const std::string& message) {
  return {{"message", message}};
}

// Runs one side of a measurement; what goes wrong becomes the attempt's error. Ctrl-C
// alone ends the mesh.
template <typename Run>
Attempt attempt_of(const SiblingNames& siblings, Run&& run) {
  try {
    return run();
  } catch (const RdmaError& error) {
    return failure(Outcome::failed, to_json(record_of(error, siblings)));
  } catch (const CompletionError& error) {
    return failure(Outcome::failed, to_json(record_of(error)));
  } catch (const RunStopped& stopped) {
    if (stopped.reason() == StopReason::interrupted) throw;
    return failure(outcome_of(stopped.reason()), message_only(stopped.what()));
  } catch (const std::exception& error) {
    return failure(Outcome::failed, message_only(error.what()));
  }
}

// --test cm: each connection's resolve, route and connect steps, in the order taken.
Attempt connect_attempt(const Report& report) {
  std::vector<double> resolve;
  std::vector<double> route;
  std::vector<double> connect;
  std::vector<double> total;
  double running = 0;
  for (const auto& [step, ms] : report.timings) {
    running += ms;
    if (step == Step::resolve_addr) resolve.push_back(ms);
    if (step == Step::resolve_route) route.push_back(ms);
    if (step == Step::connect) {
      connect.push_back(ms);
      total.push_back(running);
      running = 0;
    }
  }
  const auto figure = median_of(total);
  return Attempt{.outcome = Outcome::completed,
                 .figure = figure,
                 .figures = {{"connections", connect.size()},
                             {"resolve_addr_ms", median_of(resolve)},
                             {"resolve_route_ms", median_of(route)},
                             {"connect_ms", median_of(connect)},
                             {"setup_ms", figure},
                             {"setup_max_ms", total.empty() ? 0 : *std::max_element(total.begin(), total.end())}},
                 .error = std::nullopt};
}

Attempt client_attempt(Test test, const Report& report, const BwResults& results) {
  if (test == Test::connect) return connect_attempt(report);
  if (test == Test::latency) {
    if (results.latency.empty()) return failure(Outcome::failed, message_only("no latency row"));
    const auto& row = results.latency.back();
    auto figures = to_json(row.summary);
    figures["size"] = row.size;
    return Attempt{
        .outcome = Outcome::completed, .figure = row.summary.p50_us, .figures = figures, .error = std::nullopt};
  }
  if (results.bandwidth.empty()) return failure(Outcome::failed, message_only("no bandwidth row"));
  const auto& row = results.bandwidth.back();
  return Attempt{.outcome = Outcome::completed,
                 .figure = row.average_mib_per_s,
                 .figures = {{"size", row.size},
                             {"iterations", row.iterations},
                             {"bytes", row.bytes},
                             {"seconds", row.seconds},
                             {"bw_average_mib_per_s", row.average_mib_per_s},
                             {"bw_peak_mib_per_s", row.peak_mib_per_s},
                             {"bw_average_gbit_per_s", row.average_gbit_per_s},
                             {"msg_rate_mpps", row.message_rate_mpps}},
                 .error = std::nullopt};
}

// A set of pairs measured at once in one direction and one test.
struct Phase {
  Round pairs;
  bool backward = false;  // the higher rank is the source
  Test test = Test::bandwidth;
  int round = 0;
};

struct Part {
  int partner = 0;
  bool sender = false;
};

std::optional<Part> part_in(const Phase& phase, int rank) {
  for (const auto& pair : phase.pairs) {
    if (pair.low == rank) return Part{.partner = pair.high, .sender = !phase.backward};
    if (pair.high == rank) return Part{.partner = pair.low, .sender = phase.backward};
  }
  return std::nullopt;
}

BwSettings settings_for(const MeshSettings& m, Test test, const Node& self, const Node& partner, bool sender) {
  auto s = m.bw;
  s.bind = self.address;
  s.server = sender ? partner.address : std::string();
  s.port = static_cast<std::uint16_t>(m.base_port + (sender ? partner.rank : self.rank));
  s.persistent = false;
  s.accept_timeout = std::nullopt;
  s.bound_client_silence = true;  // every wait of the mesh is bounded: a dead link must not stall the round
  s.test = test == Test::latency ? bw::Test::latency : bw::Test::bandwidth;
  if (test == Test::latency) {
    s.sizes = {m.latency_size};
    s.queue_pairs = 1;
  }
  if (test == Test::connect) {
    // The connections are the measurement; one small message on each shows they work.
    s.sizes = {64};
    s.budget = Budget{.iterations = 1, .duration = std::nullopt};
    s.warmup = 0;
    s.queue_pairs = m.connections;
  }
  return s;
}

// This rank's side of a phase. The job's exchange between listening and connecting keeps
// a sender from connecting before its receiver listens, and tells it when that failed.
std::optional<Observation> run_phase(Job& job, const MeshSettings& m, const std::vector<Node>& nodes,
                                     const Phase& phase, const SiblingNames& siblings) {
  const int rank = job.rank();
  const auto part = part_in(phase, rank);
  std::unique_ptr<BwServer> server;
  Report server_report;
  std::optional<Attempt> listen_failure;
  if (part && !part->sender) {
    const auto settings = settings_for(m, phase.test, nodes[rank], nodes[part->partner], false);
    listen_failure = attempt_of(siblings, [&] {
      server = std::make_unique<BwServer>(settings, server_report);
      return Attempt{};
    });
    if (server) listen_failure.reset();
  }
  const auto listening = job.all_gather(server ? "yes" : "no");
  if (!part) return std::nullopt;
  Observation seen{.source = part->sender ? rank : part->partner,
                   .destination = part->sender ? part->partner : rank,
                   .test = phase.test,
                   .sender = part->sender,
                   .attempt = {}};
  if (part->sender) {
    if (listening[part->partner] != "yes") {
      seen.attempt = failure(Outcome::failed, message_only(fmt::format("rank {} could not listen", part->partner)));
      return seen;
    }
    seen.attempt = attempt_of(siblings, [&] {
      Report report;
      BwResults results;
      run_bw_client(settings_for(m, phase.test, nodes[rank], nodes[part->partner], true), report, results);
      return client_attempt(phase.test, report, results);
    });
  } else if (listen_failure) {
    seen.attempt = *listen_failure;
  } else {
    seen.attempt = attempt_of(siblings, [&] {
      BwResults results;
      server->serve_one(server_report, results, Clock::now() + m.bw.limits.timeout);
      return Attempt{};
    });
  }
  return seen;
}

// Every rank's observations of a phase, folded into the directions: the sender's attempt,
// with the receiver's error where the sender has none to give.
void record_phase(Job& job, const std::optional<Observation>& mine, const Phase& phase, bool retest,
                  MeshResults& results) {
  const auto all = job.all_gather(mine ? to_json(*mine).dump() : std::string());
  std::vector<Observation> observed;
  for (std::size_t rank = 0; rank < all.size(); ++rank) {
    if (!all[rank].empty()) {
      observed.push_back(observation_from_message(all[rank], static_cast<int>(rank), static_cast<int>(all.size())));
    }
  }
  for (const auto& sender : observed) {
    if (!sender.sender) continue;
    auto attempt = sender.attempt;
    for (const auto& receiver : observed) {
      if (!receiver.sender && receiver.source == sender.source && receiver.destination == sender.destination &&
          receiver.attempt.error) {
        attempt.figures["receiver_error"] = *receiver.attempt.error;
        if (!attempt.error) {
          attempt.outcome = receiver.attempt.outcome;
          attempt.figure.reset();
          attempt.error = receiver.attempt.error;
        }
      }
    }
    auto found = std::find_if(results.directions.begin(), results.directions.end(), [&](const Direction& d) {
      return d.source == sender.source && d.destination == sender.destination && d.test == sender.test;
    });
    if (retest && found != results.directions.end()) {
      found->retests.push_back(std::move(attempt));
    } else if (found == results.directions.end()) {
      results.directions.push_back(Direction{.source = sender.source,
                                             .destination = sender.destination,
                                             .test = sender.test,
                                             .round = phase.round,
                                             .cause = {},
                                             .first = std::move(attempt),
                                             .retests = {}});
    }
  }
}

void run_round(Job& job, const MeshSettings& m, const std::vector<Node>& nodes, const Round& round, int number,
               bool retest, MeshResults& results) {
  Round usable;
  std::copy_if(round.begin(), round.end(), std::back_inserter(usable),
               [&](const RankPair& pair) { return nodes[pair.low].usable && nodes[pair.high].usable; });
  for (const bool backward : {false, true}) {
    if (backward && m.one_way) break;
    for (const auto test : m.tests) {
      const Phase phase{.pairs = usable, .backward = backward, .test = test, .round = number};
      const auto mine = run_phase(job, m, nodes, phase, results.siblings);
      record_phase(job, mine, phase, retest, results);
    }
  }
}

// Why no direction of a pair with `broken` in it can run, in the words of its diagnosis.
Attempt cannot_take_part(const Node& broken) {
  const auto cause = broken.verdict.value("cause", std::string("unknown"));
  return failure(Outcome::failed,
                 message_only(fmt::format("rank {} ({}, {}) cannot take part: {}: {}", broken.rank, broken.host,
                                          broken.address.empty() ? "no address" : broken.address, cause,
                                          broken.verdict.value("summary", std::string()))));
}

void record_unusable_pair(const MeshSettings& m, const RankPair& pair, const Node& broken, int round,
                          MeshResults& results) {
  for (const bool backward : {false, true}) {
    if (backward && m.one_way) break;
    for (const auto test : m.tests) {
      results.directions.push_back(Direction{.source = backward ? pair.high : pair.low,
                                             .destination = backward ? pair.low : pair.high,
                                             .test = test,
                                             .round = round,
                                             .cause = broken.verdict.value("cause", std::string("unknown")),
                                             .first = cannot_take_part(broken),
                                             .retests = {}});
    }
  }
}

// The directions no measurement can run on: a rank without a usable address.
void record_unusable(const MeshSettings& m, const std::vector<Node>& nodes, const std::vector<Round>& rounds,
                     MeshResults& results) {
  for (std::size_t number = 0; number < rounds.size(); ++number) {
    for (const auto& pair : rounds[number]) {
      const auto& low = nodes[pair.low];
      const auto& high = nodes[pair.high];
      if (low.usable && high.usable) continue;
      record_unusable_pair(m, pair, low.usable ? high : low, static_cast<int>(number) + 1, results);
    }
  }
}

// Directions to measure again, by unordered pair: outliers and failed ones (a rank that
// cannot take part aside), as the stored analysis has them.
std::vector<RankPair> needing_retest(const MeshResults& results) {
  std::vector<RankPair> pairs;
  const auto add = [&](const Direction& d) {
    const RankPair pair{.low = std::min(d.source, d.destination), .high = std::max(d.source, d.destination)};
    if (std::find(pairs.begin(), pairs.end(), pair) == pairs.end()) pairs.push_back(pair);
  };
  for (const auto& judged : results.analyses) {
    for (const auto& outlier : judged.analysis.outliers) add(results.directions[judged.directions[outlier.sample]]);
    for (const auto index : judged.directions) {
      const auto& d = results.directions[index];
      if (!d.last().figure && d.cause.empty()) add(d);
    }
  }
  return pairs;
}

void write_progress(const std::string& path, const Report& report, const MeshResults& results) {
  if (path.empty()) return;
  auto partial = report;
  partial.add(results);
  // Whole or not at all: MPI ends every rank when one dies, rank 0 perhaps mid-write. A
  // progress file that cannot be written is said and the run goes on: the final report is
  // the one whose failure counts.
  if (const auto failed = write_file_whole(path, json_text(to_json(partial)) + "\n")) spdlog::warn("{}", *failed);
}

// Rank 0's --json-file as the rounds end: after every round, but above
// matrix_form_above_ranks ranks, where the report is tens of MB and takes seconds to build
// and write, at most once a minute (1023 rounds at 1024 ranks would otherwise spend longer
// writing than measuring).
class ProgressFile {
 public:
  ProgressFile(std::string path, int ranks) : path_(std::move(path)), every_round_(ranks <= matrix_form_above_ranks) {}
  void round_done(const Report& report, const MeshResults& results) {
    const auto now = Clock::now();
    if (!every_round_ && written_ && now - *written_ < std::chrono::minutes(1)) return;
    write_progress(path_, report, results);
    written_ = now;
  }

 private:
  std::string path_;
  bool every_round_;
  std::optional<Clock::time_point> written_;
};

std::vector<Round> plan(const MeshSettings& m, int ranks) {
  if (!m.only_pairs.empty()) return m.serial ? one_per_round(m.only_pairs) : pack_rounds(m.only_pairs);
  if (m.quick) return m.serial ? one_per_round(quick_round(ranks)) : std::vector<Round>{quick_round(ranks)};
  auto rounds = round_robin(ranks);
  if (!m.serial) return rounds;
  std::vector<RankPair> pairs;
  for (const auto& round : rounds) pairs.insert(pairs.end(), round.begin(), round.end());
  return one_per_round(pairs);
}

// The report's common counters: what the last attempt of each direction moved.
void count_traffic(const MeshResults& results, Report& report) {
  for (const auto& d : results.directions) {
    const auto& figures = d.last().figures;
    if (figures.contains("bytes") && figures.contains("iterations")) {
      const auto iterations = figures["iterations"].get<std::uint64_t>();
      report.iterations_completed += iterations;
      report.bytes += figures["bytes"].get<std::uint64_t>();  // the row's bytes: size x iterations
    }
  }
}

// "round N of M" on rank 0's stderr after each round, with the pairs done and the time
// left at the pace so far.
class RoundsShown {
 public:
  RoundsShown(Progress* progress, const std::vector<Round>& rounds)
      : progress_(progress), rounds_(rounds), started_(Clock::now()) {
    for (const auto& round : rounds) pairs_ += round.size();
  }
  void round_done(std::size_t number) {
    done_ += rounds_[number].size();
    if (progress_ == nullptr) return;
    const auto elapsed = std::chrono::duration<double>(Clock::now() - started_).count();
    const auto left = elapsed / static_cast<double>(done_) * static_cast<double>(pairs_ - done_);
    progress_->status(fmt::format("round {} of {}: {} of {} pairs measured, {:.0f} s so far, about {:.0f} s left",
                                  number + 1, rounds_.size(), done_, pairs_, elapsed, left));
  }

 private:
  Progress* progress_;
  const std::vector<Round>& rounds_;
  Clock::time_point started_;
  std::size_t pairs_ = 0;
  std::size_t done_ = 0;
};

std::size_t flattened_size(const std::vector<Round>& rounds) {
  std::size_t pairs = 0;
  for (const auto& round : rounds) pairs += round.size();
  return pairs;
}

// The rounds, then the retests of what the analysis flags. The analysis is made once after
// each round, and the round's --json-file written from it, so that the file's pairs and
// summary agree at every round.
void run_rounds(Job& job, const MeshSettings& m, const std::vector<Round>& rounds, const Report& report,
                MeshResults& results) {
  RoundsShown shown(job.rank() == 0 ? m.progress : nullptr, rounds);
  ProgressFile progress_file(m.json_file, results.ranks);
  for (std::size_t number = 0; number < rounds.size(); ++number) {
    spdlog::info("round {} of {}: {} pair(s)", number + 1, rounds.size(), rounds[number].size());
    run_round(job, m, results.nodes, rounds[number], static_cast<int>(number) + 1, false, results);
    results.rounds_completed = static_cast<int>(number) + 1;
    results.analyse();
    if (job.rank() == 0) progress_file.round_done(report, results);
    shown.round_done(number);
  }
  // Every rank holds every direction and the same analysis, so every rank plans the same
  // passes without a word exchanged.
  RetestSchedule schedule(m.retests, m.serial);
  while (auto pass = schedule.next(needing_retest(results))) {
    spdlog::info("retest {}: {} pair(s) in {} round(s)", schedule.passes(), flattened_size(*pass), pass->size());
    for (const auto& round : *pass) {
      run_round(job, m, results.nodes, round, 0, true, results);
      results.analyse();
    }
    results.retest_passes.push_back(std::move(*pass));
  }
  results.retests_ended = schedule.end();
}

// The ranks that no round of `rounds` pairs.
std::vector<int> ranks_left_out(int ranks, const std::vector<Round>& rounds) {
  std::vector<bool> paired(static_cast<std::size_t>(ranks), false);
  for (const auto& round : rounds) {
    for (const auto& pair : round) {
      paired[pair.low] = true;
      paired[pair.high] = true;
    }
  }
  std::vector<int> left;
  for (int rank = 0; rank < ranks; ++rank) {
    if (!paired[rank]) left.push_back(rank);
  }
  return left;
}

}  // namespace

void run_rdma_mesh(Job& job, const MeshSettings& settings, const Node& self, Report& report, MeshResults& results) {
  results.ranks = job.size();
  results.tests = settings.tests;
  results.bw_analysis.threshold = settings.bw_threshold;
  results.time_analysis.threshold = settings.time_threshold;
  results.rule = settings.rule;
  results.topology = settings.topology;
  results.siblings = report.siblings;
  results.analyse();
  const auto described = job.all_gather(to_json(self).dump());
  for (std::size_t rank = 0; rank < described.size(); ++rank) {
    results.nodes.push_back(node_from_message(described[rank], static_cast<int>(rank)));
  }
  for (const auto& node : results.nodes) {
    if (node.rank >= job.size() || &node - results.nodes.data() != node.rank) {
      throw ProtocolError(fmt::format("rank {} described itself as rank {}", &node - results.nodes.data(), node.rank));
    }
  }
  report.local_address = self.address;
  if (results.topology) {
    if (const auto mismatch = topology_mismatch(*results.topology, results.nodes)) {
      if (job.rank() == 0) spdlog::warn("{}", *mismatch);
      results.warnings.push_back(*mismatch);
    }
  }
  if (job.rank() == 0) {
    for (const auto& line : mixed_fabric(results.nodes)) spdlog::warn("{}", line);
  }
  const auto rounds = plan(settings, job.size());
  results.rounds = static_cast<int>(rounds.size());
  results.left_out = ranks_left_out(job.size(), rounds);
  if (job.rank() == 0 && !results.left_out.empty()) {
    spdlog::info("{} rank(s) in no pair: {}", results.left_out.size(), fmt::join(results.left_out, ", "));
  }
  record_unusable(settings, results.nodes, rounds, results);
  results.analyse();
  try {
    run_rounds(job, settings, rounds, report, results);
  } catch (...) {
    results.analyse();  // the report's summary and flags cover the round cut short too
    throw;
  }
  results.finished = true;
  count_traffic(results, report);
  // The findings are said once, by the rank that prints the report.
  conclude(results, report, job.rank() == 0);
}

}  // namespace rdmakit::mesh
