#include "lib/send_bw/send_bw_session.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lib/base/error.hpp"
#include "lib/base/process_limits.hpp"
#include "lib/rdma/device_query.hpp"
#include "lib/rdma/endpoint.hpp"
#include "lib/send_bw/device_needs.hpp"
#include "lib/send_bw/gid_index_check.hpp"
#include "lib/send_bw/port_counters.hpp"

namespace rdmakit {

namespace {

// Sends a latency test may have unaccounted for (the loops signal one in 16).
constexpr std::uint32_t latency_send_depth = 64;

// The local address to bind, and what is wrong with the -x entry it came from, if anything.
struct LocalAddress {
  std::string address;
  std::optional<std::string> warning;
};

// -x: the address rdma_cm must use so that the connection runs on that GID. An entry no
// routed network reaches is warned about and still used; an empty one is an error that names
// the entry to use. `peer`: the client's numeric server address, whose family the advice
// prefers.
LocalAddress address_of_gid(const BwSettings& s, const std::string& peer) {
  const DeviceContext device(s.device);
  const auto index = *s.gid_index;
  const auto port = static_cast<std::uint8_t>(s.ib_port);  // 1 to 255: -i's range
  const auto table = query_gid_port(device.get(), port);
  GidEntry entry;
  try {
    entry = query_gid(device.get(), port, index);
  } catch (const UsageError& error) {
    throw UsageError(fmt::format("-x {}: {}; {}", index, error.what(), routable_gid_advice(table, index, peer)));
  }
  LocalAddress local{.address = gid_address(entry), .warning = gid_index_warning(table, index, peer)};
  spdlog::debug("-x {}: {} GID {} ({}) is address {}", index, device.name(), entry.gid, entry.type, local.address);
  if (local.warning) spdlog::warn("{}", *local.warning);
  return local;
}

// The local address: --bind, or the address of the -x GID, or none.
LocalAddress local_address(const BwSettings& s, const std::string& peer) {
  if (s.gid_index) return address_of_gid(s, peer);
  if (!s.device.empty()) {
    // A -d that names no device at all is refused with the devices present, before the
    // address is resolved and only "served by" another device could be said about it.
    const DeviceContext device(s.device);
  }
  return {.address = s.bind, .warning = std::nullopt};
}

// The client's source address (none: rdma_cm's choice), with -x's warning in the results.
std::optional<SocketAddress> client_source(const BwSettings& s, const SocketAddress& destination, BwResults& results) {
  const auto local = local_address(s, destination.host_string());
  if (local.warning) results.warnings.push_back(*local.warning);
  if (local.address.empty()) return std::nullopt;
  return parse_address(local.address, 0);
}

// What both sides share. The queue depths are those the device is checked against, before
// anything is made on it.
EndpointOptions endpoint_options(const BwSettings& s, const BwDeviceNeeds& limits) {
  EndpointOptions options;
  options.send_depth = limits.send_depth + limits.heartbeat_slots;
  options.recv_depth = limits.recv_depth;
  // READs in flight, as perftest keeps them: within what the device allows (the endpoint fits
  // them to it: cxgb4 takes 8).
  options.responder_resources = 16;
  options.initiator_depth = 16;
  options.limits = s.limits;
  options.type_of_service = s.traffic_class;
  options.ack_timeout = s.ack_timeout;
  options.retry_count = s.retry_count;
  options.datagram = s.datagram;
  options.buffer_memory = s.use_hugepages ? BufferMemory::huge_pages : BufferMemory::heap;
  options.check_device = [limits, core = s.pin_core, placed = s.placed](ibv_context* context, std::uint8_t port) {
    check_device_limits(context, port, limits);
    // Before the first connection's buffers are made: they follow the memory policy.
    if (core && !placed->has_value()) *placed = place_on_core(*core, ibv_get_device_name(context->device));
  };
  return options;
}

// What the connection ended up using, for the report (the automatic choice when no -x).
nlohmann::json path_json(const Endpoint& endpoint, bool datagram) {
  nlohmann::json path = {{"device", ibv_get_device_name(endpoint.context()->device)}, {"port", endpoint.port_num()}};
  if (datagram) {
    // A UD QP has no path of its own: its datagrams go at most at the port's MTU and the
    // path record's, nothing to retry.
    path["path_mtu"] = endpoint.datagram_mtu();
    return path;
  }
  // iWARP runs over TCP: its QP has no IB path MTU (ibv_query_qp leaves 0, which reads as 128).
  path["path_mtu"] = endpoint.caps().transport == Transport::iwarp
                         ? nlohmann::json(nullptr)
                         : nlohmann::json(mtu_bytes(endpoint.active_path_mtu()));
  const auto transport = endpoint.transport();
  path["traffic_class"] = transport.traffic_class;
  path["service_level"] = transport.service_level;
  path["ack_timeout"] = transport.ack_timeout;
  path["retry_count"] = transport.retry_count;
  path["rnr_retry"] = transport.rnr_retry;
  path["rnr_nak_timer"] = transport.rnr_nak_timer;
  if (const auto index = endpoint.source_gid_index()) {
    const auto entry = query_gid(endpoint.context(), endpoint.port_num(), *index);
    path["gid_index"] = *index;
    path["gid"] = entry.gid;
    path["gid_type"] = entry.type;
  }
  return path;
}

// --counters and --cpu-util: the port's counters and this process's CPU time taken before a
// row and again once it is done (also when it failed part way: the partial row gets them),
// the counters outside the measured time. ping() warms up inside, so a latency row's
// figures include its warm-up round trips.
class RowWatch {
 public:
  RowWatch(const BwSettings& s, const Endpoint& endpoint, BwResults& results)
      : counters_(s.counters),
        cpu_util_(s.cpu_util),
        device_(ibv_get_device_name(endpoint.context()->device)),
        port_(endpoint.port_num()),
        results_(results),
        rows_before_(rows()),
        row_done_(s.row_done) {
    if (counters_) {
      lifespan_ = counters_lifespan(device_, port_);
      before_ = read_port_counters(device_, port_);
      read_at_ = Clock::now();
    }
    cpu_ = CpuClock();
  }
  ~RowWatch() {
    if (rows() == rows_before_) return;
    if (cpu_util_) results_.row_cpu.push_back(cpu_.used());
    if (counters_) {
      // The kernel answers a second read within the lifespan from its cache: a row shorter
      // than that (a quick latency row) would show no change at all.
      std::this_thread::sleep_until(read_at_ + lifespan_ + std::chrono::milliseconds(1));
      results_.row_counters.push_back(counter_deltas(before_, read_port_counters(device_, port_)));
    }
    if (row_done_) row_done_(results_);
  }
  RowWatch(const RowWatch&) = delete;
  RowWatch& operator=(const RowWatch&) = delete;

 private:
  std::size_t rows() const { return results_.bandwidth.size() + results_.latency.size(); }
  bool counters_;
  bool cpu_util_;
  std::string device_;
  unsigned port_;
  BwResults& results_;
  std::size_t rows_before_;
  std::function<void(const BwResults&)> row_done_;
  PortCounters before_;
  std::chrono::milliseconds lifespan_{0};
  Clock::time_point read_at_;
  CpuClock cpu_;
};

// --rate-limit: the measured stream at `size` paced, signalled often enough (100 times a
// second at least) that the silence bound never mistakes the pacing for a dead peer.
StreamSettings paced(StreamSettings settings, const BwSettings& s, std::uint32_t size) {
  if (!s.rate_limit) return settings;
  const double rate = messages_per_s(*s.rate_limit, s.rate_units, size);
  settings.messages_per_s = rate;
  settings.signal_every = std::clamp(static_cast<std::uint32_t>(rate / 100), 1U, settings.signal_every);
  return settings;
}

// Where this side's buffers are: "huge_pages" (--use-hugepages) or "heap".
std::string buffer_memory_name(const BwSettings& s) {
  return s.use_hugepages ? "huge_pages" : "heap";
}

// How this side waits for completions: "events" (-e, or a server with nothing to answer:
// server_sleeps) or "poll".
std::string completion_mode(bool events) {
  return events ? "events" : "poll";
}

// Whether the server sleeps on its CQs for this client's test: with -e, or when the test
// leaves it nothing to answer (bw::server_idle).
bool server_sleeps(const BwSettings& s, const bw::Hello& first) {
  return s.events || bw::server_idle(first);
}

// "rxe0 port 1": the device and port an endpoint is on.
std::string port_name(const Endpoint& endpoint) {
  return fmt::format("{} port {}", ibv_get_device_name(endpoint.context()->device), endpoint.port_num());
}

// What says a client whose test the server never sees (bw::server_idle: one-sided WRITE and
// READ, atomics) is still at it once --timeout passes with nothing in the server's CQ. A
// bandwidth client of ours sends heartbeats (loops.hpp's Heartbeat), and from its first one
// on only they count. Before that, and for a latency client or an older one: the port's
// counters moved since the last look (packets in and out; another process's traffic on the
// port counts too, so beside other traffic such a client is not caught). Where the driver
// shows no counters nothing can tell: such a client is held until it disconnects, and the
// log says so. rdma_mesh bounds its clients' silence outright (bound_client_silence).
std::function<bool()> client_still_working(const BwSettings& s, const bw::Hello& first, const Endpoint& endpoint) {
  if (first.datagram || s.bound_client_silence || !bw::server_idle(first)) return {};
  std::string device = ibv_get_device_name(endpoint.context()->device);
  const unsigned port = endpoint.port_num();
  auto moved = counters_moved(device, port);
  if (!moved) {
    spdlog::info(
        "{} shows no counters: a {} client that sends no heartbeats and stops working is held until it "
        "disconnects",
        port_name(endpoint), bw::to_string(first.operation));
    return [] { return true; };
  }
  return moved;
}

// Latency tests and bidirectional SEND keep receives posted on the client; a datagram
// client, for the server's answers at the end of the stream.
std::uint32_t client_receives(const BwSettings& s) {
  if (s.test == bw::Test::latency) return latency_receives;
  if (s.datagram) return 4;
  // A SEND stream on iWARP takes the server's credit messages, one for each credit_batch of
  // its receives; at most stream_credits / credit_batch + 1 can be on their way before the
  // client reaps, and one that finds no receive ends the connection there (no RNR retry).
  constexpr std::uint32_t credit_receives = 2 * (bw::stream_credits / bw::credit_batch);
  return s.bidirectional ? s.depth : credit_receives;
}

// The connection's transport in the report.
const char* connection_name(bool datagram) {
  return datagram ? "UD" : "RC";
}

// -c UD, once the first connection shows the path (the port's MTU within the path record's):
// a sweep cut at its MTU (-a sweeps only that far), no size given: that MTU, one size given:
// checked against it (the port's alone was checked before; an IB switch may take less).
std::vector<std::uint32_t> datagram_sizes(std::vector<std::uint32_t> sizes, const Endpoint& endpoint,
                                          const std::string& server) {
  const auto mtu = endpoint.datagram_mtu();
  if (sizes.empty()) return {mtu};
  if (sizes.size() == 1 && sizes.front() > mtu) {
    throw UsageError(fmt::format("-c UD: -s {} is above the MTU of the path to {} ({} bytes); a datagram is one packet",
                                 sizes.front(), server, mtu));
  }
  std::erase_if(sizes, [mtu](std::uint32_t size) { return size > mtu; });
  if (sizes.size() > bw::max_datagram_rows) sizes.resize(bw::max_datagram_rows);
  return sizes;
}

// What a datagram side's buffers hold besides the messages: the counts at the end of the
// stream, and in front of what arrives, the GRH.
std::uint32_t datagram_room(std::uint32_t largest) {
  return std::max<std::uint32_t>(largest, bw::datagram_counts_max_size);
}

}  // namespace

ibv_mtu mtu_from_bytes(std::uint32_t bytes) {
  switch (bytes) {
    case 256: return IBV_MTU_256;
    case 512: return IBV_MTU_512;
    case 1024: return IBV_MTU_1024;
    case 2048: return IBV_MTU_2048;
    case 4096: return IBV_MTU_4096;
    default: throw UsageError(fmt::format("-m {}: the MTU must be 256, 512, 1024, 2048 or 4096", bytes));
  }
}

double messages_per_s(double rate, char units, std::uint32_t size) {
  switch (units) {
    case 'p': return rate;
    case 'g': return rate * 1e9 / 8 / size;
    default: return rate * 1048576.0 / size;
  }
}

namespace {

// What the client's loops take from the flags and the first connection.
// A SEND stream on iWARP, which has no RNR retry: paced by the server's credits (both ends
// decide by their own device; both ends of a connection have the same transport).
bool uses_credits(const Endpoint& endpoint, bw::Operation operation, bool bidirectional, bool datagram) {
  return endpoint.caps().transport == Transport::iwarp && operation == bw::Operation::send && !bidirectional &&
         !datagram;
}

// A one-sided bandwidth stream, which the server does not see: the client sends heartbeats
// (loops.hpp's Heartbeat), from a send slot of their own on the first queue pair.
bool sends_heartbeats(const BwSettings& s) {
  return s.test == bw::Test::bandwidth && s.operation != bw::Operation::send && !s.datagram;
}

LoopBasics loop_basics(const BwSettings& s, const Endpoint& first) {
  return {.max_inline_data = first.max_inline_data(), .limits = s.limits, .events = s.events};
}

// The bandwidth rows, each size's warm-up and measured stream; `sent` takes each lane's
// messages per size, warm-up included, also of a size a stop cut short.
void stream_rows(const BwSettings& s, const std::vector<std::uint32_t>& sizes, const std::vector<Lane>& lanes,
                 const Endpoint& first, AtomicCounters* counters, BwResults& results,
                 std::vector<std::vector<bw::SizeCount>>& sent) {
  std::vector<std::uint64_t> lane_sends(lanes.size(), 0);  // each lane's messages so far
  std::vector<SendCredits> credits(lanes.size());
  const bool credited = uses_credits(first, s.operation, s.bidirectional, s.datagram);
  if (credited) {
    spdlog::info(
        "iWARP has no RNR retry: each queue pair sends within the receives the server has posted ({} at "
        "first, granted {} at a time)",
        bw::stream_credits, bw::credit_batch);
  }
  std::optional<Heartbeat> heartbeat;
  if (sends_heartbeats(s)) heartbeat.emplace(heartbeat_period);
  const StreamSettings settings{.basics = loop_basics(s, first),
                                .lanes = lanes,
                                .operation = s.operation,
                                .depth = s.depth,
                                .signal_every = signal_interval(s.depth),
                                .bidirectional = s.bidirectional,
                                .messages_per_s = std::nullopt,
                                .interval = s.interval,
                                .intervals = &results.intervals,
                                .interval_done = s.interval_done,
                                .atomics = counters,
                                .lane_sends = &lane_sends,
                                .credits = credited ? &credits : nullptr,
                                .heartbeat = heartbeat ? &*heartbeat : nullptr};
  std::vector<BandwidthRow> warmup_rows;
  auto warmup = settings;
  warmup.intervals = nullptr;  // the warm-up is not measured
  for (const auto size : sizes) {
    const auto before = lane_sends;
    const auto count_sent = [&] {
      for (std::size_t l = 0; l < lanes.size(); ++l)
        sent[l].push_back({.size = size, .count = lane_sends[l] - before[l]});
    };
    try {
      if (s.warmup > 0) stream(warmup, size, Budget{.iterations = s.warmup, .duration = std::nullopt}, warmup_rows);
      const RowWatch watch(s, first, results);
      stream(paced(settings, s, size), size, s.budget, results.bandwidth);
    } catch (const RunStopped&) {
      count_sent();
      throw;
    }
    count_sent();
  }
}

// -c UD: a client stopped by Ctrl-C still tells the server what it sent, so that the server
// ends at once with the same counts rather than after its --timeout of silence. A second
// at most, which a second Ctrl-C does not cut short; the stop is reported however it goes.
void tell_counts_after_stop(const std::vector<Lane>& lanes, const std::vector<std::vector<bw::SizeCount>>& sent,
                            const RunLimits& limits, BwResults& results) {
  const RunLimits brief{.stop_fd = -1, .timeout = std::min(limits.timeout, std::chrono::milliseconds(1000))};
  try {
    results.datagrams = exchange_datagram_counts(lanes, sent, brief);
  } catch (const std::exception& error) {
    spdlog::debug("the datagram counts after the stop: {}", error.what());
  }
}

// The client's rows over its connected lanes: the latency or bandwidth loops at each size,
// and for atomics the counters read back at the end.
void measure_rows(const BwSettings& s, const std::vector<std::uint32_t>& sizes, const std::vector<Lane>& lanes,
                  const Endpoint& first, BwResults& results) {
  std::optional<AtomicCounters> atomics;
  if (s.operation == bw::Operation::atomic) {
    atomics = AtomicCounters{.kind = s.atomic, .done = std::vector<std::uint64_t>(lanes.size(), 0)};
    results.test["atomic"] = {{"kind", to_string(s.atomic)}};
  }
  AtomicCounters* counters = atomics ? &*atomics : nullptr;
  // -c UD: each lane's messages per size, warm-up included.
  std::vector<std::vector<bw::SizeCount>> sent(lanes.size());
  try {
    if (s.test == bw::Test::latency) {
      const PingSettings settings{.basics = loop_basics(s, first),
                                  .lane = lanes.front(),
                                  .operation = s.operation,
                                  .histogram = s.histogram,
                                  .atomics = counters,
                                  .datagrams_sent = s.datagram ? &sent.front() : nullptr};
      for (const auto size : sizes) {
        const RowWatch watch(s, first, results);
        ping(settings, size, s.budget, s.warmup, results.latency);
      }
    } else {
      stream_rows(s, sizes, lanes, first, counters, results, sent);
    }
  } catch (const RunStopped& stopped) {
    if (s.datagram && stopped.reason() == StopReason::interrupted)
      tell_counts_after_stop(lanes, sent, s.limits, results);
    throw;
  }
  // The server counts what arrived: both sides learn what was lost.
  if (s.datagram) results.datagrams = exchange_datagram_counts(lanes, sent, s.limits);
  if (atomics) {
    // The results checked: each counter on the server holds the operations done on it.
    check_atomic_counters(lanes, *atomics, s.limits);
    results.test["atomic"]["counters"] = atomics->done;
    results.test["atomic"]["byte_order"] = to_string(atomics->order);
    if (atomics->order == AtomicByteOrder::swapped) {
      spdlog::warn(
          "the server's device keeps its atomic counters big-endian: every value came back byte-swapped "
          "(counted as right; a program reading them must swap them too)");
    }
  }
}

// The data buffers' ordering flag: relaxed unless --disable-pcie-relaxed.
int data_ordering(const BwSettings& s) {
  return s.disable_pcie_relaxed ? 0 : IBV_ACCESS_RELAXED_ORDERING;
}

// One queue pair of the client: its buffers, its hello, its receives posted, connected, and
// the server's buffer (or, for datagrams, the server's address) in its lane.
Lane connect_lane(Endpoint& endpoint, const BwSettings& s, std::uint32_t largest, std::uint16_t index,
                  std::uint32_t receives, Report& report) {
  // Datagrams: room for the counts at the end, and in front of what arrives the GRH. Without
  // immediate data, room for the size message that answers an announcement.
  const bool immediate_data = has_immediate_data(endpoint.caps());
  const auto outgoing_size = s.datagram ? datagram_room(largest) : largest;
  const auto incoming_size = s.datagram       ? grh_bytes + datagram_room(largest)
                             : immediate_data ? largest
                                              : std::max(largest, static_cast<std::uint32_t>(bw::size_message_bytes));
  // An iWARP READ's sink is written by the peer's read response, as an RDMA WRITE would be.
  const bool read_sink = s.operation == bw::Operation::read && read_sink_needs_remote_write(endpoint.caps());
  const int ordering = data_ordering(s);
  auto& outgoing =
      endpoint.add_buffer(outgoing_size, IBV_ACCESS_LOCAL_WRITE | (read_sink ? IBV_ACCESS_REMOTE_WRITE : 0) | ordering);
  auto& incoming = endpoint.add_buffer(incoming_size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | ordering);
  const bw::Hello hello{.operation = s.operation,
                        .test = s.test,
                        .max_size = largest,
                        .depth = s.depth,
                        .bidirectional = s.bidirectional,
                        .datagram = s.datagram,
                        .path_mtu = static_cast<std::uint8_t>(s.mtu.value_or(static_cast<ibv_mtu>(0))),
                        .queue_pairs = s.queue_pairs,
                        .queue_pair_index = index,
                        .reply_address = incoming.address(),
                        .reply_rkey = incoming.rkey(),
                        .reply_length = largest};
  const auto hello_bytes = bw::encode(hello);
  endpoint.set_private_data({hello_bytes.begin(), hello_bytes.end()});
  Lane lane{.qp = endpoint.queue_pair(),
            .cq = endpoint.completion_queue(),
            .local_address = outgoing.address(),
            .lkey = outgoing.lkey(),
            .receive_address = incoming.address(),
            .receive_lkey = incoming.lkey(),
            .receive_length = incoming_size,
            .peer = {},
            .immediate_data = immediate_data};
  post_receives(lane, receives);  // before connecting: the server may answer at once
  endpoint.connect(report.step_events());
  if (const auto peer = endpoint.datagram_peer()) {
    lane.peer = {.ah = peer->ah, .qp_num = peer->qp_num, .qkey = peer->qkey};
  }
  const auto answer = bw::decode_answer(endpoint.peer_private_data());
  if (answer.length < largest) {
    throw ProtocolError(fmt::format("the server's buffer holds {} bytes, {} needed", answer.length, largest));
  }
  lane.remote_address = answer.address;
  lane.rkey = answer.rkey;
  return lane;
}

}  // namespace

void run_bw_client(const BwSettings& s, Report& report, BwResults& results) {
  const bool latency = s.test == bw::Test::latency;
  auto sizes = s.sizes;
  // A datagram sweep is cut at the MTU once the device is known, and without sizes the
  // size is that MTU; one size given must fit it.
  const bool datagram_sweep = s.datagram && sizes.size() > 1;
  const bool size_from_mtu = s.datagram && sizes.empty();
  auto options = endpoint_options(s, BwDeviceNeeds{.device = s.device,
                                                   .send_depth = latency ? latency_send_depth : s.depth,
                                                   .recv_depth = client_receives(s),
                                                   .heartbeat_slots = sends_heartbeats(s) ? 1U : 0U,
                                                   .largest = size_from_mtu    ? 1
                                                              : datagram_sweep ? sizes.front()
                                                                               : sizes.back(),
                                                   .mtu = s.mtu,
                                                   .atomics = s.operation == bw::Operation::atomic,
                                                   .datagram = s.datagram});
  // A latency test also sends its size messages inline where there is no immediate data
  // (iWARP): control messages, whatever -I says of the measured ones.
  options.max_inline_data = std::max(bw::carries_payload(s.operation) ? s.inline_size : 0U,
                                     latency ? static_cast<std::uint32_t>(bw::size_message_bytes) : 0U);
  options.self_managed_qp = s.mtu.has_value();
  options.path_mtu = s.mtu;
  options.explain_rejection = [](std::span<const std::uint8_t> data) {
    if (const auto reason = decode_refusal(data)) {
      throw ProtocolError("the server refused the test: " + *reason);
    }
  };
  const auto destination = parse_address(s.server, s.port);
  const auto source = client_source(s, destination, results);

  std::vector<std::unique_ptr<Endpoint>> endpoints;
  std::vector<Lane> lanes;
  for (std::uint16_t index = 0; index < s.queue_pairs; ++index) {
    auto endpoint = Endpoint::resolve(source ? &*source : nullptr, destination, options, report.step_events());
    if (index == 0 && s.datagram) sizes = datagram_sizes(std::move(sizes), *endpoint, s.server);
    lanes.push_back(connect_lane(*endpoint, s, sizes.back(), index, options.recv_depth, report));
    endpoints.push_back(std::move(endpoint));
  }
  report.local_address = endpoints.front()->local_address();
  report.peer_address = endpoints.front()->peer_address();
  results.test = {{"test", bw::to_string(s.test)},
                  {"operation", bw::to_string(s.operation)},
                  {"connection", connection_name(s.datagram)},
                  {"queue_pairs", s.queue_pairs},
                  {"bidirectional", s.bidirectional},
                  {"depth", latency ? 1 : s.depth},
                  {"signal_every", latency ? latency_signal_every : signal_interval(s.depth)},
                  {"inline_bytes", endpoints.front()->max_inline_data()},
                  {"warmup_iterations", s.warmup},
                  {"completion", completion_mode(s.events)},
                  {"buffers", buffer_memory_name(s)},
                  {"path", path_json(*endpoints.front(), s.datagram)}};
  if (s.budget.duration) {
    results.test["duration_s"] = std::chrono::duration<double>(*s.budget.duration).count();
  }
  if (s.rate_limit) results.test["rate_limit"] = {{"rate", *s.rate_limit}, {"units", std::string(1, s.rate_units)}};
  if (s.placed->has_value()) results.test["placement"] = (*s.placed)->to_json();
  measure_rows(s, sizes, lanes, *endpoints.front(), results);
  for (auto& endpoint : endpoints) endpoint->disconnect();
}

namespace {

// "64 MiB", "1.5 MiB", "4096 B": a refusal's figures, short enough for a CM reject.
std::string memory_text(std::uint64_t bytes) {
  constexpr std::uint64_t mib = 1U << 20;
  if (bytes < mib) return fmt::format("{} B", bytes);
  if (bytes % mib == 0) return fmt::format("{} MiB", bytes / mib);
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / static_cast<double>(mib));
}

// The buffer the server registers for each of a client's queue pairs, which its messages
// land in: without immediate data, with room for the size messages of a latency test.
std::uint32_t receive_bytes(const bw::Hello& hello, bool immediate_data) {
  if (hello.datagram) return grh_bytes + datagram_room(hello.max_size);
  return immediate_data ? hello.max_size : std::max(hello.max_size, static_cast<std::uint32_t>(bw::size_message_bytes));
}

// All a client's queue pairs make the server register: each one's receive buffer, and for a
// datagram client the one it sends from besides.
std::uint64_t client_bytes(const bw::Hello& hello, bool immediate_data) {
  const std::uint64_t lane =
      std::uint64_t{receive_bytes(hello, immediate_data)} + (hello.datagram ? datagram_room(hello.max_size) : 0U);
  return lane * hello.queue_pairs;
}

// Why a connection request cannot join: ProtocolError with the reason the client is sent.
// `first` is the hello of the client's first connection, once there is one.
bw::Hello admit(Endpoint& request, const BwSettings& s, const std::optional<bw::Hello>& first,
                std::size_t lanes_accepted) {
  const auto hello = bw::decode_hello(request.peer_private_data());
  if (hello.datagram != s.datagram) {
    // Each listens in its own port space, so only a foreign client gets this far.
    throw ProtocolError(fmt::format("this server runs -c {}", connection_name(s.datagram)));
  }
  if (hello.max_size > s.max_size) {
    throw ProtocolError(
        fmt::format("{}-byte messages asked for; this server allows {} (--max-size)", hello.max_size, s.max_size));
  }
  // Before a byte is registered: what the first connection's hello says all of them will take.
  if (const auto asked = client_bytes(hello, has_immediate_data(request.caps()));
      !first && s.max_memory && asked > *s.max_memory) {
    throw ProtocolError(fmt::format("{} of buffers asked for ({} queue pairs); this server allows {} (--max-memory)",
                                    memory_text(asked), hello.queue_pairs, memory_text(*s.max_memory)));
  }
  if (hello.path_mtu != 0) {
    ibv_port_attr port{};
    if (ibv_query_port(request.context(), request.port_num(), &port) == 0 && hello.path_mtu > port.active_mtu) {
      throw ProtocolError(fmt::format("-m {} is above this server's active MTU ({} bytes)",
                                      mtu_bytes(static_cast<ibv_mtu>(hello.path_mtu)), mtu_bytes(port.active_mtu)));
    }
  }
  if (hello.operation == bw::Operation::atomic) {
    ibv_device_attr device{};
    const std::string name = ibv_get_device_name(request.context()->device);
    // A refusal either way: the client hears why.
    if (ibv_query_device(request.context(), &device) != 0) {
      throw ProtocolError(std::string("ibv_query_device failed: ") + std::strerror(errno));
    }
    if (const auto missing = atomics_missing(device, name)) throw ProtocolError(*missing);
  }
  if (first && (hello.operation != first->operation || hello.test != first->test || hello.max_size != first->max_size ||
                hello.queue_pairs != first->queue_pairs || hello.bidirectional != first->bidirectional ||
                hello.path_mtu != first->path_mtu || hello.queue_pair_index != lanes_accepted)) {
    throw ProtocolError(
        fmt::format("connection {} of {} does not match the first one", hello.queue_pair_index, hello.queue_pairs));
  }
  return hello;
}

// Connection requests taken off the listener that belong to clients still waiting their turn.
using WaitingClients = std::deque<std::unique_ptr<Endpoint>>;

std::unique_ptr<Endpoint> next_client(Listener& listener, WaitingClients& waiting,
                                      std::optional<Clock::time_point> deadline) {
  if (waiting.empty()) return listener.next_request(deadline);
  auto request = std::move(waiting.front());
  waiting.pop_front();
  return request;
}

void refuse(Endpoint& request, const std::string& reason, BwResults& results) {
  spdlog::warn("refused {}: {}", request.peer_address(), reason);
  request.reject(encode_refusal(reason));
  results.refuse({.peer = request.peer_address(), .reason = reason});
}

// The client's test once its connections are up: answer its pings, or take (and reflect)
// its messages, until it disconnects. A datagram (-c UD) client has no connection to lose:
// its test ends with each stream's end message, which is answered with what arrived, or
// with silence.
void serve_test(const bw::Hello& first, const std::vector<Lane>& lanes,
                const std::vector<std::unique_ptr<Endpoint>>& endpoints, const BwSettings& s, BwResults& results) {
  // Every endpoint's CM events taken, not only up to the first still connected: an event
  // left in a channel would keep the -e loops' sleep waking at once.
  PeerWatch peer{.connected =
                     [&] {
                       bool any = false;
                       for (const auto& e : endpoints) any = e->poll_connected() || any;
                       return any;
                     },
                 .silence = s.limits.timeout,
                 .still_working = client_still_working(s, first, *endpoints.front()),
                 .still_working_sign = port_name(*endpoints.front()) + "'s counters",
                 .cm_fds = {}};
  peer.cm_fds.reserve(endpoints.size());
  for (const auto& e : endpoints) peer.cm_fds.push_back(e->cm_fd());
  const LoopBasics basics{
      .max_inline_data = endpoints.front()->max_inline_data(), .limits = s.limits, .events = server_sleeps(s, first)};
  std::vector<DatagramTally> tallies(first.datagram ? lanes.size() : 0);
  std::vector<DatagramReturn> returns;
  returns.reserve(endpoints.size());
  for (const auto& endpoint : endpoints) {
    returns.push_back({.pd = endpoint->protection_domain(), .port = endpoint->port_num()});
  }
  if (first.test == bw::Test::latency) {
    results.answered = answer_pings(AnswerSettings{.basics = basics,
                                                   .peer = peer,
                                                   .lane = lanes.front(),
                                                   .operation = first.operation,
                                                   .datagram = first.datagram ? &tallies.front() : nullptr,
                                                   .reply_from = returns.front()});
  } else {
    sink(SinkSettings{.basics = basics,
                      .peer = peer,
                      .lanes = lanes,
                      .depth = s.depth,
                      .reflect = first.bidirectional,
                      .credits = uses_credits(*endpoints.front(), first.operation, first.bidirectional, first.datagram),
                      .datagrams = first.datagram ? &tallies : nullptr,
                      .one_sided = first.operation != bw::Operation::send},
         results.bandwidth);
  }
  if (first.datagram) results.datagrams = answer_datagram_counts(lanes, returns, tallies, s.limits);
}

// A connection's lane and the answer that tells the client of its buffer: one zeroed
// buffer (an atomics client's counter starts at 0) that takes the messages and is written
// or read; for datagrams (the message and its GRH in the buffer), another for what it
// sends: latency answers and the counts at the end of the stream.
struct ServerLane {
  Lane lane;
  bw::Answer answer;
};
ServerLane server_lane(Endpoint& endpoint, const bw::Hello& hello, int ordering) {
  const int atomic_access = hello.operation == bw::Operation::atomic ? IBV_ACCESS_REMOTE_ATOMIC : 0;
  const bool immediate_data = has_immediate_data(endpoint.caps());
  const auto size = receive_bytes(hello, immediate_data);
  auto& buffer = endpoint.add_buffer(
      size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | atomic_access | ordering);
  const auto& outgoing =
      hello.datagram ? endpoint.add_buffer(datagram_room(hello.max_size), IBV_ACCESS_LOCAL_WRITE) : buffer;
  return {.lane = {.qp = endpoint.queue_pair(),
                   .cq = endpoint.completion_queue(),
                   .local_address = outgoing.address(),
                   .lkey = outgoing.lkey(),
                   .remote_address = hello.reply_address,
                   .rkey = hello.reply_rkey,
                   .receive_address = buffer.address(),
                   .receive_lkey = buffer.lkey(),
                   .receive_length = size,
                   .peer = {},
                   .immediate_data = immediate_data},
          .answer = {.address = buffer.address(), .rkey = buffer.rkey(), .length = hello.max_size}};
}

// A request admit() turned down while a client's queue pairs were being accepted: when it
// is another client's first connection, it joins `waiting` (true); otherwise it is refused.
bool queue_another_client(std::unique_ptr<Endpoint>& endpoint, const std::optional<bw::Hello>& first,
                          WaitingClients& waiting) {
  bool another_client = false;
  try {
    another_client = first && bw::decode_hello(endpoint->peer_private_data()).queue_pair_index == 0;
  } catch (const ProtocolError&) {
    another_client = false;  // not our hello: refused below like any stranger
  }
  if (another_client) waiting.push_back(std::move(endpoint));
  return another_client;
}

// Accepts an admitted request: its lane, with receives posted before the accept so that
// the first SEND never meets an empty queue, and the answer that tells of its buffer.
Lane accept_lane(Endpoint& endpoint, const bw::Hello& hello, const BwSettings& s, Report& report) {
  if (hello.path_mtu != 0) endpoint.set_path_mtu(static_cast<ibv_mtu>(hello.path_mtu));
  const auto [lane, buffer_answer] = server_lane(endpoint, hello, data_ordering(s));
  // A stream's server keeps at least perftest's receive depth posted: a datagram that finds
  // none is dropped, and a SEND that finds none stalls its sender for an RNR NAK timer
  // (0.64 ms; with 128 posted for 128 in flight, a stall at every refill), or, on iWARP,
  // which has no RNR retry, breaks the connection (so there the client sends on credits).
  post_receives(lane, hello.test == bw::Test::latency ? latency_receives : std::max(s.depth, bw::stream_credits));
  const auto answer = bw::encode(buffer_answer);
  endpoint.set_private_data({answer.begin(), answer.end()});
  endpoint.accept(report.step_events());
  return lane;
}

// One client: accepts `first_request` and the rest of its queue pairs, then receives,
// reflects or answers until it leaves. False when the first request was refused (nothing
// ran). Another client's first connection arriving meanwhile joins `waiting`: a bandwidth
// server measures one test at a time.
bool serve_bw_client(Listener& listener, std::unique_ptr<Endpoint> first_request, WaitingClients& waiting,
                     const BwSettings& s, Report& report, BwResults& results) {
  std::vector<std::unique_ptr<Endpoint>> endpoints;
  std::vector<Lane> lanes;
  std::optional<bw::Hello> first;
  while (!first || lanes.size() < first->queue_pairs) {
    auto endpoint = first ? listener.next_request(Clock::now() + s.limits.timeout) : std::move(first_request);
    bw::Hello hello;
    try {
      hello = admit(*endpoint, s, first, lanes.size());
    } catch (const ProtocolError& refusal) {
      if (queue_another_client(endpoint, first, waiting)) continue;
      refuse(*endpoint, refusal.what(), results);
      if (first) throw;  // a client's later connection went wrong: the test cannot run
      return false;
    }
    if (!first) first = hello;
    lanes.push_back(accept_lane(*endpoint, hello, s, report));
    endpoints.push_back(std::move(endpoint));
    if (lanes.size() == 1) report.peer_address = endpoints.front()->peer_address();
  }
  results.test = {{"test", bw::to_string(first->test)},
                  {"operation", bw::to_string(first->operation)},
                  {"connection", connection_name(first->datagram)},
                  {"queue_pairs", first->queue_pairs},
                  {"bidirectional", first->bidirectional},
                  {"client_depth", first->depth},
                  {"max_size", first->max_size},
                  {"completion", completion_mode(server_sleeps(s, *first))},
                  {"buffers", buffer_memory_name(s)},
                  {"path", path_json(*endpoints.front(), s.datagram)}};
  if (s.placed->has_value()) results.test["placement"] = (*s.placed)->to_json();
  const CpuClock cpu;
  serve_test(*first, lanes, endpoints, s, results);
  if (s.cpu_util) {
    std::uint64_t messages = results.answered;
    for (const auto& row : results.bandwidth) messages += row.iterations;
    results.test["cpu"] = cpu_json(cpu.used(), messages);
  }
  return true;
}

// Persistent (-P): one client after another until the stop signal, or until no client came
// for --accept-timeout; each client's failure is its own record, never the server's end.
void serve_bw_clients(Listener& listener, const BwSettings& s, Report& report, BwResults& results) {
  WaitingClients waiting;
  for (;;) {
    std::unique_ptr<Endpoint> request;
    try {
      const auto idle = s.accept_timeout ? std::optional(Clock::now() + *s.accept_timeout) : std::nullopt;
      request = next_client(listener, waiting, idle);
    } catch (const RunStopped& stopped) {
      stop_serving(stopped, report);
      return;
    }
    BwResults client;
    Report client_report;  // steps of one client; the server reports totals
    bool refused = false;
    auto served =
        serve_recorded({.peer = request->peer_address(), .serve = [&](ServedConnection&) {
                          refused = !serve_bw_client(listener, std::move(request), waiting, s, client_report, client);
                        }});
    for (const auto& row : client.bandwidth) {
      served.iterations += row.iterations;
      served.bytes += row.bytes;
    }
    served.iterations += client.answered;
    for (const auto& refusal : client.refused.entries()) results.refuse(refusal);
    if (!refused) {
      report.iterations_completed += served.iterations;
      report.bytes += served.bytes;
      if (auto oldest = results.clients.add({.record = served, .test = client.test})) {
        results.earlier_clients.fold(oldest->record);
      }
    }
    if (served.outcome == Outcome::interrupted) {
      report.outcome = served.outcome;
      return;
    }
  }
}

}  // namespace

BwServer::BwServer(const BwSettings& s, Report& report) : settings_(s) {
  if (!settings_.max_memory) settings_.max_memory = pinnable_bytes().value_or(default_max_memory);
  // Reflected messages (bidirectional) or answers and announcements (latency, whatever -t says).
  auto options =
      endpoint_options(s, BwDeviceNeeds{.device = s.device,
                                        .send_depth = std::max(s.depth, latency_send_depth),
                                        .recv_depth = std::max({s.depth, latency_receives, bw::stream_credits}),
                                        .largest = 1,
                                        .mtu = std::nullopt});
  // iWARP's credit messages go inline (bw::credit_message_bytes), whatever -I says.
  options.max_inline_data = std::max(s.inline_size, static_cast<std::uint32_t>(bw::credit_message_bytes));
  options.self_managed_qp = !s.datagram;  // so the client's -m can set the path MTU
  const auto local = local_address(s, "");
  gid_warning_ = local.warning;
  const auto address = parse_address(local.address.empty() ? "0.0.0.0" : local.address, s.port);
  const StepTimer timer(Step::listen);
  listener_ = std::make_unique<Listener>(address, s.persistent ? 64 : bw::max_queue_pairs, options);
  gate_ = std::make_shared<PeerGate>(s.peers);
  listener_->admit_through(gate_);
  report.add_timing(timer.span());
  report.local_address = listener_->local_address();
}

BwServer::~BwServer() = default;

void BwServer::serve_one(Report& report, BwResults& results, std::optional<Clock::time_point> deadline) {
  if (gid_warning_) results.warnings.push_back(*gid_warning_);
  WaitingClients waiting;
  // A client refused at its first connection ran nothing: wait for the next one.
  while (
      !serve_bw_client(*listener_, next_client(*listener_, waiting, deadline), waiting, settings_, report, results)) {
  }
}

void BwServer::serve_persistently(Report& report, BwResults& results) {
  if (gid_warning_) results.warnings.push_back(*gid_warning_);
  serve_bw_clients(*listener_, settings_, report, results);
}

void run_bw_server(const BwSettings& s, Report& report, BwResults& results) {
  BwServer server(s, report);
  const RefusalsToReport refusals(server.gate(), report);
  if (s.persistent) {
    server.serve_persistently(report, results);
  } else {
    server.serve_one(report, results,
                     s.accept_timeout ? std::optional(Clock::now() + *s.accept_timeout) : std::nullopt);
  }
}

}  // namespace rdmakit
