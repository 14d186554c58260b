#include <gtest/gtest.h>

#include "lib/rdma/cm.hpp"
#include "lib/rdma/cm_flow.hpp"

namespace rdmakit {
namespace {

struct Step {
  CmState from;
  CmEvent event;
  CmState to;
  CmAction action;
};

class CmTable : public ::testing::TestWithParam<Step> {};

TEST_P(CmTable, Transition) {
  const auto& s = GetParam();
  const auto t = cm_transition(s.from, s.event);
  EXPECT_EQ(t.next, s.to) << to_string(s.from) << " + " << to_string(s.event);
  EXPECT_EQ(t.action, s.action) << to_string(s.from) << " + " << to_string(s.event);
}

INSTANTIATE_TEST_SUITE_P(
    ActiveAndPassive, CmTable,
    ::testing::Values(Step{CmState::resolving_addr, CmEvent::addr_resolved, CmState::resolving_route,
                           CmAction::resolve_route},
                      Step{CmState::resolving_addr, CmEvent::addr_error, CmState::failed, CmAction::fail},
                      Step{CmState::resolving_route, CmEvent::route_resolved, CmState::connecting, CmAction::connect},
                      Step{CmState::resolving_route, CmEvent::route_error, CmState::failed, CmAction::fail},
                      Step{CmState::connecting, CmEvent::established, CmState::established, CmAction::start_traffic},
                      Step{CmState::connecting, CmEvent::connect_response, CmState::established, CmAction::establish},
                      Step{CmState::connecting, CmEvent::rejected, CmState::failed, CmAction::fail},
                      Step{CmState::connecting, CmEvent::unreachable, CmState::failed, CmAction::fail},
                      Step{CmState::connecting, CmEvent::connect_error, CmState::failed, CmAction::fail},
                      Step{CmState::listening, CmEvent::connect_request, CmState::accepting, CmAction::accept},
                      Step{CmState::accepting, CmEvent::established, CmState::established, CmAction::start_traffic},
                      Step{CmState::accepting, CmEvent::connect_response, CmState::failed, CmAction::fail},
                      Step{CmState::established, CmEvent::disconnected, CmState::disconnected, CmAction::stop_traffic},
                      Step{CmState::disconnected, CmEvent::timewait_exit, CmState::disconnected, CmAction::none},
                      Step{CmState::established, CmEvent::addr_change, CmState::established, CmAction::none},
                      Step{CmState::established, CmEvent::device_removal, CmState::failed, CmAction::fail}));

INSTANTIATE_TEST_SUITE_P(
    Multicast, CmTable,
    ::testing::Values(Step{CmState::resolving_group, CmEvent::addr_resolved, CmState::joining, CmAction::join},
                      Step{CmState::resolving_group, CmEvent::addr_error, CmState::failed, CmAction::fail},
                      Step{CmState::joining, CmEvent::multicast_join, CmState::established, CmAction::start_traffic},
                      Step{CmState::joining, CmEvent::multicast_error, CmState::failed, CmAction::fail},
                      Step{CmState::established, CmEvent::multicast_error, CmState::failed, CmAction::fail},
                      Step{CmState::established, CmEvent::addr_change, CmState::established, CmAction::none}));

TEST(CmFlow, UnexpectedEventIsANamedFailure) {
  const auto t = cm_transition(CmState::resolving_addr, CmEvent::established);
  EXPECT_EQ(t.action, CmAction::fail);
  EXPECT_EQ(t.reason, "unexpected CM event ESTABLISHED while resolving address");
}

TEST(CmFlow, EveryEventInEveryStateHasAnAnswer) {
  for (int s = 0; s <= static_cast<int>(CmState::failed); ++s) {
    for (int e = 0; e <= static_cast<int>(CmEvent::unknown); ++e) {
      const auto t = cm_transition(static_cast<CmState>(s), static_cast<CmEvent>(e));
      if (t.action == CmAction::fail) {
        EXPECT_EQ(t.next, CmState::failed);
        EXPECT_FALSE(t.reason.empty());
      }
    }
  }
}

// A UD datagram is one packet: no larger than the port's MTU, nor the path record's where the
// route has one (an IB switch at 2048 between two 4096-byte ports).
TEST(DatagramMtu, ThePathRecordsMtuWhenItIsLess) {
  EXPECT_EQ(datagram_mtu(IBV_MTU_4096, IBV_MTU_2048), 2048U);
  EXPECT_EQ(datagram_mtu(IBV_MTU_1024, IBV_MTU_4096), 1024U);
  EXPECT_EQ(datagram_mtu(IBV_MTU_4096, 0), 4096U) << "no path record (the passive side of SIDR)";
  EXPECT_EQ(datagram_mtu(IBV_MTU_4096, 9), 4096U) << "an MTU code no device uses";
}

}  // namespace
}  // namespace rdmakit
