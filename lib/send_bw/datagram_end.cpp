#include "lib/send_bw/datagram_end.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lib/base/error.hpp"
#include "lib/rdma/verbs.hpp"
#include "lib/rdma/work_request.hpp"
#include "lib/send_bw/loop_support.hpp"
#include "lib/send_bw/loops.hpp"

namespace rdmakit {

namespace {

// The client's wait for an answer before it sends its counts again: well above a round
// trip, even between two TCG guests (a few ms).
constexpr auto resend_interval = std::chrono::milliseconds(200);
// The server's wait for the client's done after its last answer: a few resend intervals,
// so that a lost answer is asked for again and answered.
constexpr auto linger = std::chrono::seconds(1);

struct ControlArrival {
  bw::DatagramCounts counts;
  ibv_wc completion{};
  ibv_grh grh{};
};

// One lane's control datagrams: sends them from the lane's local buffer, one at a time, and
// picks them out of what arrives (a late data datagram is dropped).
class ControlChannel {
 public:
  // `deadline`: no send waits past it, whatever the run's timeout (the whole exchange's bound).
  ControlChannel(const Lane& lane, const RunLimits& limits, Clock::time_point deadline = Clock::time_point::max())
      : lane_(lane), limits_(limits), deadline_(deadline) {}

  // Posts `counts` to `to` and waits (bounded) for the send to complete, so that the next
  // message may take the buffer.
  void send(const bw::DatagramCounts& counts, const DatagramAddress& to) {
    const auto bytes = bw::encode(counts);
    std::memcpy(reinterpret_cast<void*>(lane_.local_address), bytes.data(), bytes.size());
    const auto length = static_cast<std::uint32_t>(bytes.size());
    ibv_sge sge{};
    ibv_send_wr wr{};
    build_send(SendRequest{.id = WorkId{.kind = WorkKind::send, .owner = 0, .sequence = 0},
                           .opcode = IBV_WR_SEND_WITH_IMM,
                           .local = ibv_sge{.addr = lane_.local_address, .length = length, .lkey = lane_.lkey},
                           .flags = IBV_SEND_SIGNALED},
               wr, sge);
    wr.imm_data = bw::datagram_end_imm();
    address_datagram(to, wr);
    loop::post(lane_.qp, &wr, length);
    const auto now = Clock::now();
    SilenceBound silence(limits_.timeout, now, std::min(now + limits_.timeout, deadline_));
    loop::SpinGuard spin(limits_.stop_fd);
    for (bool sent = false; !sent;) {
      if (poll(sent) || sent || !spin.due()) continue;
      silence.check(Clock::now(),
                    [&] { return fmt::format("the datagram counts were not sent within {} ms", silence.limit_ms()); });
      spin.check_stop("while ending the datagram stream");
    }
  }

  // The next control message, if one arrived by `until` (one look when it has passed).
  std::optional<ControlArrival> receive(Clock::time_point until) {
    loop::SpinGuard spin(limits_.stop_fd);
    for (;;) {
      bool sent = false;
      const bool polled = poll(sent);
      if (!arrived_.empty()) {
        auto arrival = std::move(arrived_.front());
        arrived_.pop_front();
        return arrival;
      }
      if (polled) continue;
      if (Clock::now() >= until) return std::nullopt;
      if (spin.due()) spin.check_stop("while ending the datagram stream");
    }
  }

 private:
  // Takes what the CQ holds: the receives are reposted (control messages kept, in order),
  // `sent` says whether our send was among them; false when the CQ was empty.
  bool poll(bool& sent) {
    const int got = loop::poll_lane(lane_, wcs_);
    std::uint32_t receives = 0;
    for (int k = 0; k < got; ++k) {
      const auto& wc = wcs_[static_cast<std::size_t>(k)];
      if (wc.status != IBV_WC_SUCCESS) loop::fail_completion(wc);
      if (!loop::is_receive(wc)) {
        sent = true;
        continue;
      }
      ++receives;
      if (loop::is_datagram_counts(wc) && wc.byte_len >= grh_bytes) {
        const auto* bytes = reinterpret_cast<const std::uint8_t*>(lane_.receive_address);
        arrived_.push_back({.counts = bw::decode_datagram_counts({bytes + grh_bytes, wc.byte_len - grh_bytes}),
                            .completion = wc,
                            .grh = loop::received_grh(lane_)});
      }
    }
    if (receives > 0) post_receives(lane_, receives);
    return got > 0;
  }

  const Lane& lane_;
  const RunLimits& limits_;
  Clock::time_point deadline_;
  std::deque<ControlArrival> arrived_;
  std::array<ibv_wc, loop::poll_batch> wcs_{};
};

// The client's last word, once the counts are known on both sides: a done not sent by the
// exchange's deadline only makes the server wait out its linger.
void send_done(ControlChannel& channel, const DatagramAddress& server) {
  try {
    channel.send({.kind = bw::DatagramCounts::Kind::done, .rows = {}}, server);
  } catch (const RunStopped& stopped) {
    if (stopped.reason() != StopReason::timed_out) throw;
    spdlog::debug("the datagram stream's done: {}", stopped.what());
  }
}

// What the server heard from a lane's client; ProtocolError unless it is the counts sent.
bw::DatagramCounts expect_sent(const bw::DatagramCounts& counts, std::size_t lane) {
  if (counts.kind != bw::DatagramCounts::Kind::sent) {
    throw ProtocolError(fmt::format("queue pair {}: the client ended its datagram stream without its counts", lane));
  }
  return counts;
}

}  // namespace

DatagramAddress reply_address(const Lane& lane, const DatagramReturn& from, const ibv_wc& completion,
                              const ibv_grh& grh, std::unique_ptr<AddressHandle>& handle) {
  handle = std::make_unique<AddressHandle>(from.pd, completion, &grh, from.port);
  return {.ah = handle->get(),
          .qp_num = completion.src_qp,
          .qkey = query_qp_checked(lane.qp, IBV_QP_QKEY, "Q_Key").attributes.qkey};
}

void add_losses(std::vector<DatagramLoss>& losses, const std::vector<bw::SizeCount>& sent,
                const std::vector<bw::SizeCount>& received) {
  auto entry = [&](std::uint32_t size) -> DatagramLoss& {
    const auto found =
        std::find_if(losses.begin(), losses.end(), [&](const DatagramLoss& loss) { return loss.size == size; });
    if (found != losses.end()) return *found;
    losses.push_back({.size = size, .sent = 0, .received = 0});
    return losses.back();
  };
  for (const auto& row : sent) entry(row.size).sent += row.count;
  for (const auto& row : received) entry(row.size).received += row.count;
}

std::vector<DatagramLoss> exchange_datagram_counts(const std::vector<Lane>& lanes,
                                                   const std::vector<std::vector<bw::SizeCount>>& sent,
                                                   const RunLimits& limits) {
  // Every lane's counts go out before any answer is awaited: the server answers once all
  // its lanes have ended. The timeout bounds the whole exchange, the done included.
  const auto deadline = Clock::now() + limits.timeout;
  std::vector<ControlChannel> channels;
  channels.reserve(lanes.size());
  for (const auto& lane : lanes) channels.emplace_back(lane, limits, deadline);
  std::vector<std::optional<bw::DatagramCounts>> theirs(lanes.size());
  const auto missing = [&] { return std::find(theirs.begin(), theirs.end(), std::nullopt) != theirs.end(); };
  while (missing()) {
    if (Clock::now() > deadline) {
      throw RunStopped(
          StopReason::timed_out,
          fmt::format("the server did not answer the end of the datagram stream within {} ms", limits.timeout.count()));
    }
    for (std::size_t l = 0; l < lanes.size(); ++l) {
      if (!theirs[l]) channels[l].send({.kind = bw::DatagramCounts::Kind::sent, .rows = sent[l]}, lanes[l].peer);
    }
    const auto resend_at = std::min(Clock::now() + resend_interval, deadline);
    for (std::size_t l = 0; l < lanes.size(); ++l) {
      while (!theirs[l]) {
        auto arrival = channels[l].receive(resend_at);
        if (!arrival) break;
        if (arrival->counts.kind == bw::DatagramCounts::Kind::received) theirs[l] = std::move(arrival->counts);
      }
    }
  }
  std::vector<DatagramLoss> losses;
  for (std::size_t l = 0; l < lanes.size(); ++l) {
    add_losses(losses, sent[l], theirs[l]->rows);
    send_done(channels[l], lanes[l].peer);
  }
  return losses;
}

std::vector<DatagramLoss> answer_datagram_counts(const std::vector<Lane>& lanes,
                                                 const std::vector<DatagramReturn>& returns,
                                                 std::vector<DatagramTally>& tallies, const RunLimits& limits) {
  std::vector<DatagramLoss> losses;
  std::vector<std::unique_ptr<AddressHandle>> handles;
  std::vector<DatagramAddress> clients;
  std::vector<ControlChannel> channels;
  std::vector<bw::DatagramCounts> answers;
  for (std::size_t l = 0; l < lanes.size(); ++l) {
    auto& tally = tallies[l];
    if (!tally.end) throw ProtocolError(fmt::format("queue pair {}: the datagram stream did not end", l));
    const auto sent = expect_sent(bw::decode_datagram_counts(*tally.end), l);
    add_losses(losses, sent.rows, tally.received);
    handles.emplace_back();
    clients.push_back(reply_address(lanes[l], returns[l], tally.end_completion, tally.end_grh, handles.back()));
    answers.push_back({.kind = bw::DatagramCounts::Kind::received, .rows = tally.received});
    channels.emplace_back(lanes[l], limits);
    channels.back().send(answers.back(), clients.back());
  }
  // Until every client said done, answering each repeat; a client whose done was lost is
  // given up on once nothing came for the linger.
  std::vector<bool> done(lanes.size(), false);
  auto last_heard = Clock::now();
  while (std::find(done.begin(), done.end(), false) != done.end() && Clock::now() - last_heard < linger) {
    for (std::size_t l = 0; l < lanes.size(); ++l) {
      if (done[l]) continue;
      const auto arrival = channels[l].receive(Clock::now() + std::chrono::milliseconds(1));
      if (!arrival) continue;
      last_heard = Clock::now();
      if (arrival->counts.kind == bw::DatagramCounts::Kind::done) {
        done[l] = true;
      } else if (arrival->counts.kind == bw::DatagramCounts::Kind::sent) {
        channels[l].send(answers[l], clients[l]);
      }
    }
  }
  return losses;
}

}  // namespace rdmakit
