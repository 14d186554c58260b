#include "lib/send_bw/perftest_oob.hpp"

#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lib/base/error.hpp"
#include "lib/base/file_descriptor.hpp"
#include "lib/base/wait.hpp"
#include "lib/net/peer_gate.hpp"
#include "lib/net/stream_io.hpp"
#include "lib/rdma/cm.hpp"
#include "lib/rdma/gid.hpp"
#include "lib/rdma/verbs.hpp"
#include "lib/send_bw/loops.hpp"
#include "lib/send_bw/perftest_conversation.hpp"
#include "lib/send_bw/port_counters.hpp"
#include "lib/send_bw/send_bw_session.hpp"

namespace rdmakit {

namespace {

namespace perftest = bw::perftest;

// perftest's QP settings (perftest_resources.c): its responder's RNR timer, hop limit, and
// no end to RNR retries, so that a SEND stream waits for the server's reposted receives.
constexpr std::uint8_t min_rnr_timer = 12;
constexpr std::uint8_t hop_limit = 0xff;
constexpr std::uint8_t endless_rnr_retry = 7;
constexpr std::uint8_t default_ack_timeout = 14;

// Where our side of the run is: the device's port and, on RoCE (or InfiniBand with -x), the
// GID entry its packets carry.
struct LocalPort {
  std::uint8_t number = 1;
  ibv_port_attr attributes{};
  std::optional<GidEntry> gid;
};

// The address this host reaches the server from, as the kernel chose it for the TCP socket:
// the GID that holds it is the one to send from, as rdma_cm would have picked it.
std::string local_address_of(int fd) {
  sockaddr_storage storage{};
  socklen_t length = sizeof storage;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &length) != 0) return {};
  return address_of(reinterpret_cast<const sockaddr*>(&storage)).host_string();
}

// `reached`: how the address came, for the message when no GID holds it.
LocalPort choose_port(const BwSettings& s, const DeviceContext& device, const std::string& local_address,
                      std::string_view reached) {
  LocalPort local;
  local.number = static_cast<std::uint8_t>(s.ib_port);
  check_returned(ibv_query_port(device.get(), local.number, &local.attributes), "ibv_query_port",
                 fmt::format("{} port {}", device.name(), local.number));
  if (local.attributes.state != IBV_PORT_ACTIVE) {
    throw std::runtime_error(fmt::format("{} port {} is not active ({}): no run can start there", device.name(),
                                         local.number, ibv_port_state_str(local.attributes.state)));
  }
  if (s.gid_index) {
    local.gid = query_gid(device.get(), local.number, *s.gid_index);
    return local;
  }
  if (local.attributes.link_layer != IBV_LINK_LAYER_ETHERNET) return local;  // InfiniBand: the LID, as perftest
  const auto advice = advise_gid({query_gid_port(device.get(), local.number)}, local_address);
  if (!advice.entry) {
    throw UsageError(fmt::format("{} port {} holds no GID of {}, {}: give -x with the index to send from ({})",
                                 device.name(), local.number, local_address, reached, advice.reason));
  }
  local.gid = *advice.entry;
  return local;
}

std::array<std::uint8_t, 16> gid_bytes(const DeviceContext& device, std::uint8_t port, std::uint32_t index) {
  ibv_gid gid{};
  check_returned(ibv_query_gid(device.get(), port, static_cast<int>(index), &gid), "ibv_query_gid",
                 fmt::format("{} port {} index {}", device.name(), port, index));
  std::array<std::uint8_t, 16> bytes{};
  std::copy(std::begin(gid.raw), std::end(gid.raw), bytes.begin());
  return bytes;
}

// The peer may touch our buffer as its program does: what it asked for, for a READ or WRITE
// run; both our QPs' remote rights alike, as perftest grants them for its test.
int remote_access(bw::Operation operation) {
  switch (operation) {
    case bw::Operation::write: return IBV_ACCESS_REMOTE_WRITE;
    case bw::Operation::read: return IBV_ACCESS_REMOTE_READ;
    case bw::Operation::atomic: return IBV_ACCESS_REMOTE_ATOMIC;
    case bw::Operation::send: return IBV_ACCESS_REMOTE_WRITE;
  }
  return 0;
}

// One queue pair of ours: its CQ, its buffer (the messages we send or read into, then the
// region we offer the peer) and its record.
struct OobLane {
  std::unique_ptr<CompletionQueue> cq;
  std::unique_ptr<QueuePair> qp;
  std::unique_ptr<RegisteredBuffer> buffer;
  perftest::Destination record;
  std::uint32_t inline_bytes = 0;
};

void modify(ibv_qp* qp, ibv_qp_attr& attributes, int mask, const std::string& what) {
  check_returned(ibv_modify_qp(qp, &attributes, mask), "ibv_modify_qp", what);
}

// INIT, RTR and RTS from the peer's record, as perftest's ctx_connect does for its side.
void connect_qp(const OobLane& lane, const perftest::Destination& peer, const LocalPort& local, int mtu,
                std::uint8_t initiator_depth, const BwSettings& s, std::string_view peer_role) {
  ibv_qp* qp = lane.qp->get();
  ibv_qp_attr init{};
  init.qp_state = IBV_QPS_INIT;
  init.port_num = local.number;
  init.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | remote_access(s.operation);
  modify(qp, init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "RC QP to INIT");

  ibv_qp_attr rtr{};
  rtr.qp_state = IBV_QPS_RTR;
  rtr.path_mtu = static_cast<ibv_mtu>(mtu);
  rtr.dest_qp_num = peer.qpn;
  rtr.rq_psn = peer.psn;
  rtr.max_dest_rd_atomic = static_cast<std::uint8_t>(lane.record.out_reads);
  rtr.min_rnr_timer = min_rnr_timer;
  rtr.ah_attr.dlid = peer.lid;
  rtr.ah_attr.port_num = local.number;
  if (local.gid) {
    if (!peer.gid)
      throw ProtocolError(fmt::format("perftest's {} sent no GID, and ours is needed to reach it", peer_role));
    rtr.ah_attr.is_global = 1;
    std::copy(peer.gid->begin(), peer.gid->end(), std::begin(rtr.ah_attr.grh.dgid.raw));
    rtr.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(local.gid->index);
    rtr.ah_attr.grh.hop_limit = hop_limit;
    rtr.ah_attr.grh.traffic_class = s.traffic_class.value_or(0);
  }
  modify(qp, rtr,
         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
             IBV_QP_MIN_RNR_TIMER,
         fmt::format("RC QP to RTR (the {}'s record)", peer_role));

  ibv_qp_attr rts{};
  rts.qp_state = IBV_QPS_RTS;
  rts.timeout = s.ack_timeout.value_or(default_ack_timeout);
  rts.retry_cnt = s.retry_count;
  rts.rnr_retry = endless_rnr_retry;
  rts.sq_psn = lane.record.psn;
  rts.max_rd_atomic = initiator_depth;
  modify(qp, rts,
         IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
         "RC QP to RTS");
}

nlohmann::json path_of(const DeviceContext& device, const LocalPort& local, int mtu, const BwSettings& s) {
  nlohmann::json path = {{"device", device.name()},
                         {"port", local.number},
                         {"path_mtu", mtu_bytes(static_cast<ibv_mtu>(mtu))},
                         {"ack_timeout", s.ack_timeout.value_or(default_ack_timeout)},
                         {"retry_count", s.retry_count},
                         {"rnr_retry", endless_rnr_retry}};
  if (local.gid) {
    path["gid_index"] = local.gid->index;
    path["gid"] = local.gid->gid;
    path["gid_type"] = local.gid->type;
    path["traffic_class"] = s.traffic_class.value_or(0);
  }
  return path;
}

// Our queue pairs, each with its CQ, its buffer (the messages, then the region offered to
// the peer: perftest's, a page at least, whole cache lines) and its record.
// `receives`: the receive queue's depth (receive_depth).
std::vector<OobLane> make_lanes(const BwSettings& s, const DeviceContext& device, const ProtectionDomain& pd,
                                CompletionChannel& channel, const LocalPort& local,
                                const ibv_device_attr& device_attributes, std::uint64_t region,
                                std::uint32_t receives) {
  std::mt19937 random(std::random_device{}());
  std::vector<OobLane> lanes(s.queue_pairs);
  for (auto& lane : lanes) {
    lane.cq = std::make_unique<CompletionQueue>(device.get(), static_cast<int>(s.depth + receives), channel);
    auto attributes = qp_attributes({.type = IBV_QPT_RC,
                                     .send_depth = s.depth,
                                     .receive_depth = receives,
                                     .signal_every_send = false,
                                     .inline_bytes = 0},
                                    lane.cq->get());
    const auto wanted = bw::carries_payload(s.operation) ? s.inline_size : 0U;
    lane.inline_bytes = create_with_inline(
        wanted,
        [&](std::uint32_t inline_bytes) {
          attributes.cap.max_inline_data = inline_bytes;
          lane.qp = std::make_unique<QueuePair>(pd.get(), attributes);
        },
        device.name());
    lane.buffer = std::make_unique<RegisteredBuffer>(
        pd.get(), 2 * region, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    lane.record.lid = local.attributes.lid;
    // READs this side answers: what the device can (perftest offers the same for a READ run).
    lane.record.out_reads =
        s.operation == bw::Operation::read ? static_cast<std::uint16_t>(device_attributes.max_qp_rd_atom) : 1;
    lane.record.qpn = lane.qp->get()->qp_num;
    lane.record.psn = random() & 0xffffffU;
    lane.record.rkey = lane.buffer->rkey();
    lane.record.vaddr = lane.buffer->address() + region;
    if (local.gid) lane.record.gid = gid_bytes(device, local.number, local.gid->index);
  }
  return lanes;
}

// The receives a side keeps posted. The server of a SEND stream: -t, or perftest's server's
// 512 where that is more: its client keeps its -t of 128 sends in flight while the receives
// are reposted, and each one that finds none waits out an RNR timer (0.64 ms at perftest's
// 12). Either side of a SEND latency test: latency_receives, as send_bw's own. Else one,
// which nothing takes but the flush at the end (lib/send_bw/loops' sink).
std::uint32_t receive_depth(const BwSettings& s, bool client) {
  constexpr std::uint32_t perftest_receive_depth = 512;
  if (s.operation != bw::Operation::send) return 1;
  if (s.test == bw::Test::latency) return latency_receives;
  return client ? 1 : std::max(s.depth, perftest_receive_depth);
}

// The perftest program at the other end: ib_write_bw, ib_send_lat, ...
std::string perftest_program(const BwSettings& s) {
  return fmt::format("ib_{}_{}", bw::to_string(s.operation), s.test == bw::Test::latency ? "lat" : "bw");
}

// -s (-a: its largest, 8 MiB, which sizes the buffers as perftest's -a does), or perftest's
// default for the test: 64 KiB for bandwidth, 2 bytes for latency.
std::uint32_t message_size(const BwSettings& s) {
  if (!s.sizes.empty()) return s.sizes.back();
  return s.test == bw::Test::latency ? 2 : 65536;
}

// One of our QPs as the loops see it: the first half of its buffer is what it sends or reads
// into, the second (its record's vaddr) where the peer's messages and writes land; `theirs`:
// the peer's buffer, once its record came.
Lane lane_of(const OobLane& lane, std::uint64_t region, const perftest::Destination* theirs) {
  return Lane{.qp = lane.qp->get(),
              .cq = lane.cq->get(),
              .local_address = lane.buffer->address(),
              .lkey = lane.buffer->lkey(),
              .remote_address = theirs != nullptr ? theirs->vaddr : 0,
              .rkey = theirs != nullptr ? theirs->rkey : 0,
              .receive_address = lane.buffer->address() + region,
              .receive_lkey = lane.buffer->lkey(),
              .receive_length = static_cast<std::uint32_t>(region),
              .peer = {},
              .immediate_data = true};
}

// One end of the run once the TCP connection is up: the device and port, the conversation's
// opening, our QPs and their records. Members in the order they are made (and unmade in
// reverse: the QPs before their PD and channel).
struct OobEnd {
  std::unique_ptr<DeviceContext> device;
  LocalPort local;
  ibv_device_attr device_attributes{};
  std::unique_ptr<perftest::Conversation> conversation;
  perftest::Agreed agreed;
  std::uint64_t region = 0;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionChannel> channel;
  std::vector<OobLane> lanes;
  std::vector<perftest::Destination> records;
  std::uint32_t receives = 1;  // posted on each QP once connected (receive_depth)
  bool with_gid = false;
};

// `client`: which end this is; `reached`: how the local address came (choose_port).
OobEnd open_end(const BwSettings& s, int socket, bool client, std::uint32_t size, std::string_view reached,
                Report& report) {
  OobEnd end;
  const auto local_address = local_address_of(socket);
  report.local_address = local_address;
  end.device = std::make_unique<DeviceContext>(s.device);
  end.local = choose_port(s, *end.device, local_address, reached);
  end.with_gid = end.local.gid.has_value();
  check_returned(ibv_query_device(end.device->get(), &end.device_attributes), "ibv_query_device", end.device->name());

  end.conversation = std::make_unique<perftest::Conversation>(socket, client, s.limits.timeout, s.limits.stop_fd);
  const perftest::Geometry ours{.page_size = static_cast<std::uint32_t>(sysconf(_SC_PAGESIZE)), .cache_line = 64};
  const int our_mtu = s.mtu ? std::min<int>(*s.mtu, end.local.attributes.active_mtu) : end.local.attributes.active_mtu;
  end.agreed = end.conversation->open(ours, our_mtu);
  spdlog::info("perftest {} at {}: path MTU {}, page size {}", end.agreed.peer.text, report.peer_address,
               mtu_bytes(static_cast<ibv_mtu>(end.agreed.mtu)), end.agreed.geometry.page_size);

  const std::uint64_t line = end.agreed.geometry.cache_line;
  end.region = (std::max<std::uint64_t>(size, end.agreed.geometry.page_size) + line - 1) / line * line;
  end.pd = std::make_unique<ProtectionDomain>(end.device->get());
  end.channel = std::make_unique<CompletionChannel>(end.device->get());
  end.receives = receive_depth(s, client);
  end.lanes =
      make_lanes(s, *end.device, *end.pd, *end.channel, end.local, end.device_attributes, end.region, end.receives);
  end.records.reserve(end.lanes.size());
  for (const auto& lane : end.lanes) end.records.push_back(lane.record);
  return end;
}

// The report's test. `rows_measured_by`: "self", or "peer" where the rows are the figures the
// client sent (the server of a WRITE or READ run, which sees none of it).
nlohmann::json test_of(const BwSettings& s, const OobEnd& end, const char* rows_measured_by) {
  nlohmann::json test = {
      {"test", bw::to_string(s.test)},
      {"operation", bw::to_string(s.operation)},
      {"connection", "RC"},
      {"queue_pairs", s.queue_pairs},
      {"bidirectional", false},
      {"depth", s.depth},
      {"signal_every", signal_interval(s.depth)},
      {"inline_bytes", end.lanes.front().inline_bytes},
      {"warmup_iterations", 0},
      {"completion", s.events ? "events" : "poll"},
      {"buffers", "heap"},
      {"path", path_of(*end.device, end.local, end.agreed.mtu, s)},
      {"exchange",
       {{"method", "perftest"}, {"peer_version", end.agreed.peer.text}, {"rows_measured_by", rows_measured_by}}}};
  if (s.budget.duration) test["duration_s"] = std::chrono::duration<double>(*s.budget.duration).count();
  return test;
}

// What one end does at the steps where the two differ.
struct RoleSteps {
  std::string_view peer_role;                                          // "server" or "client"
  std::function<void(const std::vector<perftest::Destination>&)> run;  // the measurement
  std::function<void()> results;                                       // the client's figures
};

// perftest's program for the operation, step by step.
void play(const BwSettings& s, OobEnd& end, const RoleSteps& role) {
  const auto initiator_depth = [&](const perftest::Destination& peer) {
    return static_cast<std::uint8_t>(
        std::clamp<int>(peer.out_reads, 1, std::max(end.device_attributes.max_qp_init_rd_atom, 1)));
  };
  std::vector<perftest::Destination> theirs;
  for (const auto step : perftest::program_steps(s.operation, s.test)) {
    switch (step) {
      case perftest::Step::records: theirs = end.conversation->exchange_records(end.records, end.with_gid); break;
      case perftest::Step::connect:
        for (std::size_t i = 0; i < end.lanes.size(); ++i) {
          connect_qp(end.lanes[i], theirs[i], end.local, end.agreed.mtu, initiator_depth(theirs[i]), s, role.peer_role);
        }
        // Every receive posted before the barrier that starts the run, as perftest's are.
        for (const auto& lane : end.lanes) post_receives(lane_of(lane, end.region, nullptr), end.receives);
        break;
      case perftest::Step::barrier: end.conversation->barrier(end.records.front(), end.with_gid); break;
      case perftest::Step::run: role.run(theirs); break;
      case perftest::Step::results: role.results(); break;
      case perftest::Step::close: end.conversation->close(end.records.front(), end.with_gid); break;
    }
  }
}

}  // namespace

void check_perftest_mode(const BwSettings& s, bool sweep, bool timed) {
  const auto refuse = [](const char* what) {
    throw UsageError(
        fmt::format("--oob does not run {} yet: it talks to ib_send_bw, ib_write_bw, ib_read_bw, "
                    "ib_send_lat, ib_write_lat and ib_read_lat, one size, RC, one direction",
                    what));
  };
  if (s.operation == bw::Operation::atomic) refuse("atomics");
  if (s.test == bw::Test::latency && timed) refuse("timed latency tests (-D)");
  if (s.datagram) refuse("UD (-c UD)");
  if (s.bidirectional) refuse("bidirectional tests (-b)");
  if (sweep && (s.operation == bw::Operation::send || s.test == bw::Test::latency)) {
    refuse("a sweep of sizes (-a) but with ib_write_bw and ib_read_bw");
  }
  if (s.queue_pairs != 1 && s.operation == bw::Operation::send) refuse("SEND over several queue pairs (-q)");
  if (timed && s.operation == bw::Operation::send) refuse("timed SEND tests (-D)");
  if (s.server.empty() && s.persistent) {
    throw UsageError("--oob serves one perftest client and ends, as perftest's server does: -P is not for it");
  }
}

namespace {

FileDescriptor connect_to_server(const BwSettings& s, const SocketAddress& server) {
  const auto length = static_cast<socklen_t>(server.family() == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
  try {
    return tcp::connect_to(server.get(), length, Clock::now() + s.limits.timeout, s.limits.stop_fd);
  } catch (const std::system_error& failed) {
    throw std::runtime_error(fmt::format("no perftest server at {} ({}): start {} there first, without -R",
                                         server.to_string(), failed.code().message(), perftest_program(s)));
  }
}

// The measured run: send_bw's stream loop over our QPs at the server's buffers.
void run_stream(const BwSettings& s, const OobEnd& end, const std::vector<perftest::Destination>& theirs,
                std::uint32_t size, BwResults& results) {
  std::vector<Lane> lanes;
  lanes.reserve(end.lanes.size());
  for (std::size_t i = 0; i < end.lanes.size(); ++i) lanes.push_back(lane_of(end.lanes[i], end.region, &theirs[i]));
  const StreamSettings settings{
      .basics = {.max_inline_data = end.lanes.front().inline_bytes, .limits = s.limits, .events = s.events},
      .lanes = lanes,
      .operation = s.operation,
      .depth = s.depth,
      .signal_every = signal_interval(s.depth),
      .bidirectional = false,
      .messages_per_s = std::nullopt,
      .interval = s.interval,
      .intervals = &results.intervals,
      .interval_done = s.interval_done,
      .atomics = nullptr,
      .lane_sends = nullptr,
      .credits = nullptr,
      .heartbeat = nullptr};
  // -a (WRITE and READ): every size back to back, as perftest's client runs them, with no word
  // to the server between them.
  for (const auto each : s.sizes.empty() ? std::vector<std::uint32_t>{size} : s.sizes) {
    stream(settings, each, s.budget, results.bandwidth);
    if (s.row_done) s.row_done(results);
  }
}

// The client's latency run, perftest's way: exactly -n exchanges and no warm-up (the server
// counts them), no size announced (it has its own -s). WRITE: in lockstep, perftest's server
// writing first; SEND and READ: send_bw's pings.
void run_latency(const BwSettings& s, const OobEnd& end, const perftest::Destination& theirs, std::uint32_t size,
                 BwResults& results) {
  const LoopBasics basics{.max_inline_data = end.lanes.front().inline_bytes, .limits = s.limits, .events = s.events};
  const auto lane = lane_of(end.lanes.front(), end.region, &theirs);
  if (s.operation == bw::Operation::write) {
    lockstep_writes({.basics = basics, .lane = lane, .leader = false, .histogram = s.histogram}, size,
                    s.budget.iterations, results.latency);
  } else {
    ping({.basics = basics,
          .lane = lane,
          .operation = s.operation,
          .histogram = s.histogram,
          .atomics = nullptr,
          .announces_size = false,
          .datagrams_sent = nullptr},
         size, Budget{.iterations = s.budget.iterations, .duration = std::nullopt}, 0, results.latency);
  }
  if (s.row_done) s.row_done(results);
}

// Runs `run`; a completion that failed, or none that came, gets the likely cause appended:
// the exchange does not say which program the server is, nor its -s, and a server of
// another program (no receives for a SEND; a READ buffer for a WRITE) or of smaller
// messages fails exactly this way.
template <class Run>
void with_peer_hint(const BwSettings& s, Run run) {
  const auto hint =
      fmt::format(": is the server {} without -R, given -s {} or more?", perftest_program(s), message_size(s));
  try {
    run();
  } catch (const CompletionError& failed) {
    throw CompletionError(failed.what() + hint, failed.status());
  } catch (const RunStopped& stopped) {
    if (stopped.reason() != StopReason::timed_out) throw;
    throw RunStopped(StopReason::timed_out, stopped.what() + hint);
  }
}

perftest::Results results_of(const BandwidthRow& row) {
  return {.message_size = row.size,
          .iterations = row.iterations,
          .peak_mb_per_s = row.peak_mib_per_s,
          .average_mb_per_s = row.average_mib_per_s,
          .message_rate_mpps = row.message_rate_mpps};
}

}  // namespace

void run_perftest_client(const BwSettings& s, Report& report, BwResults& results) {
  check_perftest_mode(s, s.sizes.size() > 1, s.budget.duration.has_value());
  if (s.server.empty()) {
    throw UsageError("--oob's client needs the address of the host running ib_<op>_bw");
  }
  const auto size = message_size(s);
  const auto server = parse_address(s.server, s.port);
  const auto socket = connect_to_server(s, server);
  report.peer_address = server.to_string();
  auto end = open_end(s, socket.get(), true, size, "the address this host reaches the server from", report);
  results.test = test_of(s, end, "self");
  play(s, end,
       {.peer_role = "server",
        .run =
            [&](const auto& theirs) {
              with_peer_hint(s, [&] {
                if (s.test == bw::Test::latency) {
                  run_latency(s, end, theirs.front(), size, results);
                } else {
                  run_stream(s, end, theirs, size, results);
                }
              });
            },
        .results = [&] { end.conversation->send_results(results_of(results.bandwidth.back())); }});
}

namespace {

// The one client served: the first connection the gate (--allow) admits, within
// --accept-timeout; those it refuses are closed unread.
FileDescriptor accept_perftest_client(const BwSettings& s, const std::shared_ptr<PeerGate>& gate, Report& report) {
  // perftest's server listens on IPv4 unless told an address.
  const auto address = parse_address(s.bind.empty() ? "0.0.0.0" : s.bind, s.port);
  const auto length = static_cast<socklen_t>(address.family() == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
  const auto listener = tcp::listen_on(address.get(), length, 8, fmt::format("TCP {}", address.to_string()));
  spdlog::info("waiting for a perftest client ({} <this host>, without -R) on TCP {}, answering {}",
               perftest_program(s), address.to_string(), s.peers.allow.to_string());
  const auto deadline = s.accept_timeout ? Clock::now() + *s.accept_timeout : Clock::time_point::max();
  auto accepted = tcp::accept_admitted(listener.get(), deadline, s.limits.stop_fd, [&](const sockaddr* from) {
    return gate->admit(from, Clock::now()).admitted();
  });
  if (!accepted) {
    throw RunStopped(StopReason::timed_out,
                     fmt::format("no perftest client came within {} s",
                                 std::chrono::duration_cast<std::chrono::seconds>(*s.accept_timeout).count()));
  }
  report.peer_address = address_of(reinterpret_cast<const sockaddr*>(&accepted->peer)).to_string();
  spdlog::info("perftest client from {}", report.peer_address);
  return std::move(accepted->socket);
}

// Whether the peer has written to (or closed) the TCP connection: a client's next message
// after its run is the barrier it enters once its last completion is in.
bool has_spoken(int socket) {
  return await_events(socket, POLLIN, -1, Clock::now()) == SocketWait::ready;
}

// The client's figures as the server's row (perftest's server prints them as its own).
BandwidthRow row_of(const perftest::Results& theirs, std::uint64_t region) {
  if (theirs.message_size == 0 || theirs.message_size > region) {
    throw ProtocolError(fmt::format("the client says it moved {}-byte messages; this server's buffer has {} bytes",
                                    theirs.message_size, region));
  }
  constexpr std::uint64_t most_iterations = std::uint64_t{1} << 40;
  if (theirs.iterations > most_iterations) {
    throw ProtocolError(fmt::format("the client says it ran {} iterations", theirs.iterations));
  }
  constexpr double mib = 1024.0 * 1024.0;
  BandwidthRow row;
  row.size = static_cast<std::uint32_t>(theirs.message_size);
  row.iterations = theirs.iterations;
  row.bytes = theirs.message_size * theirs.iterations;
  row.average_mib_per_s = theirs.average_mb_per_s;
  row.peak_mib_per_s = theirs.peak_mb_per_s;
  row.average_gbit_per_s = theirs.average_mb_per_s * mib * 8 / 1e9;
  row.message_rate_mpps = theirs.message_rate_mpps;
  row.seconds = theirs.average_mb_per_s > 0 ? static_cast<double>(row.bytes) / (theirs.average_mb_per_s * mib) : 0;
  return row;
}

void refuse_client(const std::string& peer, const std::string& reason, BwResults& results) {
  spdlog::warn("refused {}: {}", peer, reason);
  results.refuse({.peer = peer, .reason = reason});
}

// How the server's loops learn that the client's run is over: once the client speaks (its
// next barrier), our QPs go to the error state, which flushes the receives still posted and
// so ends each lane after what arrived (no rdma_cm does it here). A client that is quiet on
// TCP and in our CQ for --timeout is let go only where nothing else says it still works:
// for a run this side cannot see (WRITE and READ), the port's counters moving.
PeerWatch client_watch(const BwSettings& s, const OobEnd& end, int socket, bool invisible_run) {
  PeerWatch peer{.connected =
                     [&end, socket] {
                       if (!has_spoken(socket)) return true;
                       for (const auto& lane : end.lanes) {
                         ibv_qp_attr error{};
                         error.qp_state = IBV_QPS_ERR;
                         modify(lane.qp->get(), error, IBV_QP_STATE, "RC QP to ERR (the run is over)");
                       }
                       return false;
                     },
                 .silence = s.limits.timeout,
                 .still_working = {},
                 .still_working_sign = fmt::format("{} port {}'s counters", end.device->name(), end.local.number),
                 .cm_fds = {socket}};
  if (invisible_run) {
    peer.still_working = counters_moved(end.device->name(), end.local.number);
    if (!peer.still_working) {
      spdlog::info(
          "{} port {} shows no counters: a {} client that stops working is held until it closes its TCP "
          "connection",
          end.device->name(), end.local.number, bw::to_string(s.operation));
      peer.still_working = [] { return true; };
    }
  }
  return peer;
}

// The server's run: a SEND stream received and counted (send_bw's sink); a WRITE or READ
// bandwidth run, or a READ latency run, waited out (nothing of it reaches us); SEND latency
// answered; WRITE latency in lockstep, this side first, as perftest's server.
void serve_run(const BwSettings& s, const OobEnd& end, int socket, const perftest::Destination& theirs,
               std::uint32_t size, BwResults& results) {
  const LoopBasics basics{.max_inline_data = end.lanes.front().inline_bytes, .limits = s.limits, .events = s.events};
  const bool latency = s.test == bw::Test::latency;
  if (latency && s.operation == bw::Operation::write) {
    lockstep_writes({.basics = basics,
                     .lane = lane_of(end.lanes.front(), end.region, &theirs),
                     .leader = true,
                     .histogram = s.histogram},
                    size, s.budget.iterations, results.latency);
    return;
  }
  const bool invisible = s.operation != bw::Operation::send;
  const auto peer = client_watch(s, end, socket, invisible);
  if (latency && !invisible) {
    results.answered = answer_pings({.basics = basics,
                                     .peer = peer,
                                     .lane = lane_of(end.lanes.front(), end.region, &theirs),
                                     .operation = s.operation,
                                     .datagram = nullptr,
                                     .reply_from = {}});
    return;
  }
  std::vector<Lane> lanes;
  lanes.reserve(end.lanes.size());
  for (const auto& lane : end.lanes) lanes.push_back(lane_of(lane, end.region, nullptr));
  sink({.basics = basics,
        .peer = peer,
        .lanes = lanes,
        .depth = s.depth,
        .reflect = false,
        .credits = false,
        .datagrams = nullptr,
        .one_sided = invisible},
       results.bandwidth);
}

}  // namespace

void run_perftest_server(const BwSettings& s, Report& report, BwResults& results) {
  check_perftest_mode(s, s.sizes.size() > 1, s.budget.duration.has_value());
  const auto size = message_size(s);
  const auto gate = std::make_shared<PeerGate>(s.peers);
  const RefusalsToReport refusals(gate, report);
  // A client that does not open as perftest does (garbage, another protocol, silence past
  // --timeout) ran nothing: it is refused, and the next one served, as the rdma_cm server does.
  std::optional<FileDescriptor> socket;
  std::optional<OobEnd> opened;
  while (!opened) {
    socket.emplace(accept_perftest_client(s, gate, report));
    try {
      opened.emplace(open_end(s, socket->get(), false, size, "the address the client reached this host at", report));
    } catch (const ProtocolError& wrong) {
      refuse_client(report.peer_address, wrong.what(), results);
      socket.reset();
    } catch (const RunStopped& stopped) {
      if (stopped.reason() != StopReason::timed_out) throw;
      refuse_client(report.peer_address, stopped.what(), results);
      socket.reset();
    }
  }
  auto& end = *opened;
  const bool client_figures = s.test == bw::Test::bandwidth && s.operation != bw::Operation::send;
  results.test = test_of(s, end, client_figures ? "peer" : "self");
  play(s, end,
       {.peer_role = "client",
        .run = [&](const auto& theirs) { serve_run(s, end, socket->get(), theirs.front(), size, results); },
        .results =
            [&] {
              const auto row = row_of(end.conversation->receive_results(), end.region);
              if (row.size != size) {
                results.warnings.push_back(
                    fmt::format("the client measured {}-byte messages, this server was given -s {}", row.size, size));
              }
              results.bandwidth.push_back(row);
            }});
}

}  // namespace rdmakit
