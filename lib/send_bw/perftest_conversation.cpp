#include "lib/send_bw/perftest_conversation.hpp"

#include <algorithm>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lib/base/error.hpp"
#include "lib/net/stream_io.hpp"

namespace rdmakit::bw::perftest {

std::vector<Step> program_steps(Operation operation, Test test) {
  if (test == Test::latency && operation != Operation::send) {
    // ib_write_lat, ib_read_lat, ib_atomic_lat: record 0 first, the records, the records again
    // once connected (printed), the barrier, the run. ib_write_lat ends there: no close, its
    // socket closes as the process exits.
    std::vector<Step> steps{Step::records, Step::records, Step::connect, Step::records, Step::barrier, Step::run};
    if (operation != Operation::write) steps.push_back(Step::close);
    return steps;
  }
  if (operation == Operation::send) {
    // ib_send_bw and ib_send_lat alike: the records, a barrier once connected, the records
    // again (printed), the barrier that starts the run once every receive is posted, the close.
    return {Step::records, Step::connect, Step::barrier, Step::records, Step::barrier, Step::run, Step::close};
  }
  // ib_write_bw, ib_read_bw, ib_atomic_bw: the server stays passive, waiting in the barrier
  // after the run, which the client enters once its last completion is in.
  return {Step::records, Step::connect, Step::records, Step::barrier,
          Step::run,     Step::barrier, Step::results, Step::close};
}

Conversation::Conversation(int fd, bool client, std::chrono::milliseconds timeout, int stop_fd)
    : fd_(fd), client_(client), timeout_(timeout), stop_fd_(stop_fd) {}

std::vector<std::uint8_t> Conversation::exchange(std::span<const std::uint8_t> ours, std::size_t size,
                                                 const char* what) {
  const auto deadline = Clock::now() + timeout_;
  const auto too_slow = [&] {
    return RunStopped(StopReason::timed_out,
                      fmt::format("perftest's peer: no {} within {} ms", what, timeout_.count()));
  };
  const auto send = [&] {
    if (!tcp::send_bytes(fd_, {reinterpret_cast<const char*>(ours.data()), ours.size()}, deadline, stop_fd_)) {
      throw too_slow();
    }
  };
  std::vector<std::uint8_t> theirs(size);
  if (client_) send();
  if (tcp::receive_exactly(fd_, theirs, deadline, stop_fd_, fmt::format("perftest's {}", what)) < size)
    throw too_slow();
  if (!client_) send();
  return theirs;
}

Agreed Conversation::open(const Geometry& ours, int our_mtu) {
  Agreed agreed;
  agreed.peer = decode_version(exchange(encode_version(), version_size, "version"));
  Geometry theirs;
  theirs.page_size = decode_page_size(exchange(encode_size_field(ours.page_size), 4, "page size"));
  theirs.cache_line = decode_cache_line(exchange(encode_size_field(ours.cache_line), 4, "cache line size"));
  agreed.geometry = perftest::agreed(ours, theirs);
  agreed.mtu = std::min(our_mtu, decode_mtu(exchange(encode_mtu(our_mtu), 2, "path MTU")));
  return agreed;
}

std::vector<Destination> Conversation::exchange_records(const std::vector<Destination>& ours, bool with_gid) {
  const auto size = with_gid ? record_size_with_gid : record_size;
  std::vector<Destination> theirs;
  for (const auto& record : ours) {
    const auto bytes = exchange(encode(record), size, "destination record");
    theirs.push_back(decode_destination(bytes, with_gid));
    if (!first_peer_record_) first_peer_record_ = bytes;
  }
  return theirs;
}

void Conversation::barrier(const Destination& ours, bool with_gid) {
  const auto bytes = exchange(encode(ours), with_gid ? record_size_with_gid : record_size, "barrier");
  decode_destination(bytes, with_gid);
  if (first_peer_record_ && bytes != *first_peer_record_) {
    throw ProtocolError(
        "perftest's peer sent another record at a barrier than before: it runs another program or other flags "
        "(-q, -a, -b)");
  }
}

void Conversation::send_results(const Results& results) {
  for (const auto& field : encode(results)) exchange(field, results_field_size, "answer to our results");
}

Results Conversation::receive_results() {
  // What perftest's client ignores in our answers: zeros.
  const std::array<std::uint8_t, results_field_size> nothing{};
  std::array<std::array<std::uint8_t, results_field_size>, results_fields> fields{};
  for (auto& field : fields) {
    const auto bytes = exchange(nothing, results_field_size, "results");
    std::copy(bytes.begin(), bytes.end(), field.begin());
  }
  return decode_results(fields);
}

void Conversation::close(const Destination& ours, bool with_gid) {
  barrier(ours, with_gid);
  const auto deadline = Clock::now() + timeout_;
  const auto done = std::string_view(reinterpret_cast<const char*>(done_message.data()), done_message.size());
  try {
    tcp::send_bytes(fd_, done, deadline, stop_fd_);
    // Its "done" (4.5-0.17) or nothing (newer), then the end of its connection.
    std::string tail;
    while (tail.size() <= done_message.size()) {
      const auto got = tcp::receive_some(fd_, tail, done_message.size() + 1 - tail.size(), deadline, stop_fd_);
      if (!got || *got == 0) break;
    }
  } catch (const ProtocolError& gone) {
    // Everything it needed from us it had by then.
    spdlog::debug("perftest's peer had gone at the close: {}", gone.what());
  }
}

}  // namespace rdmakit::bw::perftest
