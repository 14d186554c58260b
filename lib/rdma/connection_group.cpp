#include "lib/rdma/connection_group.hpp"

#include <endian.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <numeric>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lib/base/error.hpp"
#include "lib/rdma/device_query.hpp"
#include "lib/rdma/work_id.hpp"
#include "lib/rdma/work_request.hpp"

namespace rdmakit {

namespace {

// The deadline for a first wait: unset means the plain timeout, zero means forever.
Clock::time_point first_deadline(std::optional<std::chrono::milliseconds> wait, std::chrono::milliseconds timeout) {
  if (!wait) return Clock::now() + timeout;
  return wait->count() == 0 ? Clock::time_point::max() : Clock::now() + *wait;
}

// The call whose asynchronous completion a failing event reports, by the state it left.
const char* call_for(CmState state) {
  switch (state) {
    case CmState::resolving_addr:
    case CmState::resolving_group: return "rdma_resolve_addr";
    case CmState::resolving_route: return "rdma_resolve_route";
    case CmState::connecting: return "rdma_connect";
    case CmState::accepting: return "rdma_accept";
    case CmState::joining: return "rdma_join_multicast";
    default: return "rdma_get_cm_event";
  }
}

// A connection's requests: owner = its index, sequence = the receive slot (from 1; 0 for sends).
WorkId work_id_of(WorkKind kind, std::size_t connection, std::uint32_t slot) {
  return WorkId{.kind = kind, .owner = static_cast<std::uint32_t>(connection), .sequence = slot};
}

void require_infiniband_port(rdma_cm_id* id, const std::string& feature) {
  if (id->verbs == nullptr) {
    throw UsageError(feature + " need a bound device: give -b with a local address");
  }
  ibv_port_attr port{};
  check_returned(ibv_query_port(id->verbs, id->port_num, &port), "ibv_query_port",
                 ibv_get_device_name(id->verbs->device));
  if (port.link_layer != IBV_LINK_LAYER_INFINIBAND) {
    throw Unsupported(
        fmt::format("{} need an InfiniBand port; {} port {} is Ethernet (RoCE, e.g. rxe), where "
                    "multicast groups are IP addresses: use -m",
                    feature, ibv_get_device_name(id->verbs->device), id->port_num));
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Connection

Connection::Connection(std::size_t index, CmId id) : index_(index), id_(std::move(id)) {
  id_->context = this;
}

Connection::~Connection() {
  // The QP belongs to the cm_id but must go before its CQ and PD; the rest follows in
  // member order.
  ah_.reset();
  id_.destroy_qp();
}

void Connection::begin(Step step) {
  end_step();
  current_.emplace(step);
}

void Connection::end_step(bool failed) {
  if (current_) {
    steps_.push_back(current_->span(failed));
    current_.reset();
  }
}

// ---------------------------------------------------------------------------------------
// ConnectionGroup: setup

ConnectionGroup::ConnectionGroup(GroupOptions options) : options_(options) {
  // Every connection registers one send slot and -C receive slots; refuse absurd products
  // before any resource exists.
  constexpr std::uint64_t max_buffer_bytes = 1ULL << 30;
  const auto bytes = options_.message_size + std::uint64_t{options_.message_count} * receive_slot_bytes();
  if (bytes > max_buffer_bytes) {
    throw UsageError(
        fmt::format("-C {} with -S {} needs {} bytes of registered memory per connection; keep it "
                    "under 1 GiB",
                    options_.message_count, options_.message_size, bytes));
  }
  channel_ = std::make_unique<EventChannel>();
  waiter_.watch_cm(channel_->fd());
}

ConnectionGroup::~ConnectionGroup() {
  leave();
}

std::unique_ptr<Connection>& ConnectionGroup::add_connection(CmId id) {
  connections_.push_back(std::unique_ptr<Connection>(new Connection(connections_.size(), std::move(id))));
  return connections_.back();
}

void ConnectionGroup::connect(const rdma_addrinfo& target) {
  target_ = address_of(target.ai_dst_addr).to_string();
  target_host_ = address_of(target.ai_dst_addr).host_string();
  target_family_ = target.ai_family;
  if (target.ai_connect_len > 0) {
    const auto* bytes = static_cast<const std::uint8_t*>(target.ai_connect);
    private_data_.assign(bytes, bytes + target.ai_connect_len);
  }
  for (std::size_t i = 0; i < options_.connections; ++i) {
    const StepTimer timer(Step::create_id);
    auto& connection = add_connection(CmId(*channel_, options_.port_space));
    connection->steps_.push_back(timer.span());
  }
  for (auto& connection : connections_) {
    connection->begin(Step::resolve_addr);
    connection->state_ = CmState::resolving_addr;
    try {
      check_errno(rdma_resolve_addr(connection->id_.get(), target.ai_src_addr, target.ai_dst_addr,
                                    timeout_ms(options_.limits.timeout)),
                  "rdma_resolve_addr", target_, target_host_);
    } catch (const RdmaError& error) {
      fail(*connection, error);
    }
  }
  pump([this] { return all_settled(); }, "connection setup to " + target_);
  require_one_ready();
}

void ConnectionGroup::listen(const sockaddr* address) {
  listen_id_ = CmId(*channel_, options_.port_space);
  const auto where = address_of(address).to_string();
  check_errno(rdma_bind_addr(listen_id_.get(), const_cast<sockaddr*>(address)), "rdma_bind_addr", where,
              address_of(address).host_string());
  check_errno(rdma_listen(listen_id_.get(), 0), "rdma_listen", where);
}

void ConnectionGroup::accept() {
  pump([this] { return connections_.size() == options_.connections && all_settled(); },
       std::to_string(options_.connections) + " connection(s) on " + local_address(),
       first_deadline(options_.accept_timeout, options_.limits.timeout));
  require_one_ready();
}

void ConnectionGroup::join(const sockaddr* source, const sockaddr* group) {
  group_ = address_of(group);
  target_ = group_.host_string();
  target_host_ = target_;
  for (std::size_t i = 0; i < options_.connections; ++i) {
    const StepTimer timer(Step::create_id);
    auto& connection = add_connection(CmId(*channel_, options_.port_space));
    connection->steps_.push_back(timer.span());
    if (source != nullptr) {
      connection->begin(Step::bind_addr);
      const auto host = address_of(source).host_string();
      check_errno(rdma_bind_addr(connection->id_.get(), const_cast<sockaddr*>(source)), "rdma_bind_addr", host, host);
      connection->end_step();
    }
  }
  for (auto& connection : connections_) {
    try {
      if (group_.family() == AF_IB) {
        // An AF_IB group names its MGID directly: nothing to resolve, but only an InfiniBand
        // port has MGIDs that are not derived from an IP address.
        require_infiniband_port(connection->id_.get(), "AF_IB multicast groups (-M)");
        connection->state_ = CmState::joining;
        start_join(*connection);
        continue;
      }
      connection->begin(Step::resolve_addr);
      connection->state_ = CmState::resolving_group;
      check_errno(rdma_resolve_addr(connection->id_.get(), const_cast<sockaddr*>(source), group_.get(),
                                    timeout_ms(options_.limits.timeout)),
                  "rdma_resolve_addr", target_, target_host_);
    } catch (const RdmaError& error) {
      fail(*connection, error);
    }
  }
  joined_ = true;
  pump([this] { return all_settled(); }, "the join of " + target_);
  require_one_ready();
}

void ConnectionGroup::leave() noexcept {
  if (!joined_) {
    return;
  }
  joined_ = false;
  for (auto& connection : connections_) {
    if (connection->ready_at_) {
      connection->begin(Step::leave);
      if (rdma_leave_multicast(connection->id_.get(), group_.get()) != 0) {
        spdlog::warn("rdma_leave_multicast({}): {}", target_, std::strerror(errno));
      }
      connection->end_step();
    }
  }
}

void ConnectionGroup::set_id_options(Connection& connection, bool active) {
  if (active && options_.type_of_service) {
    std::uint8_t tos = *options_.type_of_service;
    check_errno(rdma_set_option(connection.id_.get(), RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof tos),
                "rdma_set_option", "type of service");
  }
  if (options_.ack_timeout) {
    std::uint8_t ack = *options_.ack_timeout;
    check_errno(rdma_set_option(connection.id_.get(), RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &ack, sizeof ack),
                "rdma_set_option", "ack timeout");
  }
}

std::size_t ConnectionGroup::receive_slot_bytes() const {
  return options_.message_size + (is_datagram(options_.port_space) ? grh_bytes : 0);
}

void ConnectionGroup::create_resources(Connection& connection) {
  connection.begin(Step::create_qp);
  rdma_cm_id* id = connection.id_.get();
  if (id->verbs == nullptr) {
    // Address resolution (or a connect request) always binds a device; this is no errno.
    throw std::runtime_error("rdma_cm bound no RDMA device to " + address_of(rdma_get_local_addr(id)).to_string());
  }
  const std::string device = ibv_get_device_name(id->verbs->device);
  if (is_datagram(options_.port_space)) {
    // udaddy and mckey on iWARP: the sentence, not EOPNOTSUPP from rdma_create_qp.
    const auto caps = read_device_caps(id->verbs, id->port_num);
    if (const auto missing = missing_for(caps, joined_ ? Need::multicast : Need::datagrams)) {
      throw Unsupported(*missing);
    }
  }
  if (is_datagram(options_.port_space) && options_.message_count > 0) {
    const auto mtu = datagram_mtu(id);
    if (options_.message_size > mtu) {
      throw UsageError(fmt::format(
          "message size {} is larger than the active MTU of {} port {} or its path's ({} bytes); use -S {} or less",
          options_.message_size, device, id->port_num, mtu, mtu));
    }
  }
  if (context_ == nullptr) {
    context_ = id->verbs;
    completion_channel_ = std::make_unique<CompletionChannel>(context_);
  } else if (context_ != id->verbs) {
    // One completion channel serves the group, and it belongs to one device.
    throw std::runtime_error("connections on two RDMA devices (" + device + " and " +
                             ibv_get_device_name(context_->device) + "): bind with -b to use one");
  }
  connection.pd_ = std::make_unique<ProtectionDomain>(id->verbs);
  const std::uint32_t depth = std::max<std::uint32_t>(options_.message_count, 1);
  connection.cq_ = std::make_unique<CompletionQueue>(id->verbs, static_cast<int>(2 * depth), *completion_channel_);
  waiter_.watch(connection.cq_->get());

  auto attributes = qp_attributes({.type = is_datagram(options_.port_space) ? IBV_QPT_UD : IBV_QPT_RC,
                                   .send_depth = depth,
                                   .receive_depth = depth,
                                   .signal_every_send = true,
                                   .inline_bytes = 0},
                                  connection.cq_->get());
  try {
    create_qp(connection, attributes);
  } catch (const RdmaError& error) {
    if (is_datagram(options_.port_space)) throw_datagram_refusal(error, device);
    throw;
  }
  if (options_.message_count > 0) {
    connection.buffer_ = std::make_unique<RegisteredBuffer>(
        connection.pd_->get(), options_.message_size + options_.message_count * receive_slot_bytes(),
        IBV_ACCESS_LOCAL_WRITE);
    std::memset(connection.buffer_->data(), 0x5a, options_.message_size);
  }
  connection.end_step();
}

void ConnectionGroup::create_qp(Connection& connection, ibv_qp_init_attr& attributes) const {
  const std::string device = ibv_get_device_name(connection.id_->verbs->device);
  if (!options_.block_loopback) {
    connection.id_.create_qp(connection.pd_->get(), attributes, device);
    return;
  }
  try {
    connection.id_.create_qp(connection.pd_->get(), attributes, device, IBV_QP_CREATE_BLOCK_SELF_MCAST_LB);
  } catch (const RdmaError& error) {
    const int err = error.errnum();
    if (err == EOPNOTSUPP || err == EINVAL || err == ENOTSUP) {
      throw Unsupported(
          fmt::format("{} cannot block multicast loopback (-l): rdma_create_qp_ex with "
                      "IBV_QP_CREATE_BLOCK_SELF_MCAST_LB failed: {}",
                      device, std::strerror(err)));
    }
    throw;
  }
}

void ConnectionGroup::post_receives(Connection& connection) {
  if (!options_.post_receives || options_.message_count == 0) {
    return;
  }
  const auto slot_bytes = receive_slot_bytes();
  for (std::uint32_t slot = 0; slot < options_.message_count; ++slot) {
    const ibv_sge slot_memory{.addr = connection.buffer_->address() + options_.message_size + slot * slot_bytes,
                              .length = static_cast<std::uint32_t>(slot_bytes),
                              .lkey = connection.buffer_->lkey()};
    ibv_sge sge{};
    ibv_recv_wr wr{};
    build_receive(work_id_of(WorkKind::receive, connection.index_, slot + 1), slot_memory, wr, sge);
    ibv_recv_wr* bad = nullptr;
    if (const int rc = ibv_post_recv(connection.id_->qp, &wr, &bad); rc != 0) [[unlikely]] {
      check_returned(rc, "ibv_post_recv", "connection " + std::to_string(connection.index_));
    }
  }
}

void ConnectionGroup::post_sends(Connection& connection, std::uint64_t count) {
  const bool datagram = is_datagram(options_.port_space);
  if (datagram && connection.ah_ == nullptr) {
    throw ProtocolError("connection " + std::to_string(connection.index_) +
                        ": no address handle to send to (the peer's first datagram never arrived)");
  }
  ibv_sge sge{};
  ibv_send_wr wr{};
  build_send(SendRequest{.id = work_id_of(WorkKind::send, connection.index_, 0),
                         // The stock tools send our QP number as immediate data; a passive peer replies to it.
                         .opcode = datagram ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND,
                         .local = ibv_sge{.addr = connection.buffer_->address(),
                                          .length = options_.message_size,
                                          .lkey = connection.buffer_->lkey()}},
             wr, sge);
  if (datagram) {
    wr.imm_data = htobe32(connection.id_->qp->qp_num);
    address_datagram({.ah = connection.ah_->get(), .qp_num = connection.remote_qpn_, .qkey = connection.remote_qkey_},
                     wr);
  }
  for (std::uint64_t i = 0; i < count; ++i) {
    ibv_send_wr* bad = nullptr;
    if (const int rc = ibv_post_send(connection.id_->qp, &wr, &bad); rc != 0) [[unlikely]] {
      check_returned(rc, "ibv_post_send", "connection " + std::to_string(connection.index_));
    }
    ++connection.sends_posted_;
  }
}

// ---------------------------------------------------------------------------------------
// Events

void ConnectionGroup::pump(const Predicate& done, const std::string& awaiting,
                           std::optional<Clock::time_point> initial_deadline) {
  const auto now = Clock::now();
  SilenceBound silence(options_.limits.timeout, now, initial_deadline.value_or(now + options_.limits.timeout));
  for (;;) {
    // Completions before and after the CM events: a peer's DISCONNECTED may be read before
    // the completions that preceded it (an RC send ACKed just before the peer hung up).
    bool progress = drain_completions();
    while (auto event = poll_cm_event(*channel_)) {
      handle(*event);
      progress = true;
      progress = drain_completions() || progress;
    }
    if (done()) {
      return;
    }
    if (progress) {
      silence.progressed(Clock::now());  // the timeout bounds silence, not the whole phase
    }
    if (!waiter_.armed()) {
      waiter_.arm();  // then drain once more: a completion that arrived in between raises no event
      continue;
    }
    const auto woken = waiter_.sleep(silence.deadline());
    if (woken == Woken::timed_out) throw RunStopped(StopReason::timed_out, "timed out waiting for " + awaiting);
    if (woken == Woken::stopped) throw RunStopped(StopReason::interrupted, "interrupted while waiting for " + awaiting);
  }
}

void ConnectionGroup::handle(rdma_cm_event& event) {
  const auto type = classify(event.event);
  if (type == CmEvent::connect_request) {
    on_connect_request(event);
    return;
  }
  auto* connection = static_cast<Connection*>(event.id->context);
  if (connection == nullptr) {  // an event on the listening id
    if (type == CmEvent::device_removal) {
      throw RdmaError::without_errno("rdma_listen", local_address(), "the device was removed (DEVICE_REMOVAL)");
    }
    events_.push_back({{"event", to_string(type)}, {"status", event.status}, {"connection", nullptr}});
    return;
  }
  if (connection->failure_) {
    spdlog::debug("connection {}: {} after it failed; ignored", connection->index_, to_string(type));
    return;
  }
  if (type == CmEvent::addr_change || type == CmEvent::multicast_error) {
    spdlog::warn("connection {}: {} (status {})", connection->index_, to_string(type), event.status);
    events_.push_back({{"event", to_string(type)}, {"status", event.status}, {"connection", connection->index_}});
  }
  const auto before = connection->state_;
  const auto transition = advance(connection->state_, event);
  try {
    act(*connection, transition, before, event);
  } catch (const RdmaError& error) {
    fail(*connection, error);
  }
}

void ConnectionGroup::act(Connection& connection, const CmTransition& transition, CmState before,
                          rdma_cm_event& event) {
  const auto type = classify(event.event);
  rdma_cm_id* id = connection.id_.get();
  switch (transition.action) {
    case CmAction::none: return;
    case CmAction::resolve_route:
      set_id_options(connection, true);
      connection.begin(Step::resolve_route);
      check_errno(rdma_resolve_route(id, timeout_ms(options_.limits.timeout)), "rdma_resolve_route", target_,
                  target_host_);
      return;
    case CmAction::join: start_join(connection); return;
    case CmAction::connect: {
      create_resources(connection);
      post_receives(connection);
      connection.begin(Step::connect);
      auto parameters = connection_parameters(ConnectOffer{.private_data = private_data_,
                                                           .responder_resources = 1,
                                                           .initiator_depth = 1,
                                                           .qp_num = std::nullopt,
                                                           .datagram = is_datagram(options_.port_space)});
      check_errno(rdma_connect(id, &parameters), "rdma_connect", target_);
      return;
    }
    case CmAction::start_traffic: on_ready(connection, event); return;
    case CmAction::stop_traffic:
      // Whoever started it, each side records its disconnect step: when the peer's DREQ
      // arrives before this side awaited it, the step is the answer alone.
      if (!connection.current_ || connection.current_->step() != Step::disconnect) connection.begin(Step::disconnect);
      if (!connection.disconnecting_) {
        connection.disconnecting_ = true;  // the peer went first: answer so its side completes
        rdma_disconnect(id);
      }
      connection.end_step();
      return;
    case CmAction::fail:
      spdlog::debug("connection {}: {} ({} status {})", connection.index_, transition.reason, to_string(type),
                    event.status);
      if (target_family_ == AF_IB) {
        throw Unsupported(
            fmt::format("AF_IB addressing (-f gid) failed at {}: {}; RoCE devices such as rxe "
                        "cannot resolve AF_IB paths: use -f ip or -f ipv6",
                        call_for(before), event_failure(event, call_for(before), target_).what()));
      }
      throw event_failure(event, call_for(before),
                          (target_.empty() ? local_address() : target_) + refused_by_server(event), target_host_);
    case CmAction::accept:
    case CmAction::establish:
      throw ProtocolError("connection " + std::to_string(connection.index_) + ": unexpected " + to_string(type) +
                          " while " + to_string(before));
  }
}

void ConnectionGroup::fail(Connection& connection, const RdmaError& error) {
  spdlog::warn("connection {}: {}", connection.index_, error.what());
  connection.end_step(true);
  connection.state_ = CmState::failed;
  connection.failure_ = error;
  if (!first_failure_) first_failure_ = error;
}

bool ConnectionGroup::all_settled() const {
  return std::ranges::all_of(connections_, [](const auto& c) { return c->ready_at_ || c->failure_; });
}

void ConnectionGroup::require_one_ready() const {
  if (first_failure_ && std::ranges::none_of(connections_, [](const auto& c) { return c->ready_at_.has_value(); })) {
    throw *first_failure_;
  }
}

void ConnectionGroup::start_join(Connection& connection) {
  create_resources(connection);
  post_receives(connection);
  connection.begin(Step::join);
  rdma_cm_join_mc_attr_ex attributes{};
  attributes.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
  attributes.addr = group_.get();
  attributes.join_flags =
      options_.send_only_join ? RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER : RDMA_MC_JOIN_FLAG_FULLMEMBER;
  if (rdma_join_multicast_ex(connection.id_.get(), &attributes, &connection) != 0) {
    const int err = errno;
    // 524 is the kernel's internal ENOTSUPP, which leaks out of rdma_ucm unnamed: RoCE v2
    // joins only IPv4 groups (the kernel has no MLD path for IPv6 groups on RoCE).
    constexpr int kernel_enotsupp = 524;
    if (err == kernel_enotsupp || err == EOPNOTSUPP || err == ENOSYS) {
      throw Unsupported(
          fmt::format("the kernel cannot join {} on {} ({}rdma_join_multicast: error {}); RoCE v2 "
                      "devices such as rxe join IPv4 groups only",
                      target_, ibv_get_device_name(connection.id_->verbs->device),
                      options_.send_only_join ? "send-only, " : "", err));
    }
    throw RdmaError("rdma_join_multicast", target_, err);
  }
}

void ConnectionGroup::on_ready(Connection& connection, const rdma_cm_event& event) const {
  connection.end_step();
  if (!is_datagram(options_.port_space)) {
    keep_rnr_naks_short(connection.id_->qp);
  } else {
    // Active UD side and multicast: the event carries the path, QP number and Q_Key.
    auto path = event.param.ud.ah_attr;
    connection.ah_ = std::make_unique<AddressHandle>(connection.pd_->get(), path);
    connection.remote_qpn_ = event.param.ud.qp_num;
    connection.remote_qkey_ = event.param.ud.qkey;
  }
  connection.ready_at_ = Clock::now();
  // For the report, read back after ready_at_: the setup rate times connecting only.
  if (!is_datagram(options_.port_space)) connection.rnr_nak_timer_ = rnr_nak_timer_of(connection.id_->qp);
}

void ConnectionGroup::keep_rejected(const rdma_cm_event& event, const char* why) {
  // The requests rejected before this one had their events acked, so their ids may go now:
  // a peer that keeps asking holds one id here, not one per request.
  rejected_.clear();
  rejected_.emplace_back(event.id);
  // The refusals are counted in refused_peers; the event list keeps the first few, so that
  // a flood of requests cannot grow the report without bound.
  if (++rejected_requests_ <= max_rejections_listed) {
    events_.push_back({{"event", "CONNECT_REQUEST"}, {"status", event.status}, {"rejected", why}});
  }
}

void ConnectionGroup::on_connect_request(rdma_cm_event& event) {
  std::optional<PeerGate::Slot> slot;
  if (options_.gate) {
    slot = admit_request(*options_.gate, event.id);
    if (!slot) {
      keep_rejected(event, "refused");
      return;
    }
  }
  if (connections_.size() >= options_.connections) {
    spdlog::warn("rejecting a connection request beyond the {} expected", options_.connections);
    rdma_reject(event.id, nullptr, 0);
    keep_rejected(event, "beyond -c");
    return;
  }
  if (slot) gate_slots_.push_back(std::move(*slot));
  auto& connection = add_connection(CmId(event.id));
  connection->state_ = CmState::accepting;
  try {
    accept_request(*connection);
  } catch (const RdmaError& error) {
    fail(*connection, error);
  }
}

void ConnectionGroup::accept_request(Connection& connection) {
  set_id_options(connection, false);
  create_resources(connection);
  post_receives(connection);
  connection.begin(Step::accept);
  const bool datagram = is_datagram(options_.port_space);
  auto parameters = connection_parameters(
      ConnectOffer{.private_data = {},
                   .responder_resources = 1,
                   .initiator_depth = 1,
                   .qp_num = datagram ? std::optional<std::uint32_t>(connection.id_->qp->qp_num) : std::nullopt,
                   .datagram = datagram});
  check_errno(rdma_accept(connection.id_.get(), &parameters), "rdma_accept", local_address());
  if (is_datagram(options_.port_space)) {
    // A SIDR reply completes the exchange; no ESTABLISHED follows on this side. The reply
    // path comes from the first datagram.
    connection.end_step();
    connection.state_ = CmState::established;
    connection.ready_at_ = Clock::now();
  }
}

// ---------------------------------------------------------------------------------------
// Completions

bool ConnectionGroup::drain_completions() {
  bool any = false;
  std::array<ibv_wc, 16> completions{};
  for (std::size_t i = 0; i < connections_.size(); ++i) {
    auto* cq = connections_[i]->cq_ ? connections_[i]->cq_->get() : nullptr;
    if (cq == nullptr) {
      continue;
    }
    for (;;) {
      const int n = ibv_poll_cq(cq, static_cast<int>(completions.size()), completions.data());
      if (n < 0) {
        throw RdmaError::without_errno("ibv_poll_cq", "connection " + std::to_string(i), fmt::format("returned {}", n));
      }
      for (int k = 0; k < n; ++k) {
        on_completion(completions[static_cast<std::size_t>(k)]);
      }
      any = any || n > 0;
      if (n < static_cast<int>(completions.size())) {
        break;
      }
    }
  }
  return any;
}

void ConnectionGroup::on_completion(const ibv_wc& completion) {
  const auto id = WorkId::decode(completion.wr_id);
  const auto index = static_cast<std::size_t>(id.owner);
  const auto slot = id.sequence;
  if (index >= connections_.size()) {
    throw ProtocolError("completion for unknown connection " + std::to_string(index));
  }
  auto& connection = *connections_[index];
  if (completion.status != IBV_WC_SUCCESS) {
    if (completion.status == IBV_WC_WR_FLUSH_ERR && (connection.disconnecting_ || connection.failure_)) {
      return;  // receives left over when the connection closed or failed
    }
    throw completion_error(
        completion, fmt::format("connection {}: {} completion failed: {}", index,
                                id.kind == WorkKind::send ? "send" : "receive", ibv_wc_status_str(completion.status)));
  }
  if (id.kind == WorkKind::send) {
    ++connection.sends_completed_;
    return;
  }
  if (slot > options_.message_count) {
    throw ProtocolError(
        fmt::format("connection {}: completion for receive slot {} of {}", index, slot, options_.message_count));
  }
  if (completion.byte_len > receive_slot_bytes()) {
    throw ProtocolError(fmt::format("connection {}: received {} bytes into a {}-byte buffer", index,
                                    completion.byte_len, receive_slot_bytes()));
  }
  ++connection.received_;
  if (is_datagram(options_.port_space) && connection.ah_ == nullptr && !joined_) {
    const auto* slot_start = connection.buffer_->data() + options_.message_size + (slot - 1) * receive_slot_bytes();
    answer_first_datagram(connection, completion, slot_start);
  }
}

void ConnectionGroup::answer_first_datagram(Connection& connection, const ibv_wc& completion, const std::byte* slot) {
  if ((completion.wc_flags & IBV_WC_WITH_IMM) == 0) {
    throw ProtocolError(
        fmt::format("connection {}: the peer's datagram carries no immediate data (its QP number)", connection.index_));
  }
  const auto announced_qpn = be32toh(completion.imm_data);
  if (announced_qpn != completion.src_qp) {
    throw ProtocolError(fmt::format("connection {}: the peer announced QP {} but sent from QP {}", connection.index_,
                                    announced_qpn, completion.src_qp));
  }
  const auto* grh = reinterpret_cast<const ibv_grh*>(slot);
  connection.ah_ = std::make_unique<AddressHandle>(connection.pd_->get(), completion, grh, connection.id_->port_num);
  connection.remote_qpn_ = announced_qpn;
  connection.remote_qkey_ = query_qp_checked(connection.id_->qp, IBV_QP_QKEY, "Q_Key").attributes.qkey;
}

// ---------------------------------------------------------------------------------------
// Traffic and teardown

namespace {

bool exchange_finished(const Connection& connection, std::uint64_t receive_target) {
  return connection.received() >= receive_target && connection.sends_completed() >= connection.sends_expected();
}

}  // namespace

void ConnectionGroup::exchange(Step step, std::uint64_t sends_each, std::uint64_t receives_total_each,
                               const std::string& awaiting) {
  std::vector<Connection*> active;
  for (auto& connection : connections_) {
    if (connection->state_ == CmState::established) {
      active.push_back(connection.get());
    }
  }
  std::vector<std::uint64_t> receive_targets;
  for (auto* connection : active) {
    connection->begin(step);
    // Absolute: datagrams may arrive before this phase starts (while other connections
    // are still being accepted), and they count.
    receive_targets.push_back(std::max(connection->received_, receives_total_each));
    connection->receives_expected_ = std::max(connection->receives_expected_, receive_targets.back());
    connection->sends_expected_ = connection->sends_posted_ + sends_each;
  }
  for (auto* connection : active) {
    if (sends_each > 0) post_sends(*connection, sends_each);
  }
  try {
    pump([&] { return exchanged(active, receive_targets); }, awaiting,
         first_deadline(options_.first_message_timeout, options_.limits.timeout));
  } catch (const RunStopped& stopped) {
    if (stopped.reason() != StopReason::timed_out) throw;
    throw_short(stopped, active, receive_targets);
  }
}

bool ConnectionGroup::exchanged(const std::vector<Connection*>& active, const std::vector<std::uint64_t>& targets) {
  bool all = true;
  for (std::size_t k = 0; k < active.size(); ++k) {
    if (exchange_finished(*active[k], targets[k])) {
      if (active[k]->current_) active[k]->end_step();
      continue;
    }
    if (active[k]->state_ != CmState::established) {
      throw RunStopped(StopReason::peer_disconnected,
                       fmt::format("connection {}: the peer disconnected after {} of {} messages", active[k]->index_,
                                   active[k]->received_, targets[k]));
    }
    all = false;
  }
  return all;
}

void ConnectionGroup::throw_short(const RunStopped& stopped, const std::vector<Connection*>& active,
                                  const std::vector<std::uint64_t>& targets) {
  std::uint64_t missing = 0;
  std::size_t short_connections = 0;
  for (std::size_t k = 0; k < active.size(); ++k) {
    if (!exchange_finished(*active[k], targets[k])) ++short_connections;
    missing += targets[k] > active[k]->received_ ? targets[k] - active[k]->received_ : 0;
  }
  throw RunStopped(StopReason::timed_out, fmt::format("{} ({} connection(s) short, {} message(s) missing)",
                                                      stopped.what(), short_connections, missing));
}

void ConnectionGroup::disconnect() {
  for (auto& connection : connections_) {
    if (connection->state_ == CmState::established && !connection->disconnecting_) {
      connection->disconnecting_ = true;
      connection->begin(Step::disconnect);
      check_errno(rdma_disconnect(connection->id_.get()), "rdma_disconnect", target_);
    }
  }
  pump(
      [this] {
        return std::ranges::none_of(connections_, [](const auto& c) { return c->state_ == CmState::established; });
      },
      "the disconnect handshakes");
}

void ConnectionGroup::await_disconnect() {
  for (auto& connection : connections_) {
    if (connection->state_ == CmState::established) connection->begin(Step::disconnect);
  }
  pump(
      [this] {
        return std::ranges::none_of(connections_, [](const auto& c) { return c->state_ == CmState::established; });
      },
      "the peer to disconnect");
}

void ConnectionGroup::migrate() {
  auto fresh = std::make_unique<EventChannel>();
  if (listen_id_.get() != nullptr) {
    check_errno(rdma_migrate_id(listen_id_.get(), fresh->get()), "rdma_migrate_id", "listening id");
  }
  for (auto& connection : connections_) {
    check_errno(rdma_migrate_id(connection->id_.get(), fresh->get()), "rdma_migrate_id",
                "connection " + std::to_string(connection->index_));
  }
  waiter_.forget_cm(channel_->fd());
  channel_ = std::move(fresh);
  waiter_.watch_cm(channel_->fd());
}

std::string ConnectionGroup::local_address() const {
  if (listen_id_.get() != nullptr) {
    return address_of(rdma_get_local_addr(listen_id_.get())).to_string();
  }
  if (!connections_.empty()) {
    return address_of(rdma_get_local_addr(connections_.front()->id_.get())).to_string();
  }
  return {};
}

}  // namespace rdmakit
