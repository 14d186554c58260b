// send_bw's option checks (lib/send_bw/bw_options): combinations refused before anything is
// opened, and the settings the options make.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "lib/base/error.hpp"
#include "lib/send_bw/bw_options.hpp"
#include "lib/send_bw/perftest_flags.hpp"

namespace rdmakit {
namespace {

BwOptions client() {
  BwOptions o;
  o.settings.server = "10.0.0.1";
  return o;
}

TEST(BwOptions, RefusesWhatCannotWork) {
  auto events_write_latency = client();
  events_write_latency.settings.test = bw::Test::latency;
  events_write_latency.settings.operation = bw::Operation::write;
  events_write_latency.settings.events = true;
  EXPECT_THROW(validate_bw_options(events_write_latency, false, false), UsageError);
  events_write_latency.settings.operation = bw::Operation::read;
  EXPECT_NO_THROW(validate_bw_options(events_write_latency, false, false));

  auto sweep_for_a_while = client();
  sweep_for_a_while.measure.sweep = true;
  EXPECT_THROW(validate_bw_options(sweep_for_a_while, true, false), UsageError);

  BwOptions server;  // no server address: this is the server
  server.settings.histogram = true;
  EXPECT_THROW(validate_bw_options(server, false, false), UsageError);

  auto far_core = client();
  far_core.settings.pin_core = CPU_SETSIZE - 1;
  EXPECT_THROW(validate_bw_options(far_core, false, false), UsageError);
}

TEST(BwOptions, AtomicsAreEightBytesOneWay) {
  auto atomics = client();
  atomics.settings.operation = bw::Operation::atomic;
  EXPECT_NO_THROW(validate_bw_atomics(atomics, false, true));
  atomics.measure.size = 16;
  EXPECT_THROW(validate_bw_atomics(atomics, true, false), UsageError);
  atomics.measure.size = 8;
  EXPECT_NO_THROW(validate_bw_atomics(atomics, true, false));
  atomics.measure.sweep = true;
  EXPECT_THROW(validate_bw_atomics(atomics, false, false), UsageError);
  auto kind_without_atomics = client();
  EXPECT_THROW(validate_bw_atomics(kind_without_atomics, false, true), UsageError);
}

TEST(BwOptions, DatagramsAreSendWithinAnMtu) {
  auto ud = client();
  ud.connection = "UD";
  ud.measure.size = 4096;
  EXPECT_NO_THROW(validate_bw_options(ud, false, false));
  EXPECT_TRUE(bw_settings(ud, CommonOptions{}, -1).datagram);
  auto refused = [&](auto change) {
    auto o = ud;
    change(o);
    EXPECT_THROW(validate_bw_options(o, false, false), UsageError);
  };
  refused([](BwOptions& o) { o.measure.size = 4097; });
  refused([](BwOptions& o) { o.settings.operation = bw::Operation::write; });
  refused([](BwOptions& o) { o.settings.bidirectional = true; });
  refused([](BwOptions& o) { o.mtu = 1024; });
  auto latency = ud;
  latency.settings.test = bw::Test::latency;
  EXPECT_NO_THROW(validate_bw_options(latency, false, false));
  auto sweep = ud;
  sweep.measure.sweep = true;  // cut at the device's MTU once it is known
  EXPECT_NO_THROW(validate_bw_options(sweep, false, false));
  BwOptions server;  // its -s is only a default
  server.connection = "UD";
  EXPECT_NO_THROW(validate_bw_options(server, false, false));
  EXPECT_FALSE(bw_settings(client(), CommonOptions{}, -1).datagram);
}

TEST(BwOptions, SettingsCarryTheNewModes) {
  auto o = client();
  o.settings.events = true;
  o.settings.use_hugepages = true;
  o.settings.pin_core = 0;
  o.settings.operation = bw::Operation::atomic;
  o.settings.atomic = AtomicKind::compare_swap;
  const auto settings = bw_settings(o, CommonOptions{}, -1);
  EXPECT_TRUE(settings.events);
  EXPECT_TRUE(settings.use_hugepages);
  EXPECT_EQ(settings.pin_core, 0);
  EXPECT_EQ(settings.atomic, AtomicKind::compare_swap);
  apply_bw_defaults(o, false);
  EXPECT_EQ(bw_sizes(o), std::vector<std::uint32_t>{8});
  auto latency = client();
  latency.settings.test = bw::Test::latency;
  apply_bw_defaults(latency, false);
  EXPECT_EQ(latency.measure.size, 2u);
  latency.measure.size = 64;
  apply_bw_defaults(latency, true);
  EXPECT_EQ(latency.measure.size, 64u);
}

// perftest's command line parsed as send_bw parses it: the flags, then the spellings applied.
struct PerftestLine {
  BwOptions o = client();
  CLI::App app;
  PerftestFlags flags{app, o};
  CLI::Option* duration = app.add_option("-D", o.measure.duration_s);
  CLI::Option* iterations = app.add_option("-n", o.settings.budget.iterations);
  CLI::Option* rate_units = app.add_option("--rate_units", o.settings.rate_units);

  std::vector<std::string> apply(std::vector<std::string> args) {
    std::reverse(args.begin(), args.end());  // CLI11 takes them last first
    app.parse(args);
    bool duration_given = duration->count() > 0;
    return flags.apply(o, duration_given, iterations->count() > 0, rate_units->count() > 0);
  }
};

TEST(PerftestFlags, RateLimitIsInGbitsAsPerftestHasIt) {
  PerftestLine line;
  line.apply({"--rate_limit", "5"});
  EXPECT_EQ(line.o.rate_limit, 5);
  EXPECT_EQ(line.o.settings.rate_units, 'g');
  PerftestLine in_mib;
  in_mib.apply({"--rate_limit", "5", "--rate_units", "M"});
  EXPECT_EQ(in_mib.o.settings.rate_units, 'M');
}

TEST(PerftestFlags, RunInfinitelyIsATimedRunShownEachDuration) {
  PerftestLine line;
  line.apply({"--run_infinitely", "-D", "2"});
  EXPECT_EQ(line.o.interval_s, 2);
  EXPECT_EQ(line.o.measure.duration_s, run_forever_s);
  EXPECT_NO_THROW(validate_bw_options(line.o, true, false));
  PerftestLine without_duration;
  without_duration.apply({"--run_infinitely"});
  EXPECT_EQ(without_duration.o.interval_s, perftest_default_interval_s);
  PerftestLine with_count;
  EXPECT_THROW(with_count.apply({"--run_infinitely", "-n", "5"}), UsageError);
}

TEST(PerftestFlags, WhatSendBwLacksIsRefusedNamingTheFlag) {
  PerftestLine line;
  try {
    line.apply({"-Q", "4"});
    FAIL() << "-Q accepted";
  } catch (const UsageError& error) {
    EXPECT_STREQ(error.what(),
                 "-Q: perftest's flag is not in send_bw: one request in -t/2 (at most 64) is signalled; the report's "
                 "test.signal_every");
  }
  PerftestLine noted;
  EXPECT_EQ(noted.apply({"-R", "-F"}).size(), 2u);
}

TEST(BwOptions, DatagramsWithoutSizeRunAtThePortsMtu) {
  auto ud = client();
  ud.connection = "UD";
  apply_bw_defaults(ud, false);
  EXPECT_EQ(ud.measure.size, 0u);
  EXPECT_TRUE(bw_sizes(ud).empty());
  EXPECT_NO_THROW(validate_bw_options(ud, false, false));
  auto latency = client();
  latency.connection = "UD";
  latency.settings.test = bw::Test::latency;
  apply_bw_defaults(latency, false);
  EXPECT_EQ(latency.measure.size, 2u);
  EXPECT_NO_THROW(validate_bw_options(latency, false, false));
}

}  // namespace
}  // namespace rdmakit
