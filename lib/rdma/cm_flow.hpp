#pragma once
// The connection-manager flow of rdma_cm(7) as a pure transition function:
// (state, event) -> (next state, action). The I/O layer feeds it every event it reads, so
// an unexpected event becomes a named failure instead of being silently dropped.

#include <string>

namespace rdmakit {

// Mirrors enum rdma_cm_event_type (kept separate so this file needs no RDMA headers).
enum class CmEvent {
  addr_resolved,
  addr_error,
  route_resolved,
  route_error,
  connect_request,
  connect_response,
  connect_error,
  unreachable,
  rejected,
  established,
  disconnected,
  device_removal,
  multicast_join,
  multicast_error,
  addr_change,
  timewait_exit,
  unknown,
};

enum class CmState {
  idle,             // client before rdma_resolve_addr
  resolving_addr,   // rdma_resolve_addr issued
  resolving_route,  // rdma_resolve_route issued
  connecting,       // rdma_connect issued
  resolving_group,  // multicast: rdma_resolve_addr of the group issued
  joining,          // multicast: rdma_join_multicast issued
  listening,        // server: rdma_listen issued
  accepting,        // server: rdma_accept issued on a new id
  established,
  disconnected,
  failed,
};

enum class CmAction {
  none,           // nothing to do (informational event)
  resolve_route,  // call rdma_resolve_route
  connect,        // create the QP and call rdma_connect
  join,           // multicast: create the QP and call rdma_join_multicast
  accept,         // create the QP for the new id and call rdma_accept
  establish,      // self-managed QP: move it to RTS and call rdma_establish; then it is up
  start_traffic,  // connection is up
  stop_traffic,   // connection went down: end the run
  fail,           // the step failed: report `reason`
};

struct CmTransition {
  CmState next;
  CmAction action;
  std::string reason;  // why, when action is fail or stop_traffic
};

CmTransition cm_transition(CmState state, CmEvent event);

std::string to_string(CmEvent event);
std::string to_string(CmState state);

}  // namespace rdmakit
