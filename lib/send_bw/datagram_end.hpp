#pragma once
// -c UD's end of a stream. A datagram stream has no disconnect to end it and no
// acknowledgement to say what arrived, so once its rows are done the client sends what it
// sent per size (bw::DatagramCounts `sent`) and the server answers with what arrived
// (`received`); the client then says `done`. Any of them may be lost: the client sends
// again every resend interval, the server answers every copy and lingers for the done, and
// each gives up within the run's timeout. Both sides then know what was lost.

#include <cstdint>
#include <memory>
#include <vector>

#include "lib/base/wait.hpp"
#include "lib/rdma/verbs.hpp"
#include "lib/send_bw/bw_messages.hpp"
#include "lib/send_bw/lane.hpp"

namespace rdmakit {

// One size's datagrams: sent by the client, received by the server (warm-up included).
struct DatagramLoss {
  std::uint32_t size = 0;
  std::uint64_t sent = 0;
  std::uint64_t received = 0;
  std::uint64_t lost() const { return sent > received ? sent - received : 0; }
  bool operator==(const DatagramLoss&) const = default;
};

// Adds one lane's counts to `losses` (one entry per size, in the order sizes first came).
void add_losses(std::vector<DatagramLoss>& losses, const std::vector<bw::SizeCount>& sent,
                const std::vector<bw::SizeCount>& received);

// The client, on each lane once its streams are done: tells the server `sent` (per lane) and
// returns the losses the server's answers imply. The lane's local buffer takes the message
// (bw::datagram_counts_max_size bytes); its receives take the answers. Throws RunStopped when
// no answer comes within the timeout, ProtocolError for one that does not decode.
std::vector<DatagramLoss> exchange_datagram_counts(const std::vector<Lane>& lanes,
                                                   const std::vector<std::vector<bw::SizeCount>>& sent,
                                                   const RunLimits& limits);

// The way back to the sender of a datagram that arrived on `lane` (`completion`, and the
// GRH in front of it): its address handle, kept in `handle`, its QP number, and the Q_Key,
// which rdma_cm gives both sides of its UDP port space alike.
DatagramAddress reply_address(const Lane& lane, const DatagramReturn& from, const ibv_wc& completion,
                              const ibv_grh& grh, std::unique_ptr<AddressHandle>& handle);

// The server, once sink() has taken every lane's end-of-stream message: answers each, then
// answers repeats until every client said done or nothing came for a while; returns the
// losses. ProtocolError for an end-of-stream message that does not decode.
std::vector<DatagramLoss> answer_datagram_counts(const std::vector<Lane>& lanes,
                                                 const std::vector<DatagramReturn>& returns,
                                                 std::vector<DatagramTally>& tallies, const RunLimits& limits);

}  // namespace rdmakit
