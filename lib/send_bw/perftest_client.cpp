#include "lib/send_bw/perftest_client.hpp"

#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lib/base/error.hpp"
#include "lib/base/file_descriptor.hpp"
#include "lib/net/stream_io.hpp"
#include "lib/rdma/cm.hpp"
#include "lib/rdma/gid.hpp"
#include "lib/rdma/verbs.hpp"
#include "lib/send_bw/loops.hpp"
#include "lib/send_bw/perftest_conversation.hpp"
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

LocalPort choose_port(const BwSettings& s, const DeviceContext& device, const std::string& local_address) {
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
    throw UsageError(fmt::format(
        "{} port {} holds no GID of {}, the address this host reaches the server from: give -x with the index to "
        "send from ({})",
        device.name(), local.number, local_address, advice.reason));
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

void modify(ibv_qp* qp, ibv_qp_attr& attributes, int mask, const char* what) {
  check_returned(ibv_modify_qp(qp, &attributes, mask), "ibv_modify_qp", what);
}

// INIT, RTR and RTS from the peer's record, as perftest's ctx_connect does for its side.
void connect_qp(const OobLane& lane, const perftest::Destination& peer, const LocalPort& local, int mtu,
                std::uint8_t initiator_depth, const BwSettings& s) {
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
    if (!peer.gid) throw ProtocolError("perftest's server sent no GID, and ours is needed to reach it");
    rtr.ah_attr.is_global = 1;
    std::copy(peer.gid->begin(), peer.gid->end(), std::begin(rtr.ah_attr.grh.dgid.raw));
    rtr.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(local.gid->index);
    rtr.ah_attr.grh.hop_limit = hop_limit;
    rtr.ah_attr.grh.traffic_class = s.traffic_class.value_or(0);
  }
  modify(qp, rtr,
         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
             IBV_QP_MIN_RNR_TIMER,
         "RC QP to RTR (the server's record)");

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

}  // namespace

void check_perftest_client(const BwSettings& s, bool sweep, bool timed) {
  const auto refuse = [](const char* what) {
    throw UsageError(
        fmt::format("--oob does not run {} yet: perftest's default exchange covers ib_send_bw, "
                    "ib_write_bw and ib_read_bw, one size, RC, one direction",
                    what));
  };
  if (s.server.empty()) {
    throw UsageError("--oob is the client of a perftest server: give the address of the host running ib_<op>_bw");
  }
  if (s.test != bw::Test::bandwidth) refuse("latency tests");
  if (s.operation == bw::Operation::atomic) refuse("atomics");
  if (s.datagram) refuse("UD (-c UD)");
  if (s.bidirectional) refuse("bidirectional tests (-b)");
  if (sweep) refuse("a sweep of sizes (-a)");
  if (s.queue_pairs != 1 && s.operation == bw::Operation::send) refuse("SEND over several queue pairs (-q)");
  if (timed && s.operation == bw::Operation::send) refuse("timed SEND tests (-D)");
}

namespace {

FileDescriptor connect_to_server(const BwSettings& s, const SocketAddress& server) {
  const auto length = static_cast<socklen_t>(server.family() == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
  try {
    return tcp::connect_to(server.get(), length, Clock::now() + s.limits.timeout, s.limits.stop_fd);
  } catch (const std::system_error& failed) {
    throw std::runtime_error(fmt::format("no perftest server at {} ({}): start ib_{}_bw there first, without -R",
                                         server.to_string(), failed.code().message(), bw::to_string(s.operation)));
  }
}

// Our queue pairs, each with its CQ, its buffer (the messages, then the region offered to
// the peer: perftest's, a page at least, whole cache lines) and its record.
std::vector<OobLane> make_lanes(const BwSettings& s, const DeviceContext& device, const ProtectionDomain& pd,
                                CompletionChannel& channel, const LocalPort& local,
                                const ibv_device_attr& device_attributes, std::uint64_t region) {
  std::mt19937 random(std::random_device{}());
  std::vector<OobLane> lanes(s.queue_pairs);
  for (auto& lane : lanes) {
    lane.cq = std::make_unique<CompletionQueue>(device.get(), static_cast<int>(s.depth + 1), channel);
    auto attributes = qp_attributes(
        {.type = IBV_QPT_RC, .send_depth = s.depth, .receive_depth = 1, .signal_every_send = false, .inline_bytes = 0},
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

// The measured run: send_bw's stream loop over our QPs at the server's buffers.
void run_stream(const BwSettings& s, const std::vector<OobLane>& lanes,
                const std::vector<perftest::Destination>& theirs, std::uint32_t size, BwResults& results) {
  std::vector<Lane> loop_lanes;
  loop_lanes.reserve(lanes.size());
  for (std::size_t i = 0; i < lanes.size(); ++i) {
    loop_lanes.push_back(Lane{.qp = lanes[i].qp->get(),
                              .cq = lanes[i].cq->get(),
                              .local_address = lanes[i].buffer->address(),
                              .lkey = lanes[i].buffer->lkey(),
                              .remote_address = theirs[i].vaddr,
                              .rkey = theirs[i].rkey,
                              .receive_address = 0,
                              .receive_lkey = 0,
                              .receive_length = 0,
                              .peer = {},
                              .immediate_data = true});
  }
  const StreamSettings settings{
      .basics = {.max_inline_data = lanes.front().inline_bytes, .limits = s.limits, .events = s.events},
      .lanes = loop_lanes,
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
  stream(settings, size, s.budget, results.bandwidth);
  if (s.row_done) s.row_done(results);
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
  check_perftest_client(s, s.sizes.size() > 1, s.budget.duration.has_value());
  const auto size = s.sizes.empty() ? std::uint32_t{65536} : s.sizes.front();
  const auto server = parse_address(s.server, s.port);
  const auto socket = connect_to_server(s, server);
  const auto local_address = local_address_of(socket.get());
  report.local_address = local_address;
  report.peer_address = server.to_string();

  const DeviceContext device(s.device);
  const auto local = choose_port(s, device, local_address);
  const bool with_gid = local.gid.has_value();
  ibv_device_attr device_attributes{};
  check_returned(ibv_query_device(device.get(), &device_attributes), "ibv_query_device", device.name());

  perftest::Conversation conversation(socket.get(), true, s.limits.timeout, s.limits.stop_fd);
  const perftest::Geometry ours{.page_size = static_cast<std::uint32_t>(sysconf(_SC_PAGESIZE)), .cache_line = 64};
  const int our_mtu = s.mtu ? std::min<int>(*s.mtu, local.attributes.active_mtu) : local.attributes.active_mtu;
  const auto agreed = conversation.open(ours, our_mtu);
  spdlog::info("perftest {} at {}: path MTU {}, page size {}", agreed.peer.text, server.to_string(),
               mtu_bytes(static_cast<ibv_mtu>(agreed.mtu)), agreed.geometry.page_size);

  const std::uint64_t line = agreed.geometry.cache_line;
  const std::uint64_t region = (std::max<std::uint64_t>(size, agreed.geometry.page_size) + line - 1) / line * line;
  const ProtectionDomain pd(device.get());
  CompletionChannel channel(device.get());
  const auto lanes = make_lanes(s, device, pd, channel, local, device_attributes, region);
  std::vector<perftest::Destination> records;
  records.reserve(lanes.size());
  for (const auto& lane : lanes) records.push_back(lane.record);

  results.test = {{"test", bw::to_string(s.test)},
                  {"operation", bw::to_string(s.operation)},
                  {"connection", "RC"},
                  {"queue_pairs", s.queue_pairs},
                  {"bidirectional", false},
                  {"depth", s.depth},
                  {"signal_every", signal_interval(s.depth)},
                  {"inline_bytes", lanes.front().inline_bytes},
                  {"warmup_iterations", 0},
                  {"completion", s.events ? "events" : "poll"},
                  {"buffers", "heap"},
                  {"path", path_of(device, local, agreed.mtu, s)},
                  {"exchange", {{"method", "perftest"}, {"peer_version", agreed.peer.text}}}};
  if (s.budget.duration) results.test["duration_s"] = std::chrono::duration<double>(*s.budget.duration).count();

  const auto initiator_depth = [&](const perftest::Destination& peer) {
    return static_cast<std::uint8_t>(
        std::clamp<int>(peer.out_reads, 1, std::max(device_attributes.max_qp_init_rd_atom, 1)));
  };
  std::vector<perftest::Destination> theirs;
  for (const auto step : perftest::program_steps(s.operation)) {
    switch (step) {
      case perftest::Step::records: theirs = conversation.exchange_records(records, with_gid); break;
      case perftest::Step::connect:
        for (std::size_t i = 0; i < lanes.size(); ++i) {
          connect_qp(lanes[i], theirs[i], local, agreed.mtu, initiator_depth(theirs[i]), s);
        }
        break;
      case perftest::Step::barrier: conversation.barrier(records.front(), with_gid); break;
      case perftest::Step::run: run_stream(s, lanes, theirs, size, results); break;
      case perftest::Step::results: conversation.send_results(results_of(results.bandwidth.back())); break;
      case perftest::Step::close: conversation.close(records.front(), with_gid); break;
    }
  }
}

}  // namespace rdmakit
