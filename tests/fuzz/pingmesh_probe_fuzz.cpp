// rdma_pingmesh: every datagram its UD QP receives is decoded before anything else looks at
// it, and anyone on the fabric can send one. The input is a receive buffer's bytes after the
// GRH; the decoded answer then goes to the path whose probe it names.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_support.hpp"
#include "lib/pingmesh/pingmesh_path.hpp"
#include "lib/pingmesh/pingmesh_probe.hpp"
#include "lib/rdma/completion_clock.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rdmakit::pingmesh;
  const std::span<const std::uint8_t> bytes(data, size);
  const DecodedProbe decoded = decode_probe(bytes);
  if (decoded.outcome != ProbeDecode::ok) {
    FUZZ_CHECK(size < probe_size || decoded.outcome != ProbeDecode::short_datagram);
    return 0;
  }
  const ProbeMessage& message = decoded.message;
  FUZZ_CHECK(size >= probe_size);
  // A message taken re-encodes to its own bytes, whatever follows them.
  const auto again = encode(message);
  FUZZ_CHECK(std::equal(again.begin(), again.end(), bytes.begin()));
  FUZZ_CHECK(decode_probe(again).message == message);
  if (message.kind == ProbeKind::probe) {
    FUZZ_CHECK(message.responder_received_ns == 0 && message.responder_sent_ns == 0);
    return 0;
  }
  FUZZ_CHECK(message.responder_delay_ns() < max_responder_delay_ns);
  if (message.kind == ProbeKind::stamps) {
    // Stamps for a path whose one probe was answered and waits for them: taken at most once,
    // and only as that answer's; the window counts one round trip whatever they claimed.
    PathProbes stamped(message.session, 1'000'000'000, rdmakit::CompletionClock::nanoseconds());
    const auto first = stamped.next_probe(100);
    stamped.take_answer({first.session, first.sequence, first.sent_ns, 0}, 900, 800);
    stamped.take_stamps({first.session, first.sequence, first.sent_ns, 0});  // the peer stamps
    const auto probe = stamped.next_probe(1000);
    stamped.probe_left(probe.sequence, 1100);
    stamped.take_answer({probe.session, probe.sequence, probe.sent_ns, 0}, 5000, 4000);
    const AnswerFields stamps{message.session, message.sequence, message.prober_sent_ns, message.responder_delay_ns()};
    const bool taken = stamped.take_stamps(stamps);
    FUZZ_CHECK(!(taken && stamped.take_stamps(stamps)));
    const WindowFigures figures = stamped.close_window(2'000'000'000);
    FUZZ_CHECK(figures.answered == 2 && figures.device_samples <= 1 && figures.rtt && figures.rtt->count == 2);
    // Taken: on the device's clocks, unless the responder's delay leaves the device's 2900 ns
    // round trip no network time (stamps read wrong: the hosts' clocks). Not taken: missing.
    const bool consistent = message.responder_delay_ns() < 4000 - 1100;
    FUZZ_CHECK(figures.device_samples == (taken && consistent ? 1U : 0U));
    FUZZ_CHECK(figures.stamps_missing == (taken ? 0U : 1U));
    return 0;
  }
  // An answer to a path with three probes in flight: it matches at most one of them, and
  // the window's counts add up whatever it claimed.
  PathProbes path(message.session ^ 1U, 1'000'000'000);
  for (std::uint64_t sent_ns : {100U, 200U, 300U}) path.next_probe(sent_ns);
  const auto match =
      path.take_answer({message.session, message.sequence, message.prober_sent_ns, message.responder_delay_ns()},
                       message.prober_sent_ns + 1000);
  FUZZ_CHECK(match == PathProbes::Match::unexpected);  // another run's session
  PathProbes own(message.session, 1'000'000'000);
  for (std::uint64_t sent_ns : {100U, 200U, 300U}) own.next_probe(sent_ns);
  own.take_answer({message.session, message.sequence, message.prober_sent_ns, message.responder_delay_ns()}, 5000);
  const WindowFigures figures = own.close_window(5000);
  FUZZ_CHECK(figures.sent == 3 && figures.answered + figures.unexpected == 1 && figures.lost == 0);
  FUZZ_CHECK(own.in_flight() == 3 - figures.answered);
  return 0;
}
