#include "lib/pingmesh/pingmesh_path.hpp"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

namespace rdmakit::pingmesh {

std::string_view to_string(PathState state) {
  switch (state) {
    case PathState::unknown: return "unknown";
    case PathState::ok: return "ok";
    case PathState::lossy: return "lossy";
    case PathState::slow: return "slow";
    case PathState::down: return "down";
  }
  return "unknown";
}

ProbeTicket PathProbes::next_probe(std::uint64_t sent_ns) {
  if (in_flight_.size() >= max_in_flight) {
    const auto oldest = in_flight_.begin()->first;
    in_flight_.erase(in_flight_.begin());
    count_lost(oldest);
  }
  const ProbeTicket probe{.session = session_, .sequence = next_sequence_++, .sent_ns = sent_ns};
  in_flight_.emplace(probe.sequence, InFlight{.sent_ns = sent_ns, .device_sent = std::nullopt});
  ++window_.sent;
  return probe;
}

void PathProbes::probe_left(std::uint64_t sequence, std::uint64_t device_stamp) {
  if (const auto probe = in_flight_.find(sequence); probe != in_flight_.end()) {
    probe->second.device_sent = device_stamp;
    return;
  }
  // The answer came first (its completion polled before the probe's own): it waits here.
  if (const auto waiting = awaiting_stamps_.find(sequence);
      waiting != awaiting_stamps_.end() && !waiting->second.device_sent) {
    waiting->second.device_sent = device_stamp;
    complete(waiting);
  }
}

void PathProbes::count_lost(std::uint64_t sequence) {
  ++window_.lost;
  if (in_outage_ || sequence < outage_ended_at_) ++window_.lost_in_outage;
  lost_sequences_.push_back(sequence);
  if (lost_sequences_.size() > remembered_lost) lost_sequences_.pop_front();
}

PathProbes::Match PathProbes::take_answer(const AnswerFields& answer, std::uint64_t received_ns,
                                          std::optional<std::uint64_t> device_stamp) {
  if (answer.session != session_) {
    ++window_.unexpected;
    return Match::unexpected;
  }
  const auto probe = in_flight_.find(answer.sequence);
  if (probe == in_flight_.end()) {
    // Sequences are counted lost in order, so the remembered ones are sorted.
    if (std::binary_search(lost_sequences_.begin(), lost_sequences_.end(), answer.sequence)) {
      ++window_.late;
      return Match::late;
    }
    ++window_.unexpected;
    return Match::unexpected;
  }
  const auto [sent_ns, device_sent] = probe->second;
  if (answer.echoed_sent_ns != sent_ns || received_ns < sent_ns) {
    ++window_.unexpected;
    return Match::unexpected;
  }
  in_flight_.erase(probe);
  ++window_.answered;
  if (in_outage_) {
    // Probes sent before this one went out while the path was still down.
    in_outage_ = false;
    outage_ended_at_ = answer.sequence;
  }
  const std::uint64_t round_trip_ns = received_ns - sent_ns;
  if (device_ && peer_stamps_ && device_stamp) {
    if (awaiting_stamps_.size() >= max_in_flight) {
      const auto oldest = awaiting_stamps_.begin()->second;
      awaiting_stamps_.erase(awaiting_stamps_.begin());
      add_sample(oldest.host_round_trip_ns, oldest.host_delay_ns);
    }
    awaiting_stamps_[answer.sequence] = AwaitingStamps{.echoed_sent_ns = sent_ns,
                                                       .host_round_trip_ns = round_trip_ns,
                                                       .host_delay_ns = answer.responder_delay_ns,
                                                       .device_sent = device_sent,
                                                       .device_received = *device_stamp,
                                                       .device_delay_ns = std::nullopt,
                                                       .deadline_ns = received_ns + answer_timeout_ns_};
    return Match::answered;
  }
  add_sample(round_trip_ns, answer.responder_delay_ns);
  return Match::answered;
}

void PathProbes::complete(std::map<std::uint64_t, AwaitingStamps>::iterator waiting) {
  const AwaitingStamps& answer = waiting->second;
  if (!answer.device_sent || !answer.device_delay_ns) return;
  const std::uint64_t device_round_trip_ns = device_->ns_between(*answer.device_sent, answer.device_received);
  // Both completions lie between the host's send and receive times, so the device's round
  // trip is the shorter (a 1% margin for the two clocks' rates); a longer one is a stamp read
  // wrong, and the host's clocks measure this answer. So is one no longer than the
  // responder's delay: a network time of nothing or less. rxe stamps a send's completion
  // when its tasklet runs, and on a loaded host that came after the answer had arrived.
  if (device_round_trip_ns <= answer.host_round_trip_ns + answer.host_round_trip_ns / 100 &&
      device_round_trip_ns > *answer.device_delay_ns) {
    add_sample(device_round_trip_ns, *answer.device_delay_ns);
    ++window_.device_samples;
  } else {
    add_sample(answer.host_round_trip_ns, answer.host_delay_ns);
  }
  awaiting_stamps_.erase(waiting);
}

bool PathProbes::take_stamps(const AnswerFields& stamps) {
  if (stamps.session != session_ || stamps.sequence >= next_sequence_) return false;
  const auto waiting = awaiting_stamps_.find(stamps.sequence);
  if (waiting == awaiting_stamps_.end()) {
    // The first stamps from this peer follow an answer measured on the hosts' clocks; from
    // the next answer on, the round trip waits for them.
    if (!peer_stamps_ && !in_flight_.contains(stamps.sequence)) {
      peer_stamps_ = true;
      return true;
    }
    return false;
  }
  if (waiting->second.echoed_sent_ns != stamps.echoed_sent_ns || waiting->second.device_delay_ns) return false;
  waiting->second.device_delay_ns = stamps.responder_delay_ns;
  complete(waiting);
  return true;
}

void PathProbes::add_sample(std::uint64_t round_trip_ns, std::uint64_t delay_ns) {
  // The responder's clock may run a little fast against ours: never a negative network time.
  rtt_.add(std::chrono::nanoseconds(round_trip_ns > delay_ns ? round_trip_ns - delay_ns : 0));
  responder_delay_.add(std::chrono::nanoseconds(delay_ns));
}

void PathProbes::expire(std::uint64_t now_ns) {
  while (!in_flight_.empty()) {
    // The oldest probe has the lowest sequence: sequences grow with the send time.
    const auto sequence = in_flight_.begin()->first;
    if (now_ns < in_flight_.begin()->second.sent_ns + answer_timeout_ns_) break;
    in_flight_.erase(in_flight_.begin());
    count_lost(sequence);
  }
  for (auto waiting = awaiting_stamps_.begin(); waiting != awaiting_stamps_.end();) {
    if (now_ns < waiting->second.deadline_ns) {
      ++waiting;
      continue;
    }
    // No stamps: the peer stopped stamping (restarted on a device without times) or they were
    // lost; this answer on the hosts' clocks, and the next ones too until stamps come again.
    // Stamps but no send completion of the probe's: this answer alone.
    add_sample(waiting->second.host_round_trip_ns, waiting->second.host_delay_ns);
    if (!waiting->second.device_delay_ns) {
      ++window_.stamps_missing;
      peer_stamps_ = false;
    }
    waiting = awaiting_stamps_.erase(waiting);
  }
}

WindowFigures PathProbes::close_window(std::uint64_t now_ns) {
  expire(now_ns);
  WindowFigures figures = window_;
  const std::uint64_t judged_lost = figures.lost - figures.lost_in_outage;
  const std::uint64_t judged = figures.answered + judged_lost;
  figures.loss_ratio = judged == 0 ? 0.0 : static_cast<double>(judged_lost) / static_cast<double>(judged);
  figures.rtt = rtt_.summary();
  figures.responder_delay = responder_delay_.summary();
  window_ = WindowFigures{};
  rtt_ = LatencyRecorder{};
  responder_delay_ = LatencyRecorder{};
  return figures;
}

namespace {

double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t middle = values.size() / 2;
  return values.size() % 2 == 1 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

}  // namespace

Verdict PathJudge::judge(const WindowFigures& window) {
  const std::uint64_t resolved = window.answered + window.lost;
  if (resolved == 0) return Verdict{state_, "no probe answered or timed out in the window"};
  Verdict verdict;
  if (window.answered == 0) {
    verdict = {PathState::down, fmt::format("nothing answered: {} probes lost", window.lost)};
  } else if (window.loss_ratio > thresholds_.lossy_ratio) {
    const std::uint64_t judged_lost = window.lost - window.lost_in_outage;
    verdict = {PathState::lossy,
               fmt::format("lost {} of {} probes ({:.2f}%, above {:.2f}%)", judged_lost, window.answered + judged_lost,
                           window.loss_ratio * 100, thresholds_.lossy_ratio * 100)};
  } else {
    const double p99_us = window.rtt ? window.rtt->p99_us : 0;
    std::optional<double> limit_us;
    std::string against;
    if (thresholds_.p99_limit_s) {
      limit_us = *thresholds_.p99_limit_s * 1e6;
      against = "the --p99-limit";
    } else if (baseline_p99_us_) {
      limit_us = *baseline_p99_us_ * thresholds_.slow_factor;
      against = fmt::format("{} x the path's baseline {:.1f} us", thresholds_.slow_factor, *baseline_p99_us_);
    }
    if (limit_us && p99_us > *limit_us) {
      verdict = {PathState::slow, fmt::format("RTT p99 {:.1f} us above {:.1f} us ({})", p99_us, *limit_us, against)};
    } else {
      verdict = {PathState::ok,
                 fmt::format("{} answered, {} lost, RTT p99 {:.1f} us", window.answered, window.lost, p99_us)};
      if (window.lost_in_outage > 0)
        verdict.why += fmt::format(" ({} lost before the path came back)", window.lost_in_outage);
      if (!baseline_p99_us_ && window.rtt) {
        learning_p99_us_.push_back(p99_us);
        if (learning_p99_us_.size() >= thresholds_.baseline_windows) {
          baseline_p99_us_ = median_of(learning_p99_us_);
          learning_p99_us_.clear();
        }
      }
    }
  }
  state_ = verdict.state;
  return verdict;
}

bool node_at_fault(std::span<const PathState> states) {
  return states.size() >= 2 && std::all_of(states.begin(), states.end(), is_bad);
}

}  // namespace rdmakit::pingmesh
