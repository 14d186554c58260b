#pragma once
// send_bw --oob: either end of a bandwidth run in perftest's default mode, against perftest
// (ib_send_bw, ib_write_bw, ib_read_bw started without -R). No rdma_cm: the QPs' numbers,
// PSNs, GIDs and buffers go over TCP (lib/send_bw/perftest_conversation), and the QPs go to
// RTR and RTS by hand with the peer's. The client runs send_bw's own stream loop and hands a
// perftest server its figures, which that server prints as its row; the server serves one
// client, as perftest's does: it receives a SEND stream itself, and after a WRITE or READ run
// (which it cannot see) reports the figures the client sends it.

#include "lib/base/report.hpp"

namespace rdmakit {

struct BwSettings;
struct BwResults;

// Throws UsageError for what this mode does not run yet (latency, a sweep, UD, -b, atomics,
// a timed SEND run, a persistent server), before anything is opened.
void check_perftest_mode(const BwSettings& settings, bool sweep, bool timed);
// Each fills `results` as it goes, so that a failure leaves a partial report.
void run_perftest_client(const BwSettings& settings, Report& report, BwResults& results);
void run_perftest_server(const BwSettings& settings, Report& report, BwResults& results);

}  // namespace rdmakit
