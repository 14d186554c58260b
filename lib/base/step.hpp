#pragma once
// The steps a tool times: one closed vocabulary, one spelling each, and one timer. Names are
// rdma-core's cmtime's (with '_' for ' ') where cmtime times the same step. A report keeps the
// CM steps, those of setting a connection up and tearing it down, under cm_timings_ms, and the
// others under timings_ms (lib/base/report.hpp).

#include <chrono>
#include <functional>
#include <optional>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace rdmakit {

enum class Step {
  // CM steps.
  getaddrinfo,    // rdma_getaddrinfo
  create_ep,      // rdma_create_ep: address, route and QP in one call
  create_id,      // rdma_create_id
  bind_addr,      // rdma_bind_addr
  resolve_addr,   // rdma_resolve_addr to ADDR_RESOLVED
  resolve_route,  // rdma_resolve_route to ROUTE_RESOLVED
  create_qp,      // the QP and what it needs: PD, CQ, registered buffers
  listen,         // bind and rdma_listen
  connect,        // rdma_connect to ESTABLISHED (UD: the SIDR reply)
  accept,         // rdma_accept to ESTABLISHED (UD: the SIDR reply sent)
  join,           // rdma_join_multicast to MULTICAST_JOIN
  disconnect,     // rdma_disconnect to DISCONNECTED
  leave,          // rdma_leave_multicast
  // Other steps.
  route,     // the kernel's route to the target (diag-connect)
  agent,     // asking diag-connect's agent over TCP (captures of older versions)
  reg_msgs,  // rdma_reg_msgs: the message buffers registered
  send,      // messages sent, none expected back
  receive,   // messages received, none sent
  reply,     // each message received answered
  transfer,  // messages sent and received both ways
};

// The step's one spelling, as reports and tables print it.
std::string_view step_name(Step step);
// The step so spelled; none for a name outside the vocabulary.
std::optional<Step> step_named(std::string_view name);
// Whether the step sets a connection up or tears it down (cm_timings_ms), or is another.
bool is_cm_step(Step step);

// JSON writes a step as its name (never as the enum's number).
void to_json(nlohmann::json& json, Step step);

// One step's time, from its start to its end, and whether it ended in an error.
struct StepSpan {
  Step step = Step::connect;
  std::chrono::steady_clock::time_point started;
  std::chrono::steady_clock::time_point ended;
  bool failed = false;

  double ms() const { return std::chrono::duration<double, std::milli>(ended - started).count(); }
};

// The step timer every tool uses: it times the step under way from when it began. A run
// of consecutive steps uses one timer and next(); concurrent ones (a connection group's
// connections) one timer each.
// Where a part that takes steps (an endpoint resolving, connecting, accepting) tells of each
// step it finished: the session records them (Report::step_events), a test may keep them.
using StepEvents = std::function<void(const StepSpan&)>;

class StepTimer {
 public:
  explicit StepTimer(Step step) : step_(step), started_(std::chrono::steady_clock::now()) {}

  Step step() const noexcept { return step_; }
  std::chrono::steady_clock::time_point started() const noexcept { return started_; }
  double elapsed_ms() const { return span().ms(); }
  // The step under way as if it ended now.
  StepSpan span(bool failed = false) const {
    return StepSpan{.step = step_, .started = started_, .ended = std::chrono::steady_clock::now(), .failed = failed};
  }
  // Ends the step under way now and begins `step` at the same instant; returns the one ended.
  StepSpan next(Step step) {
    auto ended = span();
    step_ = step;
    started_ = ended.ended;
    return ended;
  }

 private:
  Step step_;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace rdmakit
