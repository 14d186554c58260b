#pragma once
// send_bw --oob, the client: a bandwidth run against a server of perftest's (ib_send_bw,
// ib_write_bw, ib_read_bw started without -R) in perftest's default mode. No rdma_cm: the
// QPs' numbers, PSNs, GIDs and buffers go over TCP (lib/send_bw/perftest_conversation), and
// the QPs go to RTR and RTS by hand with the server's; the run is send_bw's own stream loop,
// and the server prints, as perftest's client would have had it print, our figures.

#include "lib/base/report.hpp"

namespace rdmakit {

struct BwSettings;
struct BwResults;

// Throws UsageError for what this mode does not run yet (latency, a sweep, UD, -b, atomics,
// a timed SEND run), before anything is opened.
void check_perftest_client(const BwSettings& settings, bool sweep, bool timed);
// Fills `results` as it goes, so that a failure leaves a partial report.
void run_perftest_client(const BwSettings& settings, Report& report, BwResults& results);

}  // namespace rdmakit
