// crafted_peer: a test-only peer that breaks the tools' wire protocols on purpose, so the
// integration cases in tests/integration/crafted_cases.sh can show that our tools never
// trust what a peer says: a length, address or rkey outside what they registered, CM
// private data that is garbage or of another version, a message of the wrong size, or
// silence. Each --mode does one misdeed against one of our tools and then waits (bounded
// by --timeout) for that tool to leave. Not installed, not packaged.
//
// stdout: one JSON line {"mode", "misdeed_at_us", "peer", "detail", "counts"}; misdeed_at_us is the
// wall clock (microseconds since the epoch, like bash's EPOCHREALTIME) when the misdeed
// was done, so a case can time our tool's reaction from then. Exit 0 when the misdeed was
// done, 1 when the peer could not get that far (no client came, the server refused a
// hello we needed accepted, ...), 2 for bad options.

#include <arpa/inet.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "lib/base/error.hpp"
#include "lib/base/log.hpp"
#include "lib/cm_tools/messages.hpp"
#include "lib/pingmesh/pingmesh_probe.hpp"
#include "lib/rdma/datagram_port.hpp"
#include "lib/rdma/endpoint.hpp"
#include "lib/send_bw/bw_messages.hpp"

namespace {

using rdmakit::Endpoint;
using rdmakit::RegisteredBuffer;
namespace bw = rdmakit::bw;

constexpr int remote_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
// XORed into a real rkey: a key the peer never registered (never 0, so never the real one).
constexpr std::uint32_t rkey_scramble = 0x5a5a5a00;

struct Options {
  std::string mode;
  std::string address;
  std::uint16_t port = 0;
  double timeout_s = 10;         // bound on every wait for our tool
  double accept_timeout_s = 30;  // server modes: bound on waiting for our client
  std::uint32_t size = 64;       // bw-client-bad-reply-rkey: message size of the latency test
  std::string bind;              // pingmesh-forger, cm-hold: the address it sends from
  std::string log_level = "warn";
  std::size_t count = 300;  // cm-hold: connections to try
  double hold_s = 8;        // cm-hold: how long to hold them
  std::string ready;        // cm-hold: a file made once every connection was tried
};

// What the peer did, printed as the one line of stdout.
struct Result {
  std::optional<std::int64_t> misdeed_at_us;
  std::string peer = "unknown";  // how our tool ended the connection: disconnected, stayed, refused
  std::string detail;
  std::map<std::string, std::uint64_t> counts;  // cm-hold: held, refused, failed
};

// A setup failure of the crafted peer itself (exit 1), as opposed to our tool's reaction.
class PeerFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::int64_t wall_clock_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Deterministic garbage, so a failing run can be repeated byte for byte.
std::vector<std::uint8_t> garbage(std::size_t size) {
  std::mt19937 generator(0x5eed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<std::uint8_t> bytes(size);
  std::generate(bytes.begin(), bytes.end(), [&] { return static_cast<std::uint8_t>(byte(generator)); });
  bytes[0] = static_cast<std::uint8_t>(~(bw::magic >> 24));  // never the send_bw magic by chance
  return bytes;
}

class CraftedPeer {
 public:
  explicit CraftedPeer(const Options& o) : o_(o) {
    options_.send_depth = 16;
    options_.recv_depth = 4;
    options_.responder_resources = 16;
    options_.initiator_depth = 16;
    options_.limits.timeout = std::chrono::milliseconds(static_cast<long long>(o.timeout_s * 1000));
  }

  // Client modes: connects with `private_data`; nullptr when our server refused, the
  // reason (a send_bw refusal's text, or the CM's) in result_.detail.
  std::unique_ptr<Endpoint> connect(std::vector<std::uint8_t> private_data,
                                    const std::function<void(Endpoint&)>& before_connect = {}) {
    std::optional<std::string> refusal;
    auto options = options_;
    options.private_data = std::move(private_data);
    options.explain_rejection = [&refusal](std::span<const std::uint8_t> data) {
      refusal = rdmakit::decode_refusal(data).value_or("rejected without a send_bw reason");
    };
    const auto source = o_.bind.empty() ? std::nullopt : std::optional(rdmakit::parse_address(o_.bind, 0));
    auto endpoint = Endpoint::resolve(source ? &*source : nullptr, rdmakit::parse_address(o_.address, o_.port), options,
                                      report_.step_events());
    if (before_connect) before_connect(*endpoint);
    try {
      endpoint->connect(report_.step_events());
    } catch (const rdmakit::RdmaError& error) {
      if (!refusal) throw;
      result_.misdeed_at_us = wall_clock_us();
      result_.peer = "refused";
      result_.detail = *refusal;
      return nullptr;
    }
    return endpoint;
  }

  // Server modes: the first connection request to --address/--port, not yet accepted.
  std::unique_ptr<Endpoint> next_client() {
    listener_.emplace(rdmakit::parse_address(o_.address, o_.port), 1, options_);
    const auto deadline =
        rdmakit::Clock::now() + std::chrono::milliseconds(static_cast<long long>(o_.accept_timeout_s * 1000));
    try {
      return listener_->next_request(deadline);
    } catch (const rdmakit::RunStopped& stopped) {
      throw PeerFailure(fmt::format("no client came: {}", stopped.what()));
    }
  }

  void misdeed_done() { result_.misdeed_at_us = wall_clock_us(); }
  void count(const std::string& what, std::uint64_t n) { result_.counts[what] = n; }
  void set_peer(std::string how) { result_.peer = std::move(how); }

  // Waits, bounded by --timeout, for our tool to leave. Our own failed completions (our
  // tool refused what we sent) are noted; successful ones go to `on_completion`.
  void wait_until_gone(Endpoint& endpoint, const std::function<void(const ibv_wc&)>& on_completion = {}) {
    for (;;) {
      try {
        const auto wc = endpoint.next_completion();
        spdlog::debug("completion {} ({} bytes) while waiting", rdmakit::opcode_name(wc.opcode), wc.byte_len);
        if (on_completion) on_completion(wc);
      } catch (const rdmakit::CompletionError& error) {
        note(error.what());
      } catch (const rdmakit::RunStopped& stopped) {
        result_.peer = stopped.reason() == rdmakit::StopReason::timed_out ? "stayed" : "disconnected";
        note(stopped.what());
        return;
      }
    }
  }

  // The next completion of `opcode`, passing over our own SEND completions.
  ibv_wc await(Endpoint& endpoint, ibv_wc_opcode opcode) {
    for (;;) {
      const auto wc = endpoint.next_completion();
      if (wc.opcode == opcode) return wc;
      if (wc.opcode != IBV_WC_SEND) {
        throw PeerFailure(
            fmt::format("expected {}, got {}", rdmakit::opcode_name(opcode), rdmakit::opcode_name(wc.opcode)));
      }
    }
  }

  void note(const std::string& text) {
    if (!result_.detail.empty()) result_.detail += "; ";
    result_.detail += text;
  }

  const Options& options() const { return o_; }
  rdmakit::Report& report() { return report_; }
  const Result& result() const { return result_; }

 private:
  Options o_;
  rdmakit::EndpointOptions options_;
  rdmakit::Report report_;  // the endpoint's timings; unused
  std::optional<rdmakit::Listener> listener_;
  Result result_;
};

// ---- send_bw server side: our client connects to us ----

constexpr std::uint32_t bw_receives = 4;

void post_send_with_imm(Endpoint& endpoint, std::uint32_t imm_data) {
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.imm_data = imm_data;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (const int rc = ibv_post_send(endpoint.queue_pair(), &wr, &bad); rc != 0) {
    throw rdmakit::RdmaError("ibv_post_send", "SEND with immediate", rc);
  }
}

using AnswerMaker = std::function<std::vector<std::uint8_t>(const bw::Hello&, const RegisteredBuffer&)>;

// Accepts our send_bw client with what `answer` makes of its hello and our buffer, then
// waits for the client to leave. Unless `silent`, it receives what comes and echoes a
// latency test's size announcements as our server does, so the client gets as far as
// using the answer; silent, it posts nothing at all.
void bw_server(CraftedPeer& peer, const AnswerMaker& answer, bool silent = false) {
  auto endpoint = peer.next_client();
  const auto hello = bw::decode_hello(endpoint->peer_private_data());
  auto& buffer = endpoint->add_buffer(hello.max_size, remote_access);
  if (!silent) {
    for (std::uint32_t i = 0; i < bw_receives; ++i) endpoint->post_receive(buffer, buffer.size(), 0);
  }
  endpoint->set_private_data(answer(hello, buffer));
  endpoint->accept(peer.report().step_events());
  peer.misdeed_done();
  peer.wait_until_gone(*endpoint, [&](const ibv_wc& wc) {
    if (wc.opcode != IBV_WC_RECV) return;
    endpoint->post_receive(buffer, buffer.size(), 0);
    if ((wc.wc_flags & IBV_WC_WITH_IMM) != 0) post_send_with_imm(*endpoint, wc.imm_data);
  });
}

std::vector<std::uint8_t> answer_bytes(const bw::Answer& answer) {
  const auto bytes = bw::encode(answer);
  return {bytes.begin(), bytes.end()};
}

bw::Answer honest_answer(const bw::Hello& hello, const RegisteredBuffer& buffer) {
  return {.address = buffer.address(), .rkey = buffer.rkey(), .length = hello.max_size};
}

// ---- send_bw client side: we connect to our server ----

bw::Hello plain_hello(std::uint32_t size) {
  return {.operation = bw::Operation::send, .test = bw::Test::bandwidth, .max_size = size, .depth = 16};
}

std::vector<std::uint8_t> hello_bytes(const bw::Hello& hello) {
  const auto bytes = bw::encode(hello);
  return {bytes.begin(), bytes.end()};
}

// A hello our server must refuse; the misdeed is done when it answers.
void bw_refused_hello(CraftedPeer& peer, std::vector<std::uint8_t> private_data) {
  if (auto endpoint = peer.connect(std::move(private_data))) {
    peer.misdeed_done();
    peer.note("accepted");
    peer.wait_until_gone(*endpoint);
  }
}

// A write latency test whose hello names a reply buffer we never registered: once we
// write, the server writes its answer there.
void bw_bad_reply_rkey(CraftedPeer& peer) {
  const auto size = peer.options().size;
  RegisteredBuffer* reply = nullptr;
  RegisteredBuffer* control = nullptr;
  RegisteredBuffer* outgoing = nullptr;
  auto hello = plain_hello(size);
  hello.operation = bw::Operation::write;
  hello.test = bw::Test::latency;
  hello.reply_length = size;
  auto endpoint = peer.connect({}, [&](Endpoint& e) {
    reply = &e.add_buffer(size, remote_access);
    control = &e.add_buffer(16, IBV_ACCESS_LOCAL_WRITE);
    outgoing = &e.add_buffer(size, IBV_ACCESS_LOCAL_WRITE);
    hello.reply_address = reply->address() + (1u << 20);
    hello.reply_rkey = reply->rkey() ^ rkey_scramble;
    e.set_private_data(hello_bytes(hello));
    e.post_receive(*control, control->size(), 0);  // for the server's echo of the size
  });
  if (!endpoint) throw PeerFailure("the server refused the hello: " + peer.result().detail);
  const auto answer = bw::decode_answer(endpoint->peer_private_data());
  // Announce the size (a zero-length SEND with the size as immediate), as send_bw does.
  post_send_with_imm(*endpoint, bw::encode_size_announcement(size));
  peer.await(*endpoint, IBV_WC_RECV);
  // The tag in the last byte is what the server answers.
  outgoing->chars()[size - 1] = 1;
  endpoint->post_rdma(IBV_WR_RDMA_WRITE, *outgoing, size, answer.address, answer.rkey, 0);
  peer.await(*endpoint, IBV_WC_RDMA_WRITE);
  peer.misdeed_done();
  peer.wait_until_gone(*endpoint);
}

// ---- rping: we are the client of our rping server ----

// Connects like an rping client and sends `message` (length bytes of it) as the first
// advert, then waits for the server to act on it and leave.
void rping_client(CraftedPeer& peer, const std::function<rdmakit::rping::BufferAdvert(const RegisteredBuffer&)>& advert,
                  std::size_t length) {
  RegisteredBuffer* receive = nullptr;
  RegisteredBuffer* send = nullptr;
  RegisteredBuffer* data = nullptr;
  auto endpoint = peer.connect({}, [&](Endpoint& e) {
    receive = &e.add_buffer(rdmakit::rping::advert_wire_size, IBV_ACCESS_LOCAL_WRITE);
    send = &e.add_buffer(rdmakit::rping::advert_wire_size, 0);
    data = &e.add_buffer(rdmakit::rping::default_payload_size, remote_access);
    e.post_receive(*receive, receive->size(), 0);
  });
  if (!endpoint) throw PeerFailure("the rping server refused the connection");
  rdmakit::rping::fill_ping_payload(std::span(data->chars(), data->size()), 0);
  const auto bytes = rdmakit::rping::encode(advert(*data));
  std::copy(bytes.begin(), bytes.end(), send->data());
  endpoint->post_send(*send, length, 0);
  peer.await(*endpoint, IBV_WC_SEND);
  peer.misdeed_done();
  peer.wait_until_gone(*endpoint);
}

// ---- rdma_server / rdma_client ----

void echo_client(CraftedPeer& peer, bool short_message) {
  RegisteredBuffer* receive = nullptr;
  RegisteredBuffer* send = nullptr;
  auto endpoint = peer.connect({}, [&](Endpoint& e) {
    receive = &e.add_buffer(rdmakit::echo::message_size, IBV_ACCESS_LOCAL_WRITE);
    send = &e.add_buffer(rdmakit::echo::message_size, 0);
    e.post_receive(*receive, receive->size(), 0);
  });
  if (!endpoint) throw PeerFailure("rdma_server refused the connection");
  if (short_message) {
    // Two zero bytes: read as a whole message they would mean "the last exchange".
    endpoint->post_send(*send, 2, 0);
    peer.await(*endpoint, IBV_WC_SEND);
  } else {
    // Garbage announcing 2^32 - 1 exchanges to come, then silence.
    const auto bytes = garbage(rdmakit::echo::message_size);
    std::copy(bytes.begin(), bytes.end(), reinterpret_cast<std::uint8_t*>(send->data()));
    std::fill_n(reinterpret_cast<std::uint8_t*>(send->data()), 4, std::uint8_t{0xff});
    endpoint->post_send(*send, rdmakit::echo::message_size, 0);
    peer.await(*endpoint, IBV_WC_RECV);
  }
  peer.misdeed_done();
  peer.wait_until_gone(*endpoint);
}

void echo_server(CraftedPeer& peer, std::size_t reply_length) {
  auto endpoint = peer.next_client();
  auto& receive = endpoint->add_buffer(rdmakit::echo::message_size, IBV_ACCESS_LOCAL_WRITE);
  auto& send = endpoint->add_buffer(64, 0);
  endpoint->post_receive(receive, receive.size(), 0);
  endpoint->accept(peer.report().step_events());
  peer.await(*endpoint, IBV_WC_RECV);
  const auto bytes = garbage(send.size());
  std::copy(bytes.begin(), bytes.end(), reinterpret_cast<std::uint8_t*>(send.data()));
  endpoint->post_send(send, reply_length, 0);
  peer.misdeed_done();
  peer.wait_until_gone(*endpoint);
}

// pingmesh-forger: from --bind (an address the target's pinglist names, on --port too),
// resolves rdma_pingmesh at --address with SIDR as a peer would, takes one of its probes, and
// sends it what no peer of ours sends: a short datagram, a foreign one, our format in
// another version, a malformed one (kind 7), an answer for a session that never was, and a
// true answer to its probe twice (a replay). rdma_pingmesh must count each and take only the
// first true answer.
void pingmesh_forger(CraftedPeer& peer) {
  namespace pm = rdmakit::pingmesh;
  const auto& o = peer.options();
  if (o.bind.empty()) throw PeerFailure("pingmesh-forger needs --bind");
  rdmakit::DatagramPort port(rdmakit::DatagramPortOptions{
      .bind_address = o.bind,
      .port = o.port,
      .receive_slots = 64,
      .send_slots = 16,
      .message_bytes = 64,
      .resolve_timeout = std::chrono::milliseconds(static_cast<long long>(o.timeout_s * 1000)),
      .stop_fd = -1});
  port.resolve("target", o.address);
  std::optional<rdmakit::DatagramAddress> target;
  std::optional<pm::ProbeMessage> probe;
  std::uint64_t refused = 0;
  const auto deadline = rdmakit::Clock::now() + std::chrono::milliseconds(static_cast<long long>(o.timeout_s * 1000));
  while (!(target && probe)) {
    if (rdmakit::Clock::now() > deadline)
      throw PeerFailure("rdma_pingmesh neither resolved nor probed within --timeout");
    for (const auto& resolution : port.take_cm_events([](const std::string&) { return std::nullopt; }, refused)) {
      if (resolution.address) {
        target = resolution.address;
      } else {
        // Not listening yet, as a peer started before it would find it: ask again.
        spdlog::info("SIDR to rdma_pingmesh: {}; again", resolution.error);
        port.resolve("target", o.address);
      }
    }
    port.drain([&](const rdmakit::DatagramArrival& arrival) {
      const auto decoded = pm::decode_probe(arrival.bytes);
      if (decoded.outcome == pm::ProbeDecode::ok && decoded.message.kind == pm::ProbeKind::probe) {
        probe = decoded.message;
      }
    });
    port.sleep(rdmakit::Clock::now() + std::chrono::milliseconds(100));
  }
  const auto send = [&](std::span<const std::uint8_t> bytes) {
    if (!port.send(bytes, *target)) throw PeerFailure("no send slot free");
  };
  auto other_version = pm::encode(*probe);
  other_version[4] = pm::probe_version + 1;
  auto malformed = pm::encode(*probe);
  malformed[5] = 7;
  auto foreign = garbage(pm::probe_size);
  foreign[0] = 'X';
  const auto forged = pm::encode(pm::answer_to(pm::ProbeMessage{.kind = pm::ProbeKind::probe,
                                                                .session = ~probe->session,
                                                                .sequence = probe->sequence,
                                                                .prober_sent_ns = probe->prober_sent_ns,
                                                                .responder_received_ns = 0,
                                                                .responder_sent_ns = 0},
                                               1000, 2000));
  const auto now_ns = rdmakit::monotonic_ns();
  const auto answer = pm::encode(pm::answer_to(*probe, now_ns, now_ns + 1000));
  send(garbage(10));
  send(foreign);
  send(other_version);
  send(malformed);
  send(forged);
  send(answer);
  send(answer);
  peer.misdeed_done();
  peer.note("sent a short, a foreign, another version's, a malformed datagram, a forged answer, a true answer twice");
  // Until every send has completed (the slots are the port's), then a moment for them to land.
  const auto settle = rdmakit::Clock::now() + std::chrono::seconds(1);
  while (rdmakit::Clock::now() < settle) {
    port.drain([](const rdmakit::DatagramArrival&) {});
    port.sleep(settle);
  }
  peer.set_peer("stayed");
}

// ---- any rdma_cm server: connections that come up and say nothing ----

// --count connections from --bind, each established (or refused) before the next is tried,
// then held --hold seconds without a word: what a host inside a persistent server's allow
// list can do to take its slots. The counts say how many came up, how many the server
// refused and how many failed otherwise.
void cm_hold(CraftedPeer& peer) {
  const auto& o = peer.options();
  std::vector<std::unique_ptr<Endpoint>> held;
  std::uint64_t refused = 0;
  std::uint64_t failed = 0;
  for (std::size_t i = 0; i < o.count; ++i) {
    try {
      auto endpoint = peer.connect({});
      if (endpoint) {
        held.push_back(std::move(endpoint));
      } else {
        ++refused;
      }
    } catch (const std::exception& error) {
      ++failed;
      spdlog::debug("connection {} failed: {}", i, error.what());
    }
  }
  peer.misdeed_done();
  peer.set_peer("stayed");
  peer.count("held", held.size());
  peer.count("refused", refused);
  peer.count("failed", failed);
  if (!o.ready.empty()) std::ofstream(o.ready) << "tried " << o.count << '\n';
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<long long>(o.hold_s * 1000)));
}

using Misdeed = std::function<void(CraftedPeer&)>;

const std::map<std::string, Misdeed>& misdeeds() {
  static const std::map<std::string, Misdeed> table = {
      {"bw-server-garbage",
       [](CraftedPeer& p) { bw_server(p, [](const bw::Hello&, const RegisteredBuffer&) { return garbage(64); }); }},
      {"bw-server-version",
       [](CraftedPeer& p) {
         bw_server(p, [](const bw::Hello& hello, const RegisteredBuffer& buffer) {
           auto bytes = answer_bytes(honest_answer(hello, buffer));
           bytes[4] = bw::version + 1;
           return bytes;
         });
       }},
      {"bw-server-short-length",
       [](CraftedPeer& p) {
         bw_server(p, [](const bw::Hello& hello, const RegisteredBuffer& buffer) {
           auto answer = honest_answer(hello, buffer);
           answer.length = std::max<std::uint32_t>(hello.max_size - 1, 1);
           return answer_bytes(answer);
         });
       }},
      {"bw-server-bad-rkey",
       [](CraftedPeer& p) {
         bw_server(p, [](const bw::Hello& hello, const RegisteredBuffer& buffer) {
           auto answer = honest_answer(hello, buffer);
           answer.rkey ^= rkey_scramble;
           return answer_bytes(answer);
         });
       }},
      {"bw-server-bad-address",
       [](CraftedPeer& p) {
         bw_server(p, [](const bw::Hello& hello, const RegisteredBuffer& buffer) {
           // One byte further: the last byte of every message falls past the registration.
           auto answer = honest_answer(hello, buffer);
           answer.address += 1;
           return answer_bytes(answer);
         });
       }},
      {"bw-server-silent",
       [](CraftedPeer& p) {
         // A valid answer, then nothing: no receives posted, no answers, no disconnect.
         bw_server(
             p,
             [](const bw::Hello& hello, const RegisteredBuffer& buffer) {
               return answer_bytes(honest_answer(hello, buffer));
             },
             true);
       }},
      {"bw-client-garbage", [](CraftedPeer& p) { bw_refused_hello(p, garbage(56)); }},
      {"bw-client-version",
       [](CraftedPeer& p) {
         auto bytes = hello_bytes(plain_hello(p.options().size));
         bytes[4] = bw::version + 1;
         bw_refused_hello(p, bytes);
       }},
      {"bw-client-huge", [](CraftedPeer& p) { bw_refused_hello(p, hello_bytes(plain_hello(bw::max_message_size))); }},
      {"bw-client-bad-reply-rkey", bw_bad_reply_rkey},
      // 64 queue pairs of 64 KiB: 4 MiB of buffers the server would register for one client.
      {"bw-client-greedy",
       [](CraftedPeer& p) {
         auto hello = plain_hello(1U << 16);
         hello.queue_pairs = bw::max_queue_pairs;
         bw_refused_hello(p, hello_bytes(hello));
       }},
      // A SEND stream's hello, accepted, then nothing sent and the connection kept up.
      {"bw-client-silent", [](CraftedPeer& p) { bw_refused_hello(p, hello_bytes(plain_hello(p.options().size))); }},
      // A WRITE stream's hello, accepted, then nothing written: the server's CQ shows nothing
      // either way; only the port's counters can tell it from a client at work.
      {"bw-client-silent-write",
       [](CraftedPeer& p) {
         auto hello = plain_hello(p.options().size);
         hello.operation = bw::Operation::write;
         bw_refused_hello(p, hello_bytes(hello));
       }},
      {"rping-client-bad-rkey",
       [](CraftedPeer& p) {
         rping_client(
             p,
             [](const RegisteredBuffer& data) {
               return rdmakit::rping::BufferAdvert{.address = data.address(),
                                                   .rkey = data.rkey() ^ rkey_scramble,
                                                   .length = static_cast<std::uint32_t>(data.size())};
             },
             rdmakit::rping::advert_wire_size);
       }},
      {"rping-client-bad-address",
       [](CraftedPeer& p) {
         rping_client(
             p,
             [](const RegisteredBuffer& data) {
               return rdmakit::rping::BufferAdvert{.address = data.address() + 1,
                                                   .rkey = data.rkey(),
                                                   .length = static_cast<std::uint32_t>(data.size())};
             },
             rdmakit::rping::advert_wire_size);
       }},
      {"rping-client-short-message",
       [](CraftedPeer& p) {
         rping_client(
             p,
             [](const RegisteredBuffer& data) {
               return rdmakit::rping::BufferAdvert{
                   .address = data.address(), .rkey = data.rkey(), .length = static_cast<std::uint32_t>(data.size())};
             },
             8);
       }},
      {"echo-client-garbage", [](CraftedPeer& p) { echo_client(p, false); }},
      {"echo-client-short", [](CraftedPeer& p) { echo_client(p, true); }},
      {"echo-server-garbage", [](CraftedPeer& p) { echo_server(p, 64); }},
      {"echo-server-short", [](CraftedPeer& p) { echo_server(p, 2); }},
      {"pingmesh-forger", pingmesh_forger},
      {"cm-hold", cm_hold},
  };
  return table;
}

void print(const Options& o, const Result& result) {
  const nlohmann::json line = {
      {"mode", o.mode},
      {"misdeed_at_us", result.misdeed_at_us ? nlohmann::json(*result.misdeed_at_us) : nlohmann::json(nullptr)},
      {"peer", result.peer},
      {"detail", result.detail},
      {"counts", result.counts}};
  std::cout << line.dump() << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("crafted_peer: a misbehaving peer for the integration tests (see the top of crafted_peer.cpp)");
  Options o;
  std::vector<std::string> modes;
  for (const auto& [name, misdeed] : misdeeds()) modes.push_back(name);
  app.add_option("--mode", o.mode, "The misdeed")->required()->check(CLI::IsMember(modes));
  app.add_option("-a,--address", o.address, "Client modes: our server's address; server modes: where to listen")
      ->required();
  app.add_option("-p,--port", o.port, "Port")->required()->check(CLI::Range(1, 65535));
  app.add_option("--timeout", o.timeout_s, "Seconds to wait for our tool at each step")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--accept-timeout", o.accept_timeout_s, "Server modes: seconds to wait for our client")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--size", o.size, "bw-client-bad-reply-rkey: message size")
      ->capture_default_str()
      ->check(CLI::Range(2u, 1u << 20));
  app.add_option("--bind", o.bind, "pingmesh-forger, cm-hold: the address to send from");
  app.add_option("--count", o.count, "cm-hold: connections to try")->capture_default_str()->check(CLI::Range(1, 4096));
  app.add_option("--hold", o.hold_s, "cm-hold: seconds to hold them")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  app.add_option("--ready", o.ready, "cm-hold: a file made once every connection was tried");
  app.add_option("--log-level", o.log_level, "trace, debug, info, warn, error")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? 0 : 2;  // --help; otherwise a usage error
  }
  const auto level = rdmakit::parse_log_level(o.log_level);
  if (!level) {
    std::cerr << "crafted_peer: unknown --log-level " << o.log_level << '\n';
    return 2;
  }
  rdmakit::setup_logging("crafted_peer", *level);

  CraftedPeer peer(o);
  try {
    misdeeds().at(o.mode)(peer);
  } catch (const std::exception& error) {
    peer.note(fmt::format("crafted_peer failed: {}", error.what()));
    print(o, peer.result());
    std::cerr << "crafted_peer: " << error.what() << '\n';
    return 1;
  }
  print(o, peer.result());
  return 0;
}
