#include "lib/rdma/datagram_port.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lib/base/error.hpp"
#include "lib/rdma/device_query.hpp"
#include "lib/rdma/refusal.hpp"
#include "lib/rdma/work_id.hpp"

namespace rdmakit {

namespace {

// Address handles answering many sources are kept up to this many; beyond it (a scan, many
// restarts) they are made again as needed, once no send is in flight.
constexpr std::size_t max_reply_handles = 4096;
constexpr int listen_backlog = 64;

// Every field an ibv_wc has that a UD receive's address handle is made from
// (ibv_create_ah_from_wc) and that take_completion reads.
constexpr std::uint64_t standard_completion_fields = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM |
                                                     IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
                                                     IBV_WC_EX_WITH_DLID_PATH_BITS;

}  // namespace

std::uint64_t monotonic_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000ULL + static_cast<std::uint64_t>(now.tv_nsec);
}

// One reading of the device's counter (ibv_query_rt_values_ex, which mlx4 and mlx5 read),
// dated by the host's clock halfway through the call: of a few tries, the one whose call
// took least, as a preempted one would misdate it. False where the provider does not read it.
bool read_counter(ibv_context* context, CounterSample& out) {
  constexpr int tries = 5;
  std::uint64_t best_spread = ~std::uint64_t{0};
  for (int attempt = 0; attempt < tries; ++attempt) {
    ibv_values_ex values{};
    values.comp_mask = IBV_VALUES_MASK_RAW_CLOCK;
    const auto before = monotonic_ns();
    if (ibv_query_rt_values_ex(context, &values) != 0 || (values.comp_mask & IBV_VALUES_MASK_RAW_CLOCK) == 0) {
      return false;
    }
    const auto after = monotonic_ns();
    if (after - before >= best_spread) continue;
    best_spread = after - before;
    out.host_ns = before + (after - before) / 2;
    out.ticks = static_cast<std::uint64_t>(values.raw_clock.tv_sec) * 1'000'000'000U +
                static_cast<std::uint64_t>(values.raw_clock.tv_nsec);
  }
  return true;
}

// The core clock the device's counter kept over a few milliseconds; 0 where it cannot be read.
std::uint64_t sample_core_clock_khz(ibv_context* context, std::uint64_t mask) {
  constexpr auto sampled_for = std::chrono::milliseconds(20);
  CounterSample first;
  CounterSample second;
  if (!read_counter(context, first)) return 0;
  std::this_thread::sleep_for(sampled_for);
  if (!read_counter(context, second)) return 0;
  return measured_core_clock_khz(first, second, mask);
}

std::string grh_source_address(std::span<const std::uint8_t, grh_bytes> header) {
  char text[INET6_ADDRSTRLEN] = {};
  // RoCE v2 over IPv4 leaves the packet's IPv4 header in the last 20 of the 40 bytes
  // (ibv_post_recv(3)); over IPv6, and on IB, the 40 bytes are the GRH. Told apart as
  // rdma-core's ibv_init_ah_from_wc tells them: not version 6 in the first byte and version
  // 4 at byte 20 is IPv4 (rxe leaves that header's checksum 0); where both could be, an
  // IPv4 header whose checksum holds.
  const auto ipv4 = header.subspan<20, 20>();
  const bool ipv4_version = (ipv4[0] >> 4) == 4;
  bool is_ipv4 = (header[0] >> 4) != 6 && ipv4_version;
  if ((header[0] >> 4) == 6 && ipv4_version && (ipv4[0] & 0x0f) == 5) {
    std::uint32_t sum = 0;
    for (std::size_t k = 0; k < ipv4.size(); k += 2) sum += (std::uint32_t{ipv4[k]} << 8) | ipv4[k + 1];
    while ((sum >> 16) != 0) sum = (sum & 0xffff) + (sum >> 16);
    is_ipv4 = sum == 0xffff;
  }
  if (is_ipv4) return inet_ntop(AF_INET, ipv4.data() + 12, text, sizeof(text)) != nullptr ? text : "";
  if ((header[0] >> 4) != 6) return {};
  const auto* source = header.data() + 8;  // the GRH's SGID
  static constexpr std::uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(source, v4_mapped, sizeof(v4_mapped)) == 0) {
    return inet_ntop(AF_INET, source + 12, text, sizeof(text)) != nullptr ? text : "";
  }
  return inet_ntop(AF_INET6, source, text, sizeof(text)) != nullptr ? text : "";
}

DatagramPort::DatagramPort(DatagramPortOptions options)
    : options_(std::move(options)), slot_bytes_(grh_bytes + options_.message_bytes), listen_id_(channel_, RDMA_PS_UDP) {
  auto address = parse_address(options_.bind_address, options_.port);
  check_errno(rdma_bind_addr(listen_id_.get(), address.get()), "rdma_bind_addr", address.to_string(),
              options_.bind_address);
  if (listen_id_->verbs == nullptr) {
    throw UsageError(
        fmt::format("{} is not an address of one RDMA device: bind to the address of a netdev "
                    "with RDMA (a wildcard has none)",
                    options_.bind_address));
  }
  check_errno(rdma_listen(listen_id_.get(), listen_backlog), "rdma_listen", address.to_string());
  local_ = address_of(rdma_get_local_addr(listen_id_.get()));
  port_num_ = listen_id_->port_num;

  auto* context = listen_id_->verbs;
  if (const auto missing = missing_for(read_device_caps(context, port_num_), Need::datagrams)) {
    throw Unsupported(*missing);
  }
  pd_ = std::make_unique<ProtectionDomain>(context);
  completion_channel_ = std::make_unique<CompletionChannel>(context);
  const auto depth = static_cast<int>(options_.receive_slots + options_.send_slots);
  const std::string device = ibv_get_device_name(context->device);
  make_cq(context, depth, true);
  try {
    make_qp();
  } catch (const RdmaError& error) {
    // A provider may take the stamping CQ and still refuse a QP on it.
    if (stamp_source_ != StampSource::device) throw_datagram_refusal(error, device);
    spdlog::warn("a UD QP on a CQ with completion timestamps cannot be made ({}): the host's clock instead",
                 error.what());
    cq_.reset();
    make_cq(context, depth, false);
    try {
      make_qp();
    } catch (const RdmaError& again) {
      throw_datagram_refusal(again, device);
    }
  }
  ready_qp();

  const auto receive_bytes = options_.receive_slots * slot_bytes_;
  buffer_ = std::make_unique<RegisteredBuffer>(pd_->get(), receive_bytes + options_.send_slots * options_.message_bytes,
                                               IBV_ACCESS_LOCAL_WRITE);
  for (std::uint32_t slot = 0; slot < options_.receive_slots; ++slot) post_receive(slot);
  for (auto slot = static_cast<std::uint32_t>(options_.send_slots); slot > 0; --slot) {
    free_send_slots_.push_back(slot - 1);
  }
  send_tags_.assign(options_.send_slots, 0);
  completions_.resize(64);
  stamps_.resize(completions_.size());

  ibv_cq* cqs[] = {cq_->get()};
  std::vector<int> cm_fds{channel_.fd()};
  // The waiter takes it as one more event channel: its readiness ends a sleep, and the
  // caller reads it.
  if (options_.wake_fd >= 0) cm_fds.push_back(options_.wake_fd);
  waiter_ = std::make_unique<CqWaiter>(CompletionMode::events, cqs, cm_fds, options_.stop_fd);
}

DatagramPort::~DatagramPort() = default;

void DatagramPort::make_qp() {
  auto attributes = qp_attributes({.type = IBV_QPT_UD,
                                   .send_depth = static_cast<std::uint32_t>(options_.send_slots),
                                   .receive_depth = static_cast<std::uint32_t>(options_.receive_slots),
                                   .signal_every_send = true,
                                   .inline_bytes = 0},
                                  cq_->get());
  qp_ = std::make_unique<QueuePair>(pd_->get(), attributes);
}

void DatagramPort::make_cq(ibv_context* context, int depth, bool device_stamps) {
  completion_clock_.reset();
  stamp_source_ = StampSource::none;
  wallclock_stamps_ = false;
  if (device_stamps && make_stamping_cq(context, depth)) return;
  // The same extended CQ without the device's stamps, so that one way of polling serves
  // both; a provider without extended CQs gets the plain one.
  try {
    cq_ = std::make_unique<CompletionQueue>(context, depth, *completion_channel_, standard_completion_fields);
  } catch (const RdmaError& error) {
    spdlog::debug("{}: a plain CQ instead", error.what());
    cq_ = std::make_unique<CompletionQueue>(context, depth, *completion_channel_);
  }
  if (options_.host_stamps) {
    completion_clock_ = CompletionClock::nanoseconds();
    stamp_source_ = StampSource::host;
  }
}

bool DatagramPort::make_stamping_cq(ibv_context* context, int depth) {
  ibv_device_attr_ex device{};
  if (ibv_query_device_ex(context, nullptr, &device) != 0 || device.completion_timestamp_mask == 0) return false;
  // The provider's nanoseconds first: they need no rate of ours, and mlx5 in real-time mode
  // stamps in a format of its own that only the provider reads.
  try {
    cq_ = std::make_unique<CompletionQueue>(context, depth, *completion_channel_,
                                            standard_completion_fields | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK);
    completion_clock_ = CompletionClock::nanoseconds();
    wallclock_stamps_ = true;
    stamp_source_ = StampSource::device;
    return true;
  } catch (const RdmaError& error) {
    spdlog::debug("{}: the raw completion stamps instead", error.what());
  }
  const auto nominal_khz = device.hca_core_clock;
  const auto khz =
      believed_core_clock_khz(nominal_khz, sample_core_clock_khz(context, device.completion_timestamp_mask));
  if (khz != nominal_khz) {
    spdlog::warn(
        "the device's counter ticked {} kHz, not the {} kHz it reports (hca_core_clock): its stamps are "
        "read at {} kHz",
        khz, nominal_khz, khz);
  }
  completion_clock_ = CompletionClock::of_device(device.completion_timestamp_mask, khz);
  if (!completion_clock_) return false;
  try {
    cq_ = std::make_unique<CompletionQueue>(context, depth, *completion_channel_,
                                            standard_completion_fields | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP);
    stamp_source_ = StampSource::device;
    return true;
  } catch (const RdmaError& error) {
    spdlog::warn(
        "the device reports completion timestamps, but a CQ with them cannot be made ({}): the "
        "host's clock instead",
        error.what());
    completion_clock_.reset();
    return false;
  }
}

int DatagramPort::poll_batch() {
  const auto capacity = static_cast<int>(completions_.size());
  auto* extended = cq_->extended();
  if (extended == nullptr) {
    const int got = ibv_poll_cq(cq_->get(), capacity, completions_.data());
    if (got < 0) throw RdmaError("ibv_poll_cq", "UD port", EIO);
    return got;
  }
  // One completion a batch: in rdma-core 44, rxe's ibv_next_poll ends the batch itself when
  // it finds the CQ empty, and the ibv_end_poll that the verbs then ask for consumes an entry
  // that was never written. A batch of one reads the same on every provider.
  int got = 0;
  while (got < capacity) {
    ibv_poll_cq_attr attributes{};
    const int started = ibv_start_poll(extended, &attributes);
    if (started == ENOENT) break;
    if (started != 0) throw RdmaError("ibv_start_poll", "UD port", started);
    auto& wc = completions_[static_cast<std::size_t>(got)];
    wc = ibv_wc{};
    wc.wr_id = extended->wr_id;
    wc.status = extended->status;
    // A failed completion carries its id and status only.
    if (wc.status == IBV_WC_SUCCESS) {
      wc.opcode = ibv_wc_read_opcode(extended);
      wc.byte_len = ibv_wc_read_byte_len(extended);
      wc.qp_num = ibv_wc_read_qp_num(extended);
      wc.src_qp = ibv_wc_read_src_qp(extended);
      wc.wc_flags = ibv_wc_read_wc_flags(extended);
      wc.slid = static_cast<std::uint16_t>(ibv_wc_read_slid(extended));
      wc.sl = ibv_wc_read_sl(extended);
      wc.dlid_path_bits = ibv_wc_read_dlid_path_bits(extended);
    } else {
      wc.vendor_err = ibv_wc_read_vendor_err(extended);
    }
    if (stamp_source_ == StampSource::device) {
      stamps_[static_cast<std::size_t>(got)] =
          wallclock_stamps_ ? ibv_wc_read_completion_wallclock_ns(extended) : ibv_wc_read_completion_ts(extended);
    }
    ibv_end_poll(extended);
    ++got;
  }
  return got;
}

void DatagramPort::ready_qp() {
  // rdma_cm's INIT attributes for a UD QP of the bound id: its port, P_Key index and the
  // UDP port space's Q_Key, which every SIDR reply of ours announces.
  ibv_qp_attr attributes{};
  int mask = 0;
  attributes.qp_state = IBV_QPS_INIT;
  check_errno(rdma_init_qp_attr(listen_id_.get(), &attributes, &mask), "rdma_init_qp_attr", local_.to_string());
  qkey_ = (mask & IBV_QP_QKEY) != 0 ? attributes.qkey : RDMA_UDP_QKEY;
  check_returned(ibv_modify_qp(qp_->get(), &attributes, mask), "ibv_modify_qp", "UD QP to INIT");
  ibv_qp_attr rtr{};
  rtr.qp_state = IBV_QPS_RTR;
  check_returned(ibv_modify_qp(qp_->get(), &rtr, IBV_QP_STATE), "ibv_modify_qp", "UD QP to RTR");
  ibv_qp_attr rts{};
  rts.qp_state = IBV_QPS_RTS;
  rts.sq_psn = 0;
  check_returned(ibv_modify_qp(qp_->get(), &rts, IBV_QP_STATE | IBV_QP_SQ_PSN), "ibv_modify_qp", "UD QP to RTS");
}

void DatagramPort::post_receive(std::uint32_t slot) {
  const ibv_sge local{
      .addr = buffer_->address() + std::uint64_t{slot} * slot_bytes_, .length = slot_bytes_, .lkey = buffer_->lkey()};
  ibv_recv_wr wr{};
  ibv_sge sge{};
  build_receive(WorkId{.kind = WorkKind::receive, .owner = generation_, .sequence = slot}, local, wr, sge);
  ibv_recv_wr* bad = nullptr;
  check_returned(ibv_post_recv(qp_->get(), &wr, &bad), "ibv_post_recv", "UD receive");
}

void DatagramPort::resolve(const std::string& key, const std::string& address) {
  if (resolving(key)) return;
  Pending pending{.id = CmId(channel_, RDMA_PS_UDP),
                  .deadline = Clock::now() + options_.resolve_timeout,
                  .address = address,
                  .outcome = std::nullopt};
  auto destination = parse_address(address, options_.port);
  auto source = local_;
  source.set_port(0);
  const auto timeout_ms = static_cast<int>(options_.resolve_timeout.count());
  check_errno(rdma_resolve_addr(pending.id.get(), source.get(), destination.get(), timeout_ms), "rdma_resolve_addr",
              destination.to_string(), address);
  pending_.emplace(key, std::move(pending));
}

std::vector<Resolution> DatagramPort::take_cm_events(const Admission& admit, std::uint64_t& refused) {
  for (;;) {
    CmId request;  // a peer's SIDR request, destroyed once its event is acknowledged
    auto event = poll_cm_event(channel_);
    if (!event) break;
    if (event->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
      request = CmId(event->id);
      accept_request(*event, admit, refused);
    } else {
      advance_exchange(*event);
    }
  }
  std::vector<Resolution> ended;
  const auto now = Clock::now();
  for (auto it = pending_.begin(); it != pending_.end();) {
    auto& pending = it->second;
    if (!pending.outcome && now < pending.deadline) {
      ++it;
      continue;
    }
    ended.push_back(pending.outcome
                        ? std::move(*pending.outcome)
                        : Resolution{.key = it->first,
                                     .address = std::nullopt,
                                     .error = fmt::format("no SIDR answer from {} within {} ms", pending.address,
                                                          options_.resolve_timeout.count())});
    it = pending_.erase(it);
  }
  return ended;
}

void DatagramPort::accept_request(rdma_cm_event& event, const Admission& admit, std::uint64_t& refused) const {
  const auto source = address_of(rdma_get_peer_addr(event.id)).host_string();
  if (const auto refusal = admit(source)) {
    ++refused;
    const auto reason = encode_refusal(*refusal);
    if (rdma_reject(event.id, reason.data(), static_cast<std::uint8_t>(reason.size())) != 0) {
      spdlog::debug("rdma_reject {}: {}", source, std::strerror(errno));
    }
    return;
  }
  auto parameters = connection_parameters(ConnectOffer{
      .private_data = {}, .responder_resources = 0, .initiator_depth = 0, .qp_num = qp_num(), .datagram = true});
  // A SIDR reply ends the exchange: no ESTABLISHED follows here, and the request's id has
  // done its work. A reply that cannot be sent leaves the peer to ask again.
  if (rdma_accept(event.id, &parameters) != 0)
    spdlog::info("rdma_accept (SIDR) for {}: {}", source, std::strerror(errno));
}

void DatagramPort::advance_exchange(rdma_cm_event& event) {
  const auto found = std::find_if(pending_.begin(), pending_.end(),
                                  [&](const auto& entry) { return entry.second.id.get() == event.id; });
  if (found == pending_.end() || found->second.outcome) return;
  const auto& key = found->first;
  auto& pending = found->second;
  const auto failed = [&](std::string why) {
    pending.outcome = Resolution{.key = key, .address = std::nullopt, .error = pending.address + ": " + why};
  };
  const auto timeout_ms = static_cast<int>(options_.resolve_timeout.count());
  switch (event.event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (rdma_resolve_route(event.id, timeout_ms) != 0)
        failed(fmt::format("rdma_resolve_route: {}", std::strerror(errno)));
      return;
    case RDMA_CM_EVENT_ROUTE_RESOLVED: {
      auto parameters = connection_parameters(ConnectOffer{
          .private_data = {}, .responder_resources = 0, .initiator_depth = 0, .qp_num = qp_num(), .datagram = true});
      if (rdma_connect(event.id, &parameters) != 0) failed(fmt::format("rdma_connect: {}", std::strerror(errno)));
      return;
    }
    case RDMA_CM_EVENT_ESTABLISHED: pending.outcome = resolved(key, event); return;
    default:
      failed(fmt::format("{}{}{}", rdma_event_str(event.event),
                         event.status != 0 ? fmt::format(" (status {})", event.status) : "", refused_by_server(event)));
      return;
  }
}

Resolution DatagramPort::resolved(const std::string& key, const rdma_cm_event& event) {
  if (event.id->verbs != listen_id_->verbs) {
    return {.key = key,
            .address = std::nullopt,
            .error = fmt::format("{} is reached through another RDMA device than {}'s", pending_.at(key).address,
                                 local_.host_string())};
  }
  auto path = event.param.ud.ah_attr;
  auto handle = std::make_unique<AddressHandle>(pd_->get(), path);
  const DatagramAddress address{.ah = handle->get(), .qp_num = event.param.ud.qp_num, .qkey = event.param.ud.qkey};
  if (const auto old = lid_of_key_.find(key); old != lid_of_key_.end()) senders_by_lid_.erase(old->second);
  const std::pair<std::uint16_t, std::uint32_t> sender{path.dlid, address.qp_num};
  senders_by_lid_[sender] = ResolvedSender{.key = key, .address = pending_.at(key).address};
  lid_of_key_[key] = sender;
  auto& slot = resolved_handles_[key];
  if (slot) retired_.push_back(std::move(slot));
  slot = std::move(handle);
  return {.key = key, .address = address, .error = {}};
}

bool DatagramPort::send(std::span<const std::uint8_t> bytes, const DatagramAddress& to, std::uint64_t tag) {
  if (free_send_slots_.empty() || bytes.size() > options_.message_bytes) return false;
  const auto slot = free_send_slots_.back();
  const auto offset = options_.receive_slots * slot_bytes_ + std::size_t{slot} * options_.message_bytes;
  std::memcpy(buffer_->data() + offset, bytes.data(), bytes.size());
  ibv_send_wr wr{};
  ibv_sge sge{};
  build_send(SendRequest{.id = WorkId{.kind = WorkKind::send, .owner = generation_, .sequence = slot},
                         .opcode = IBV_WR_SEND,
                         .local = ibv_sge{.addr = buffer_->address() + offset,
                                          .length = static_cast<std::uint32_t>(bytes.size()),
                                          .lkey = buffer_->lkey()},
                         .flags = IBV_SEND_SIGNALED},
             wr, sge);
  address_datagram(to, wr);
  ibv_send_wr* bad = nullptr;
  check_returned(ibv_post_send(qp_->get(), &wr, &bad), "ibv_post_send", "UD send");
  free_send_slots_.pop_back();
  send_tags_[slot] = tag;
  return true;
}

std::size_t DatagramPort::drain(const ArrivalHandler& on_arrival, const SentHandler& on_sent) {
  std::size_t total = 0;
  for (;;) {
    const int got = poll_batch();
    if (got == 0) break;
    const auto taken_ns = monotonic_ns();
    total += static_cast<std::size_t>(got);
    for (std::size_t k = 0; k < static_cast<std::size_t>(got); ++k) {
      std::optional<std::uint64_t> stamp;
      if (stamp_source_ == StampSource::device) stamp = stamps_[k];
      if (stamp_source_ == StampSource::host) stamp = taken_ns;
      take_completion(completions_[k], taken_ns, stamp, on_arrival, on_sent);
    }
  }
  recover();
  retire_unused_handles();
  return total;
}

void DatagramPort::take_completion(const ibv_wc& wc, std::uint64_t taken_ns, std::optional<std::uint64_t> stamp,
                                   const ArrivalHandler& on_arrival, const SentHandler& on_sent) {
  const auto id = WorkId::decode(wc.wr_id);
  // Flushed before the QP was made again: its slots were given out anew then.
  if (id.owner != generation_) return;
  if (wc.status != IBV_WC_SUCCESS) {
    take_failure(wc, id, on_sent);
    return;
  }
  if (id.kind == WorkKind::send) {
    free_send_slots_.push_back(id.sequence);
    if (const auto tag = send_tags_[id.sequence]; tag != 0 && on_sent) on_sent(tag, stamp);
    return;
  }
  const auto* slot = buffer_->data() + std::size_t{id.sequence} * slot_bytes_;
  const auto* grh = reinterpret_cast<const ibv_grh*>(slot);
  const std::span<const std::uint8_t, grh_bytes> header(reinterpret_cast<const std::uint8_t*>(slot), grh_bytes);
  const auto length = wc.byte_len > grh_bytes ? wc.byte_len - grh_bytes : 0;
  on_arrival({.bytes = {reinterpret_cast<const std::uint8_t*>(slot) + grh_bytes, length},
              .source = (wc.wc_flags & IBV_WC_GRH) != 0 ? grh_source_address(header) : resolved_source(wc),
              .source_qp = wc.src_qp,
              .received_ns = taken_ns,
              .completion_stamp = stamp,
              .completion = &wc,
              .grh = grh});
  post_receive(id.sequence);
}

void DatagramPort::take_failure(const ibv_wc& wc, WorkId id, const SentHandler& on_sent) {
  // A datagram that could not go (the netdev down, the path gone) fails alone; one the QP's
  // error state flushed is taken back when the QP is made again (recover).
  const bool flushed = wc.status == IBV_WC_WR_FLUSH_ERR;
  if (!flushed) {
    ++failed_;
    if (failed_ == 1 || failed_ % 1000 == 0) {
      spdlog::warn("a UD {} on {} failed: {} ({} so far)", work_kind_name(id.kind), local_.host_string(),
                   ibv_wc_status_str(wc.status), failed_);
    }
  }
  if (id.kind == WorkKind::send) {
    free_send_slots_.push_back(id.sequence);
    if (const auto tag = send_tags_[id.sequence]; tag != 0 && on_sent) on_sent(tag, std::nullopt);
  }
  if (id.kind == WorkKind::receive && !flushed) post_receive(id.sequence);
}

void DatagramPort::recover() {
  const auto query = query_qp(qp_->get(), IBV_QP_STATE);
  if (!query) return;
  if (query->attributes.qp_state == IBV_QPS_SQE) {
    // A send error stopped the send queue only: back to RTS, the receives untouched.
    ibv_qp_attr rts{};
    rts.qp_state = IBV_QPS_RTS;
    check_returned(ibv_modify_qp(qp_->get(), &rts, IBV_QP_STATE), "ibv_modify_qp", "UD QP from SQE to RTS");
  } else if (query->attributes.qp_state == IBV_QPS_ERR) {
    // Everything posted was flushed: the QP made again from RESET, every slot given out anew
    // under a new generation (the flushed completions still queued are skipped by it), and the
    // answers' address handles dropped (the path under them may have changed).
    ibv_qp_attr reset{};
    reset.qp_state = IBV_QPS_RESET;
    check_returned(ibv_modify_qp(qp_->get(), &reset, IBV_QP_STATE), "ibv_modify_qp", "UD QP to RESET");
    ready_qp();
    generation_ = (generation_ + 1) & WorkId::owner_mask;
    free_send_slots_.clear();
    for (auto slot = static_cast<std::uint32_t>(options_.send_slots); slot > 0; --slot)
      free_send_slots_.push_back(slot - 1);
    for (std::uint32_t slot = 0; slot < options_.receive_slots; ++slot) post_receive(slot);
    reply_handles_.clear();
  } else {
    return;
  }
  ++recoveries_;
  // While a netdev is down every send errors the QP again: said the 1st, 2nd, 4th, 8th...
  // time, not a line per send.
  if (std::has_single_bit(recoveries_)) {
    spdlog::warn("the UD QP on {} was in {}: made ready again ({} time(s))", local_.host_string(),
                 query->attributes.qp_state == IBV_QPS_SQE ? "SQE" : "ERR", recoveries_);
  }
}

void DatagramPort::retire_unused_handles() {
  if (free_send_slots_.size() != options_.send_slots) return;
  retired_.clear();
  if (reply_handles_.size() > max_reply_handles) reply_handles_.clear();
}

const DatagramPort::ResolvedSender* DatagramPort::sender_without_grh(const ibv_wc& wc) const {
  const auto found = senders_by_lid_.find({wc.slid, wc.src_qp});
  return found == senders_by_lid_.end() ? nullptr : &found->second;
}

std::string DatagramPort::resolved_source(const ibv_wc& wc) const {
  const auto* sender = sender_without_grh(wc);
  return sender != nullptr ? sender->address : std::string();
}

DatagramAddress DatagramPort::reply_to(const ReplyRoute& route) {
  // No GRH to build a handle from (on RoCE none can be made without one): the peer's own.
  if ((route.completion.wc_flags & IBV_WC_GRH) == 0) {
    if (const auto* sender = sender_without_grh(route.completion)) {
      if (const auto handle = resolved_handles_.find(sender->key); handle != resolved_handles_.end()) {
        return {.ah = handle->second->get(), .qp_num = route.source_qp, .qkey = qkey_};
      }
    }
  }
  auto& handle = reply_handles_[{route.source, route.source_qp}];
  if (!handle) handle = std::make_unique<AddressHandle>(pd_->get(), route.completion, &route.grh, port_num_);
  return {.ah = handle->get(), .qp_num = route.source_qp, .qkey = qkey_};
}

Woken DatagramPort::sleep(Clock::time_point until) {
  if (!waiter_->armed()) {
    waiter_->arm();
    return Woken::completion;  // the caller drains once more before it sleeps
  }
  return waiter_->sleep(until);
}

}  // namespace rdmakit
