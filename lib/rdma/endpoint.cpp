#include "lib/rdma/endpoint.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lib/base/error.hpp"
#include "lib/rdma/device_query.hpp"
#include "lib/rdma/work_id.hpp"
#include "lib/rdma/work_request.hpp"

namespace rdmakit {

namespace {

// An error completion's opcode field is undefined: the kind comes from the id
// (lib/rdma/work_id.hpp); the caller's id is its sequence.
WorkId work_id(WorkKind kind, std::uint64_t wr_id) {
  return WorkId{.kind = kind, .owner = 0, .sequence = static_cast<std::uint32_t>(wr_id)};
}

void post(ibv_qp* qp, const SendRequest& request) {
  ibv_sge sge{};
  ibv_send_wr wr{};
  build_send(request, wr, sge);
  ibv_send_wr* bad = nullptr;
  check_returned(ibv_post_send(qp, &wr, &bad), "ibv_post_send", "");
}

ibv_sge local_sge(const RegisteredBuffer& buffer, std::size_t length) {
  return ibv_sge{.addr = buffer.address(), .length = static_cast<std::uint32_t>(length), .lkey = buffer.lkey()};
}

std::string completion_message(const ibv_wc& wc) {
  return fmt::format("{} failed: {} (status {}, vendor error 0x{:x})", work_kind_name(WorkId::decode(wc.wr_id).kind),
                     ibv_wc_status_str(wc.status), static_cast<int>(wc.status), wc.vendor_err);
}

}  // namespace

Endpoint::Endpoint(std::unique_ptr<EventChannel> channel, CmId id, const EndpointOptions& options, CmState state)
    : channel_(std::move(channel)), id_(std::move(id)), options_(options), state_(state) {}

Endpoint::~Endpoint() {
  if (state_ == CmState::established && !disconnect_sent_ && !options_.datagram) {
    rdma_disconnect(id_.get());
  }
  buffers_.clear();
  peer_ah_.reset();
  id_.destroy_qp();
  own_qp_.reset();
  cq_.reset();
  completion_channel_.reset();
  pd_.reset();
}

std::unique_ptr<Endpoint> Endpoint::resolve(const SocketAddress* source, const SocketAddress& destination,
                                            const EndpointOptions& options, const StepEvents& steps) {
  auto channel = std::make_unique<EventChannel>();
  CmId id(*channel, options.datagram ? RDMA_PS_UDP : RDMA_PS_TCP);
  std::unique_ptr<Endpoint> endpoint(new Endpoint(std::move(channel), std::move(id), options, CmState::idle));
  rdma_cm_id* cm_id = endpoint->id_.get();
  if (options.type_of_service) {
    auto tos = *options.type_of_service;
    check_errno(rdma_set_option(cm_id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof tos), "rdma_set_option",
                "TOS " + std::to_string(tos));
  }
  endpoint->set_ack_timeout();
  const auto target = destination.to_string();
  const auto host = destination.host_string();

  StepTimer timer(Step::resolve_addr);
  check_errno(rdma_resolve_addr(cm_id, source ? const_cast<sockaddr*>(source->get()) : nullptr,
                                const_cast<sockaddr*>(destination.get()), timeout_ms(options.limits.timeout)),
              "rdma_resolve_addr", target, host);
  endpoint->state_ = CmState::resolving_addr;
  endpoint->await_action(CmAction::resolve_route, "rdma_resolve_addr", target, host, "address resolution of " + target);
  steps(timer.next(Step::resolve_route));
  check_errno(rdma_resolve_route(cm_id, timeout_ms(options.limits.timeout)), "rdma_resolve_route", target, host);
  endpoint->await_action(CmAction::connect, "rdma_resolve_route", target, host, "route resolution to " + target);
  steps(timer.span());
  endpoint->create_resources();
  return endpoint;
}

void Endpoint::await_action(CmAction wanted, const char* call, const std::string& target, const std::string& host,
                            const std::string& awaiting) {
  for (;;) {
    auto event = next_cm_event(*channel_, deadline(), options_.limits.stop_fd, awaiting);
    const auto transition = apply(*event);
    if (transition.action == CmAction::fail) {
      throw event_failure(*event, call, target, host);
    }
    if (transition.action == wanted) {
      return;
    }
  }
}

void Endpoint::create_resources() {
  ibv_context* verbs = id_->verbs;
  if (verbs == nullptr) {
    // Address resolution (or a connect request) always binds a device; this is no errno.
    throw std::runtime_error("rdma_cm bound no RDMA device to " + local_address());
  }
  caps_ = read_device_caps(verbs, id_->port_num);
  if (options_.datagram) {
    if (const auto missing = missing_for(caps_, Need::datagrams)) throw Unsupported(*missing);
  }
  fit_reads_to_device();
  if (options_.check_device) {
    options_.check_device(verbs, id_->port_num);
  }
  pd_ = std::make_unique<ProtectionDomain>(verbs);
  completion_channel_ = std::make_unique<CompletionChannel>(verbs);
  cq_ = std::make_unique<CompletionQueue>(verbs, static_cast<int>(options_.send_depth + options_.recv_depth),
                                          *completion_channel_);
  ibv_cq* const cq = cq_->get();
  const int cm_fd = channel_->fd();
  waiter_ = std::make_unique<CqWaiter>(CompletionMode::events, std::span(&cq, 1), std::span(&cm_fd, 1),
                                       options_.limits.stop_fd);
  auto attributes = qp_attributes({.type = options_.datagram ? IBV_QPT_UD : IBV_QPT_RC,
                                   .send_depth = options_.send_depth,
                                   .receive_depth = options_.recv_depth,
                                   .signal_every_send = false,
                                   .inline_bytes = 0},
                                  cq_->get());
  const bool own = options_.self_managed_qp && !options_.datagram;
  const auto create = [&](std::uint32_t inline_bytes) {
    attributes.cap.max_inline_data = inline_bytes;
    if (own) {
      own_qp_ = std::make_unique<QueuePair>(pd_->get(), attributes);
    } else {
      id_.create_qp(pd_->get(), attributes, caps_.device);
    }
  };
  try {
    const auto granted = create_with_inline(options_.max_inline_data, create, caps_.device);
    // Providers may round the inline size up: what we use is what was asked for and granted.
    max_inline_data_ = std::min(granted, attributes.cap.max_inline_data);
  } catch (const RdmaError& error) {
    if (options_.datagram) throw_datagram_refusal(error, caps_.device);
    throw;
  }
  if (own) move_qp_to(IBV_QPS_INIT);
}

void Endpoint::fit_reads_to_device() {
  const auto fit = [this](std::uint8_t& depth, std::uint32_t limit, const char* direction) {
    const auto fitted = fitted_read_depth(depth, limit);
    if (fitted == depth) return;
    spdlog::info("{} allows {} RDMA READs {} a QP at once; offering {} of the {} this tool keeps", caps_.device, limit,
                 direction, fitted, depth);
    depth = fitted;
  };
  fit(options_.responder_resources, caps_.max_reads_in, "into");
  fit(options_.initiator_depth, caps_.max_reads_out, "out of");
}

ibv_qp* Endpoint::qp() const {
  return own_qp_ ? own_qp_->get() : id_->qp;
}

void Endpoint::move_qp_to(ibv_qp_state target) {
  ibv_qp_attr attributes{};
  int mask = 0;
  attributes.qp_state = target;
  check_errno(rdma_init_qp_attr(id_.get(), &attributes, &mask), "rdma_init_qp_attr", "");
  if (target == IBV_QPS_RTR && options_.path_mtu) {
    attributes.path_mtu = *options_.path_mtu;
  }
  check_returned(ibv_modify_qp(own_qp_->get(), &attributes, mask), "ibv_modify_qp",
                 fmt::format("state {}", static_cast<int>(target)));
}

void Endpoint::ready_own_qp() {
  // INIT again: before the CM had a connection, INIT carried no remote access rights.
  move_qp_to(IBV_QPS_INIT);
  move_qp_to(IBV_QPS_RTR);
  move_qp_to(IBV_QPS_RTS);
}

// rdma_disconnect moves a QP it made (rdma_create_qp) to the error state on InfiniBand and
// RoCE, so that what is still posted completes as flushed; ours it does not know of. Left
// in RTS, its receives never flushed, and send_bw's server, which takes the flush as the
// end of a client's stream, waited out its one-second bound after every client. iWARP's
// connection manager moves the QP it was given itself.
void Endpoint::flush_own_qp() noexcept {
  if (!own_qp_ || caps_.transport == rdmakit::Transport::iwarp) return;
  ibv_qp_attr attributes{};
  attributes.qp_state = IBV_QPS_ERR;
  if (ibv_modify_qp(own_qp_->get(), &attributes, IBV_QP_STATE) != 0) {
    spdlog::debug("ibv_modify_qp to the error state: {}", std::strerror(errno));
  }
}

rdma_conn_param Endpoint::connection_parameters() const {
  return rdmakit::connection_parameters(
      ConnectOffer{.private_data = options_.private_data,
                   .responder_resources = options_.responder_resources,
                   .initiator_depth = options_.initiator_depth,
                   .qp_num = own_qp_ || options_.datagram ? std::optional<std::uint32_t>(qp()->qp_num) : std::nullopt,
                   .datagram = options_.datagram,
                   .retry_count = options_.retry_count});
}

CmTransition Endpoint::apply(const rdma_cm_event& event) {
  if (classify(event.event) == CmEvent::disconnected && state_ == CmState::established && !disconnect_sent_) {
    // The peer's DREQ: answer it now (DREP). Otherwise a peer that closes its connections one
    // by one, each waiting for its DISCONNECTED, waits until we destroy this id.
    disconnect_sent_ = true;
    flush_own_qp();
    if (rdma_disconnect(id_.get()) != 0) spdlog::debug("rdma_disconnect (reply): {}", std::strerror(errno));
  }
  return advance(state_, event);
}

// The connection request failed: the error of the failing call, with the peer's reason.
void Endpoint::fail_establishment(const rdma_cm_event& event, const CmTransition& transition, Step step) {
  const auto peer = peer_address();
  const auto status = event.status;
  // REJECTED carries the CM reject reason (IB spec: 8 invalid service ID, i.e. nobody
  // listens; 10 stale connection; 28 consumer reject) rather than an errno.
  auto reason = transition.reason;
  // A SIDR reject (datagrams) arrives as UNREACHABLE, with the server's private data.
  const auto kind = classify(event.event);
  if (kind == CmEvent::rejected || (options_.datagram && kind == CmEvent::unreachable)) {
    if (options_.explain_rejection && event.param.conn.private_data != nullptr) {
      const auto* bytes = static_cast<const std::uint8_t*>(event.param.conn.private_data);
      options_.explain_rejection({bytes, event.param.conn.private_data_len});
    }
    reason += fmt::format(", {} {}", kind == CmEvent::rejected ? "reject reason" : "SIDR status", status);
    reason += refused_by_server(event);
  }
  // The active side names the peer's host, so that the hint and --diagnose can ask
  // diag-connect about it.
  const bool active = step == Step::connect;
  const auto host = active ? address_of(rdma_get_peer_addr(id_.get())).host_string() : std::string();
  constexpr int sidr_no_such_service = 1;  // a SIDR status, not an errno
  if (kind == CmEvent::unreachable && options_.datagram && active && status == sidr_no_such_service) {
    throw RdmaError("rdma_connect",
                    fmt::format("{}: {} (SIDR status {}: nothing listens there in rdma_cm's UDP port space)", peer,
                                transition.reason, status),
                    ECONNREFUSED, host);
  }
  throw event_failure(event, active ? "rdma_connect" : "rdma_accept", peer + ": " + reason, host);
}

// What the peer's accept (or a SIDR reply) carries: its private data, and for datagrams
// the peer's path, QP number and Q_Key.
void Endpoint::take_reply(const rdma_cm_event& event) {
  if (options_.datagram) {
    auto path = event.param.ud.ah_attr;
    peer_ah_ = std::make_unique<AddressHandle>(pd_->get(), path);
    peer_qp_num_ = event.param.ud.qp_num;
    peer_qkey_ = event.param.ud.qkey;
  }
  // A UD event's parameters start like a connection's: the private data first.
  if (event.param.conn.private_data != nullptr) {
    const auto* bytes = static_cast<const std::uint8_t*>(event.param.conn.private_data);
    peer_private_data_.assign(bytes, bytes + event.param.conn.private_data_len);
  }
}

void Endpoint::await_established(const StepTimer& timer, const StepEvents& steps) {
  const auto peer = peer_address();
  for (;;) {
    auto event = next_cm_event(*channel_, deadline(), options_.limits.stop_fd, "connection establishment with " + peer);
    const auto transition = apply(*event);
    switch (transition.action) {
      case CmAction::fail: fail_establishment(*event, transition, timer.step());
      case CmAction::establish:
        ready_own_qp();
        check_errno(rdma_establish(id_.get()), "rdma_establish", peer);
        [[fallthrough]];
      case CmAction::start_traffic:
        keep_rnr_naks_short(qp());
        take_reply(*event);
        steps(timer.span());
        return;
      default: break;
    }
  }
}

void Endpoint::connect(const StepEvents& steps) {
  const StepTimer timer(Step::connect);
  auto parameters = connection_parameters();
  check_errno(rdma_connect(id_.get(), &parameters), "rdma_connect", peer_address());
  state_ = CmState::connecting;
  await_established(timer, steps);
}

void Endpoint::set_ack_timeout() {
  if (!options_.ack_timeout) return;
  auto timeout = *options_.ack_timeout;
  check_errno(rdma_set_option(id_.get(), RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout, sizeof timeout),
              "rdma_set_option", "ACK timeout " + std::to_string(timeout));
}

Endpoint::Transport Endpoint::transport() const {
  const auto attributes =
      query_qp_checked(qp(), IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MIN_RNR_TIMER,
                       "the connected QP")
          .attributes;
  return {.traffic_class = attributes.ah_attr.grh.traffic_class,
          .service_level = attributes.ah_attr.sl,
          .ack_timeout = attributes.timeout,
          .retry_count = attributes.retry_cnt,
          .rnr_retry = attributes.rnr_retry,
          .rnr_nak_timer = attributes.min_rnr_timer};
}

void Endpoint::accept(const StepEvents& steps) {
  const StepTimer timer(Step::accept);
  set_ack_timeout();
  if (own_qp_) {
    ready_own_qp();
  }
  auto parameters = connection_parameters();
  check_errno(rdma_accept(id_.get(), &parameters), "rdma_accept", peer_address());
  state_ = CmState::accepting;
  if (options_.datagram) {
    // The SIDR reply ends the exchange: no ESTABLISHED follows on this side.
    state_ = CmState::established;
    steps(timer.span());
    return;
  }
  await_established(timer, steps);
}

void Endpoint::reject(std::span<const std::uint8_t> private_data) noexcept {
  if (state_ != CmState::accepting) {
    return;
  }
  const auto length = static_cast<std::uint8_t>(std::min<std::size_t>(private_data.size(), 148));
  if (rdma_reject(id_.get(), length > 0 ? private_data.data() : nullptr, length) != 0) {
    spdlog::debug("rdma_reject: {}", std::strerror(errno));
  }
  state_ = CmState::disconnected;
}

RegisteredBuffer& Endpoint::add_buffer(std::size_t size, int access) {
  buffers_.push_back(std::make_unique<RegisteredBuffer>(pd_->get(), size, access, options_.buffer_memory));
  return *buffers_.back();
}

void Endpoint::post_receive(const RegisteredBuffer& buffer, std::size_t length, std::uint64_t wr_id) {
  ibv_sge sge{};
  ibv_recv_wr wr{};
  build_receive(work_id(WorkKind::receive, wr_id), local_sge(buffer, length), wr, sge);
  ibv_recv_wr* bad = nullptr;
  check_returned(ibv_post_recv(qp(), &wr, &bad), "ibv_post_recv", "");
}

void Endpoint::post_send(const RegisteredBuffer& buffer, std::size_t length, std::uint64_t wr_id) {
  post(qp(), SendRequest{.id = work_id(WorkKind::send, wr_id),
                         .opcode = IBV_WR_SEND,
                         .local = local_sge(buffer, length),
                         .flags = IBV_SEND_SIGNALED});
}

void Endpoint::post_rdma(ibv_wr_opcode opcode, const RegisteredBuffer& local, std::size_t length,
                         std::uint64_t remote_address, std::uint32_t rkey, std::uint64_t wr_id) {
  post(qp(), SendRequest{.id = work_id(work_kind_of(opcode), wr_id),
                         .opcode = opcode,
                         .local = local_sge(local, length),
                         .flags = IBV_SEND_SIGNALED,
                         .remote_address = remote_address,
                         .rkey = rkey});
}

std::optional<ibv_wc> Endpoint::poll_completion() {
  ibv_wc wc{};
  const int polled = ibv_poll_cq(cq_->get(), 1, &wc);
  if (polled < 0) {
    throw RdmaError::without_errno("ibv_poll_cq", "", fmt::format("returned {}", polled));
  }
  if (polled == 0) return std::nullopt;
  if (wc.status == IBV_WC_SUCCESS) {
    wc.wr_id = WorkId::decode(wc.wr_id).sequence;
    return wc;
  }
  if (wc.status == IBV_WC_WR_FLUSH_ERR) {
    throw RunStopped(StopReason::peer_disconnected,
                     "connection to " + peer_address() + " closed (work requests flushed)");
  }
  throw completion_error(wc, completion_message(wc));
}

void Endpoint::apply_cm_events() {
  while (auto event = poll_cm_event(*channel_)) {
    const auto transition = apply(*event);
    if (transition.action == CmAction::stop_traffic || transition.action == CmAction::fail) {
      throw RunStopped(StopReason::peer_disconnected, peer_address() + ": " + transition.reason);
    }
  }
}

ibv_wc Endpoint::next_completion() {
  const SilenceBound silence(options_.limits.timeout);
  for (;;) {
    if (auto wc = poll_completion()) return *wc;
    if (!waiter_->armed()) {
      waiter_->arm();  // then poll once more: a completion that arrived in between raises no event
      continue;
    }
    switch (waiter_->sleep(silence.deadline())) {
      case Woken::completion: break;
      case Woken::cm_event: apply_cm_events(); break;
      case Woken::stopped: throw RunStopped(StopReason::interrupted, "interrupted");
      case Woken::timed_out:
        throw RunStopped(StopReason::timed_out, fmt::format("no completion from {} within {:.1f} s", peer_address(),
                                                            static_cast<double>(silence.limit_ms()) / 1000.0));
    }
  }
}

std::optional<std::uint8_t> Endpoint::source_gid_index() const {
  const auto query = query_qp(qp(), IBV_QP_AV);
  if (!query || query->attributes.ah_attr.is_global == 0) return std::nullopt;
  return query->attributes.ah_attr.grh.sgid_index;
}

ibv_mtu Endpoint::active_path_mtu() const {
  return query_qp_checked(qp(), IBV_QP_PATH_MTU, "path MTU").attributes.path_mtu;
}

std::uint32_t Endpoint::datagram_mtu() const {
  return rdmakit::datagram_mtu(id_.get());
}

bool Endpoint::poll_connected() {
  while (auto event = poll_cm_event(*channel_)) {
    apply(*event);
  }
  return state_ == CmState::established;
}

std::optional<Endpoint::DatagramPeer> Endpoint::datagram_peer() const {
  if (!peer_ah_) return std::nullopt;
  return DatagramPeer{.ah = peer_ah_->get(), .qp_num = peer_qp_num_, .qkey = peer_qkey_};
}

void Endpoint::disconnect() noexcept {
  if (state_ != CmState::established || options_.datagram) {
    return;
  }
  disconnect_sent_ = true;
  flush_own_qp();
  if (rdma_disconnect(id_.get()) != 0) {
    spdlog::debug("rdma_disconnect: {}", std::strerror(errno));
    return;
  }
  try {
    const auto until = deadline();
    while (state_ == CmState::established) {
      auto event = next_cm_event(*channel_, until, options_.limits.stop_fd, "disconnect");
      apply(*event);
    }
  } catch (const std::exception& error) {
    spdlog::debug("disconnect: {}", error.what());
  }
}

std::string Endpoint::local_address() const {
  return address_of(rdma_get_local_addr(id_.get())).to_string();
}
std::string Endpoint::peer_address() const {
  return address_of(rdma_get_peer_addr(id_.get())).to_string();
}

Listener::Listener(const SocketAddress& address, int backlog, const EndpointOptions& options)
    : id_(channel_, options.datagram ? RDMA_PS_UDP : RDMA_PS_TCP), options_(options) {
  const auto where = address.to_string();
  check_errno(rdma_bind_addr(id_.get(), const_cast<sockaddr*>(address.get())), "rdma_bind_addr", where,
              address.host_string());
  check_errno(rdma_listen(id_.get(), backlog), "rdma_listen", where);
}

std::string Listener::local_address() const {
  return address_of(rdma_get_local_addr(id_.get())).to_string();
}

std::unique_ptr<Endpoint> Listener::next_request(std::optional<Clock::time_point> deadline) {
  const auto until = deadline.value_or(Clock::time_point::max());
  for (;;) {
    auto event = next_cm_event(channel_, until, options_.limits.stop_fd, "a connection request");
    auto state = CmState::listening;  // the listening id's own state never moves
    const auto transition = advance(state, *event);
    if (transition.action == CmAction::fail) {
      throw RdmaError::without_errno("rdma_listen", local_address(), transition.reason);
    }
    if (transition.action != CmAction::accept) {
      continue;
    }
    CmId child(event->id);
    std::optional<PeerGate::Slot> slot;
    if (gate_) {
      slot = admit_request(*gate_, child.get());
      if (!slot) {
        event.reset();  // rdma_destroy_id waits until every event of the id has been acked
        continue;
      }
    }
    std::vector<std::uint8_t> request_data;
    if (event->param.conn.private_data != nullptr) {
      const auto* bytes = static_cast<const std::uint8_t*>(event->param.conn.private_data);
      request_data.assign(bytes, bytes + event->param.conn.private_data_len);
    }
    event.reset();  // rdma_migrate_id waits until every event of the id has been acked
    auto channel = std::make_unique<EventChannel>();
    check_errno(rdma_migrate_id(child.get(), channel->get()), "rdma_migrate_id", "");
    std::unique_ptr<Endpoint> endpoint(
        new Endpoint(std::move(channel), std::move(child), options_, CmState::accepting));
    endpoint->peer_private_data_ = std::move(request_data);
    if (slot) endpoint->gate_slot_ = std::move(*slot);
    spdlog::debug("connection request from {}", endpoint->peer_address());
    endpoint->create_resources();
    return endpoint;
  }
}

}  // namespace rdmakit
