#include "lib/rdma/cm_flow.hpp"

namespace rdmakit {

namespace {

CmTransition failure(const std::string& reason) {
  return {CmState::failed, CmAction::fail, reason};
}

CmTransition unexpected(CmState state, CmEvent event) {
  return failure("unexpected CM event " + to_string(event) + " while " + to_string(state));
}

}  // namespace

// NOLINTNEXTLINE(readability-function-cognitive-complexity): 39 today, above the cap of 25; to split
CmTransition cm_transition(CmState state, CmEvent event) {
  // Events that mean the same thing in every state.
  switch (event) {
    case CmEvent::device_removal: return failure("the RDMA device was removed");
    case CmEvent::addr_change: return {state, CmAction::none, "the address moved to another device"};
    case CmEvent::timewait_exit: return {state, CmAction::none, {}};
    default: break;
  }

  switch (state) {
    case CmState::resolving_addr:
      if (event == CmEvent::addr_resolved) {
        return {CmState::resolving_route, CmAction::resolve_route, {}};
      }
      if (event == CmEvent::addr_error) {
        return failure("address resolution failed");
      }
      break;
    case CmState::resolving_group:
      if (event == CmEvent::addr_resolved) {
        return {CmState::joining, CmAction::join, {}};
      }
      if (event == CmEvent::addr_error) {
        return failure("address resolution of the multicast group failed");
      }
      break;
    case CmState::joining:
      if (event == CmEvent::multicast_join) {
        return {CmState::established, CmAction::start_traffic, {}};
      }
      if (event == CmEvent::multicast_error) {
        return failure("joining the multicast group failed");
      }
      break;
    case CmState::resolving_route:
      if (event == CmEvent::route_resolved) {
        return {CmState::connecting, CmAction::connect, {}};
      }
      if (event == CmEvent::route_error) {
        return failure("route resolution failed");
      }
      break;
    case CmState::connecting:
    case CmState::accepting:
      if (event == CmEvent::established) {
        return {CmState::established, CmAction::start_traffic, {}};
      }
      if (event == CmEvent::connect_response && state == CmState::connecting) {
        return {CmState::established, CmAction::establish, {}};
      }
      if (event == CmEvent::rejected) {
        return failure("the peer rejected the connection");
      }
      if (event == CmEvent::unreachable) {
        return failure("the peer is unreachable");
      }
      if (event == CmEvent::connect_error) {
        return failure("connection setup failed");
      }
      if (event == CmEvent::disconnected) {
        return failure("the peer disconnected during connection setup");
      }
      break;
    case CmState::listening:
      if (event == CmEvent::connect_request) {
        return {CmState::accepting, CmAction::accept, {}};
      }
      break;
    case CmState::established:
      if (event == CmEvent::multicast_error) {
        return failure("the multicast group reported an error after the join");
      }
      if (event == CmEvent::disconnected) {
        return {CmState::disconnected, CmAction::stop_traffic, "the peer disconnected"};
      }
      break;
    case CmState::disconnected:
      if (event == CmEvent::disconnected) {
        return {CmState::disconnected, CmAction::none, {}};
      }
      break;
    case CmState::idle:
    case CmState::failed: break;
  }
  return unexpected(state, event);
}

std::string to_string(CmEvent event) {
  switch (event) {
    case CmEvent::addr_resolved: return "ADDR_RESOLVED";
    case CmEvent::addr_error: return "ADDR_ERROR";
    case CmEvent::route_resolved: return "ROUTE_RESOLVED";
    case CmEvent::route_error: return "ROUTE_ERROR";
    case CmEvent::connect_request: return "CONNECT_REQUEST";
    case CmEvent::connect_response: return "CONNECT_RESPONSE";
    case CmEvent::connect_error: return "CONNECT_ERROR";
    case CmEvent::unreachable: return "UNREACHABLE";
    case CmEvent::rejected: return "REJECTED";
    case CmEvent::established: return "ESTABLISHED";
    case CmEvent::disconnected: return "DISCONNECTED";
    case CmEvent::device_removal: return "DEVICE_REMOVAL";
    case CmEvent::multicast_join: return "MULTICAST_JOIN";
    case CmEvent::multicast_error: return "MULTICAST_ERROR";
    case CmEvent::addr_change: return "ADDR_CHANGE";
    case CmEvent::timewait_exit: return "TIMEWAIT_EXIT";
    case CmEvent::unknown: return "UNKNOWN";
  }
  return "UNKNOWN";
}

std::string to_string(CmState state) {
  switch (state) {
    case CmState::idle: return "idle";
    case CmState::resolving_addr: return "resolving address";
    case CmState::resolving_route: return "resolving route";
    case CmState::connecting: return "connecting";
    case CmState::resolving_group: return "resolving multicast group";
    case CmState::joining: return "joining";
    case CmState::listening: return "listening";
    case CmState::accepting: return "accepting";
    case CmState::established: return "established";
    case CmState::disconnected: return "disconnected";
    case CmState::failed: return "failed";
  }
  return "unknown";
}

}  // namespace rdmakit
