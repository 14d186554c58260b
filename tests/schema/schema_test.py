#!/usr/bin/python3
"""The schemas in doc/schema: well formed, closed, described, and neither too loose nor too
tight for what the tools write. Run by CTest (label unit); the validator is Debian's
python3-jsonschema, through schema_check.py beside this file."""

import copy
import json
import pathlib
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import schema_check  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "doc" / "schema"
SAMPLES = ROOT / "tests" / "schema" / "samples"
TOOLS = ["rping", "udaddy", "ucmatose", "mckey", "rdma_server", "rdma_client", "send_bw", "diag-bind", "rdma_mesh",
         "diag-connect", "rdma_smoke", "rdma_pingmesh"]

# Draft 2020-12 keywords the schemas may use. jsonschema ignores a keyword it does not know,
# so a misspelt one ("additionalProperty") would loosen a schema without a word: refuse it.
KNOWN_KEYWORDS = {
    "$schema", "$id", "$ref", "$defs", "$comment", "title", "description", "examples", "default",
    "type", "enum", "const", "properties", "required", "additionalProperties", "propertyNames",
    "items", "prefixItems", "minItems", "maxItems", "uniqueItems", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "pattern", "format",
    "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentRequired",
}


def schema_files():
    return sorted(SCHEMAS.glob("*.schema.json"))


def subschemas(node, pointer=""):
    """Every schema object inside `node` (a schema), with its JSON pointer."""
    if not isinstance(node, dict):
        return
    yield pointer, node
    for key in ("properties", "$defs"):
        for name, child in node.get(key, {}).items():
            yield from subschemas(child, f"{pointer}/{key}/{name}")
    for key in ("items", "additionalProperties", "not", "if", "then", "else", "propertyNames"):
        if isinstance(node.get(key), dict):
            yield from subschemas(node[key], f"{pointer}/{key}")
    for key in ("allOf", "anyOf", "oneOf", "prefixItems"):
        for index, child in enumerate(node.get(key, [])):
            yield from subschemas(child, f"{pointer}/{key}/{index}")


def first_sample(tool):
    for path in sorted(SAMPLES.glob(f"{tool}-*.json")):
        return schema_check.load(path)
    raise AssertionError(f"no sample for {tool} in {SAMPLES}")


def problems(tool, document):
    return schema_check.violations(schema_check.validator_for(SCHEMAS / f"{tool}.schema.json"), document)


def shape(tool, changes):
    """A real sample of `tool` with what a run on a device changes: the schema must accept it."""
    document = first_sample(tool)
    document.update(copy.deepcopy(changes))
    return document


class Schemas(unittest.TestCase):
    def assertAccepted(self, tool, document):
        found = problems(tool, document)
        self.assertEqual(found, [], f"{tool}: " + "\n".join(found))

    def assertRefused(self, tool, document):
        self.assertNotEqual(problems(tool, document), [], f"{tool} accepted what it must refuse")

    def test_every_tool_has_one(self):
        for tool in TOOLS:
            self.assertTrue((SCHEMAS / f"{tool}.schema.json").exists(), tool)
        self.assertTrue((SCHEMAS / "common.schema.json").exists())

    def test_well_formed_with_known_keywords_and_resolving_refs(self):
        self.assertGreaterEqual(len(schema_files()), len(TOOLS) + 1)
        for path in schema_files():
            with self.subTest(schema=path.name):
                validator = schema_check.validator_for(path)  # check_schema: draft 2020-12 metaschema
                for pointer, node in subschemas(schema_check.load(path)):
                    unknown = set(node) - KNOWN_KEYWORDS
                    self.assertEqual(unknown, set(), f"{path.name}{pointer}: unknown keywords")
                    if "$ref" in node:
                        validator.resolver.resolve(node["$ref"])  # raises when it leads nowhere

    def test_every_property_is_described(self):
        for path in schema_files():
            undescribed = []
            for pointer, node in subschemas(schema_check.load(path)):
                types = node.get("type")
                is_object = types == "object" or (isinstance(types, list) and "object" in types)
                for name, prop in (node.get("properties", {}) if is_object else {}).items():
                    if not isinstance(prop, dict) or not prop.get("description"):
                        undescribed.append(f"{pointer}/properties/{name}")
            self.assertEqual(undescribed, [], path.name)

    def test_tool_reports_are_closed(self):
        for tool in TOOLS:
            schema = schema_check.load(SCHEMAS / f"{tool}.schema.json")
            self.assertIs(schema.get("additionalProperties"), False, tool)
            self.assertEqual(schema["properties"]["tool"]["const"], tool)

    def test_objects_are_closed_at_every_level(self):
        # An object whose shape is known lists its members and refuses others, below the top
        # too. Objects inside allOf/anyOf/if narrow one already closed, so they are not
        # walked; the two left open are open on purpose.
        open_on_purpose = {
            # Another tool's report, or null: checked against that tool's schema by the
            # integration cases, not here.
            ("rdma_smoke.schema.json", "/$defs/run/properties/report"),
            # diag-connect's capture and verdict, as rdma_pingmesh attaches them: checked against
            # diag-connect's schema where it writes them, not again here.
            ("rdma_pingmesh.schema.json", "/$defs/path/properties/diagnosis"),
            ("rdma_pingmesh_line.schema.json", "/$defs/diagnosis/properties/diagnosis"),
            # Closed per test (bw_figures, lat_figures, cm_figures, no_figures) by the allOf
            # that knows which test it was.
            ("rdma_mesh.schema.json", "/$defs/attempt/properties/figures"),
            ("rdma_mesh.schema.json", "/$defs/pair/properties/figures"),
        }

        def declared(node, pointer=""):
            if not isinstance(node, dict):
                return
            yield pointer, node
            for key in ("properties", "$defs"):
                for name, child in node.get(key, {}).items():
                    yield from declared(child, f"{pointer}/{key}/{name}")
            if isinstance(node.get("items"), dict):
                yield from declared(node["items"], f"{pointer}/items")

        for path in schema_files():
            unclosed = []
            for pointer, node in declared(schema_check.load(path)):
                types = node.get("type")
                is_object = types == "object" or (isinstance(types, list) and "object" in types)
                if is_object and "additionalProperties" not in node and (path.name, pointer) not in open_on_purpose:
                    unclosed.append(pointer)
            self.assertEqual(unclosed, [], path.name)

    def test_reports_carry_only_their_tools_groups(self):
        # lib/base/report.hpp ReportGroups, as each tool declares them (ToolRunner::report_groups).
        every = {"schema_version", "tool", "role", "arguments", "outcome", "exit_code", "duration_s", "errors"}
        connection = {"local_address", "peer_address", "cm_timings_ms", "timings_ms"}
        measurement = {"iterations", "bytes", "rtt_us"}
        both = connection | measurement
        groups = {"diag-bind": set(), "rdma_smoke": set(), "rdma_pingmesh": set(), "diag-connect": connection}
        for tool in TOOLS:
            with self.subTest(tool=tool):
                schema = schema_check.load(SCHEMAS / f"{tool}.schema.json")
                has = groups.get(tool, both)
                self.assertEqual(set(schema["required"]), every | has)
                self.assertEqual(set(schema["properties"]) & both, has)
                sample = first_sample(tool)
                self.assertEqual(set(sample) & both, has)
                for key in both - has:
                    self.assertRefused(tool, dict(sample, **{key: None}))

    def test_refuse_what_the_tools_never_write(self):
        for tool in TOOLS:
            with self.subTest(tool=tool):
                sample = first_sample(tool)
                self.assertAccepted(tool, sample)
                extra = dict(sample, surprise=1)
                self.assertTrue(any(line.startswith("/: ") and "surprise" in line for line in problems(tool, extra)))
                missing = dict(sample)
                del missing["duration_s"]
                self.assertTrue(any("'duration_s' is a required property" in line for line in problems(tool, missing)))
                self.assertRefused(tool, dict(sample, tool="udaddy" if tool == "rping" else "rping"))
                self.assertRefused(tool, dict(sample, errors=[{"message": "x", "errno": 19}]))  # errno without its name
                self.assertRefused(tool, dict(sample, outcome="failed", exit_code=0, errors=[{"message": "x"}]))

    def test_accept_group_reports(self):
        # lib/cm_tools/group_report.cpp fill_report(): a ucmatose server that ran to the end.
        ucmatose = {
            "role": "server", "outcome": "completed", "exit_code": 0, "errors": [],
            "local_address": "10.55.0.1:7471", "peer_address": "",
            "cm_timings_ms": {"create_qp": 0.4, "accept": 1.2, "disconnect": 0.8}, "timings_ms": {"transfer": 0.3},
            "iterations": {"requested": 20, "completed": 20}, "bytes": 4000,
            "steps": [{"step": "create_qp", "connections": 2, "wall_ms": 0.4, "max_ms": 0.2, "min_ms": 0.1,
                       "avg_ms": 0.15, "per_connection_us": 200.0, "failed": 0}],
            "connections": [{"index": 0, "state": "disconnected", "steps_ms": {"create_qp": 0.2, "accept": 0.6},
                             "sends_completed": 10, "received": 10, "receives_expected": 10, "lost": 0,
                             "local_address": "10.55.0.1:7471", "peer_address": "10.55.0.2:40000",
                             "qp_num": 17}],
            "events": [{"event": "DISCONNECTED", "status": 0, "connection": None}],
            "connections_requested": 2, "connections_ready": 2, "connections_failed": 0,
            "setup": {"wall_ms": 2.0, "per_connection_ms": 1.0, "connections_per_s": 1000.0},
            "messages": {"size": 100, "sent": 20, "received": 20, "expected": 20, "lost": 0},
            "migrate_ms": 0.05}
        self.assertAccepted("ucmatose", shape("ucmatose", ucmatose))

        # A udaddy server that rejected a request beyond -c and timed out waiting for datagrams.
        udaddy = {
            "role": "server", "outcome": "timed_out", "exit_code": 1,
            "errors": [{"message": "timed out waiting for datagrams from the client(s) (1 connection(s) short, ..."}],
            "arguments": {"accept_timeout": 0.0, "bind": "", "connections": 1, "count": 10, "debug": False,
                          "diagnose": False, "format": "name", "json": True, "log_level": "warn", "port": 7174,
                          "port_space": "udp", "port_space_number": "", "server": "", "size": 100, "timeout_s": 5,
                          "tos": None, "allow": ["10.55.0.0/24"], "peer_rate": 0},
            "refused_peers": {"total": 2, "not_allowed": 2, "too_fast": 0, "too_many": 0},
            "steps": [], "connections": [{"index": 0, "state": "established", "steps_ms": {"accept": 0.5},
                                          "sends_completed": 0, "received": 4, "receives_expected": 10, "lost": 6,
                                          "unfinished_step": "receive", "remote_qpn": 33}],
            "events": [{"event": "CONNECT_REQUEST", "status": 0, "rejected": "beyond -c"}],
            "connections_requested": 1, "connections_ready": 1, "connections_failed": 0,
            "messages": {"size": 100, "sent": 0, "received": 4, "expected": 10, "lost": 6}}
        self.assertAccepted("udaddy", shape("udaddy", udaddy))

        # An mckey receiver interrupted by SIGTERM, with join latencies and a multicast error.
        mckey = {
            "role": "receiver", "outcome": "interrupted", "exit_code": 143,
            "errors": [{"message": "interrupted while waiting for datagrams from the group 239.1.1.1"}],
            "steps": [], "connections": [], "connections_requested": 1, "connections_ready": 1,
            "connections_failed": 0,
            "events": [{"event": "MULTICAST_ERROR", "status": -110, "connection": 0}],
            "messages": {"size": 100, "sent": 0, "received": 0, "expected": 10, "lost": 10},
            "join_latency_us": {"count": 1, "min": 900.0, "avg": 900.0, "stdev": 0.0, "p50": 900.0, "p99": 900.0,
                                "p99.9": 900.0, "max": 900.0}}
        self.assertAccepted("mckey", shape("mckey", mckey))

        # A ucmatose client one of whose connections the server rejected: the others went on.
        partial = {
            "role": "client", "outcome": "failed", "exit_code": 1,
            "errors": [{"message": "1 of 2 connection(s) failed, the others went on; connection 1: rdma_connect(...)",
                        "call": "rdma_connect", "errno": 111, "errno_name": "ECONNREFUSED"}],
            "steps": [{"step": "connect", "connections": 2, "wall_ms": 0.4, "max_ms": 0.3, "min_ms": 0.1,
                       "avg_ms": 0.2, "per_connection_us": 200.0, "failed": 1}],
            "connections": [{"index": 1, "state": "failed", "steps_ms": {"connect": 0.3}, "sends_completed": 0,
                             "received": 0, "receives_expected": 0, "lost": 0, "failed_step": "connect",
                             "failure": {"message": "rdma_connect(10.55.0.1:7471): Connection refused",
                                         "call": "rdma_connect", "errno": 111, "errno_name": "ECONNREFUSED"}}],
            "events": [], "connections_requested": 2, "connections_ready": 1, "connections_failed": 1,
            "messages": {"size": 100, "sent": 10, "received": 10, "expected": 10, "lost": 0}}
        self.assertAccepted("ucmatose", shape("ucmatose", partial))

        # Once the group exists its results are always there.
        without_messages = shape("ucmatose", ucmatose)
        del without_messages["messages"]
        self.assertRefused("ucmatose", without_messages)

    def test_accept_a_failed_completion_in_an_error(self):
        failed = {"outcome": "failed", "exit_code": 1,
                  "errors": [{"message": "send completion failed: remote access error (vendor error 0x0)",
                              "completion": {"status": 10, "status_text": "remote access error",
                                             "vendor_error": 0}}]}
        self.assertAccepted("send_bw", shape("send_bw", failed))
        partial_status = copy.deepcopy(failed)
        del partial_status["errors"][0]["completion"]["status_text"]
        self.assertRefused("send_bw", shape("send_bw", partial_status))

    def test_accept_rping_persistent_servers(self):
        interrupted = {
            "role": "server", "outcome": "interrupted", "exit_code": 130, "errors": [],
            "connections": [{"peer": "10.55.0.2:40000", "iterations": 5, "bytes": 640, "outcome": "completed",
                             "error": ""},
                            {"peer": "10.55.0.2:40001", "iterations": 2, "bytes": 256, "outcome": "failed",
                             "error": "peer sent a 7-byte message; rping messages are 16 bytes"}]}
        self.assertAccepted("rping", shape("rping", interrupted))
        # Idle for --accept-timeout: a normal end, never a timed-out one with exit 0.
        idle = dict(interrupted, outcome="completed", exit_code=0)
        self.assertAccepted("rping", shape("rping", idle))
        self.assertRefused("rping", shape("rping", dict(idle, outcome="timed_out")))

    def test_accept_persistent_rdma_server_and_send_bw_server(self):
        rdma_server = {
            "role": "server", "outcome": "completed", "exit_code": 0, "errors": [],
            "arguments": {"accept_timeout": 0.0, "debug": False, "diagnose": False, "json": True, "log_level": "warn",
                          "no_inline": False, "persistent": True, "port": 7471, "server": "10.55.0.1",
                          "timeout_s": 5, "allow": "", "max_clients": 64, "max_per_peer": None, "peer_rate": 0},
            "refused_peers": {"total": 1, "not_allowed": 0, "too_fast": 0, "too_many": 1},
            "connections": [{"peer": "10.55.0.1:40000", "iterations": 10, "bytes": 320, "outcome": "completed",
                             "error": ""},
                            {"peer": "", "iterations": 0, "bytes": 0, "outcome": "failed",
                             "error": "rdma_get_request: ..."}]}
        self.assertAccepted("rdma_server", shape("rdma_server", rdma_server))

        send_bw = schema_check.load(SAMPLES / "send_bw-server-no-device.json")
        send_bw.update({
            "role": "server", "outcome": "interrupted", "exit_code": 130, "errors": [],
            "connections": [{"peer": "10.55.0.1:40000", "iterations": 1100, "bytes": 4505600, "outcome": "completed",
                             "error": "", "test": {"test": "bw", "operation": "send", "queue_pairs": 1,
                                                   "bidirectional": False, "client_depth": 128, "max_size": 4096, "completion": "poll",
                                                   "path": {"device": "rxe0", "port": 1, "path_mtu": 1024}}},
                            {"peer": "10.55.0.1:40001", "iterations": 0, "bytes": 0, "outcome": "failed",
                             "error": "rdma_accept: ...", "test": {}}]})
        send_bw.pop("test", None)
        send_bw.pop("rows", None)
        send_bw["arguments"]["persistent"] = True
        self.assertAccepted("send_bw", send_bw)
        # Without -P a server reports its test and rows, not connections.
        send_bw["arguments"]["persistent"] = False
        self.assertRefused("send_bw", send_bw)
        # A client record says what it ran.
        send_bw["arguments"]["persistent"] = True
        del send_bw["connections"][0]["test"]
        self.assertRefused("send_bw", send_bw)

    def test_accept_send_bw_servers(self):
        path = {"device": "rxe0", "port": 1, "path_mtu": 1024}
        bandwidth = {
            "role": "server", "outcome": "completed", "exit_code": 0, "errors": [],
            "test": {"test": "bw", "operation": "write", "queue_pairs": 2, "bidirectional": False,
                     "client_depth": 128, "max_size": 65536, "completion": "events", "path": path},
            "rows": [{"bytes": 65536, "iterations": 2000, "seconds": 1.5, "bw_peak_mib_per_s": 90.0,
                      "bw_average_mib_per_s": 85.0, "bw_average_gbit_per_s": 0.7, "message_rate_mpps": 0.001}],
            "refused": [{"peer": "10.55.0.2:41000", "reason": "131072-byte messages asked for; this server allows ..."}]}
        self.assertAccepted("send_bw", shape("send_bw", bandwidth))
        latency = {
            "role": "server", "outcome": "completed", "exit_code": 0, "errors": [], "rows": [], "answered": 1100,
            "test": {"test": "lat", "operation": "send", "queue_pairs": 1, "bidirectional": False, "client_depth": 1, "completion": "poll",
                     "max_size": 2, "path": path}}
        self.assertAccepted("send_bw", shape("send_bw", latency))
        partial_gid = copy.deepcopy(latency)
        partial_gid["test"]["path"]["gid_index"] = 1  # without gid and gid_type
        self.assertRefused("send_bw", shape("send_bw", partial_gid))

    def test_accept_rdma_client_runs(self):
        completed = {
            "outcome": "completed", "exit_code": 0, "errors": [], "inline_send": True,
            "local_address": "10.55.0.1:50000", "peer_address": "10.55.0.1:7471",
            "cm_timings_ms": {"getaddrinfo": 0.1, "create_ep": 2.0, "connect": 1.0, "disconnect": 0.2},
            "timings_ms": {"reg_msgs": 0.1, "transfer": 0.5},
            "iterations": {"requested": 1, "completed": 1}, "bytes": 32,
            "rtt_us": {"count": 1, "min": 40.0, "avg": 40.0, "stdev": 0.0, "p50": 40.0, "p99": 40.0,
                       "p99.9": 40.0, "max": 40.0}}
        self.assertAccepted("rdma_client", shape("rdma_client", completed))
        self.assertRefused("rdma_client", shape("rdma_client", dict(completed, errors=[{"message": "x"}])))
        # One step vocabulary (lib/base/step.hpp): an old spelling, or another step among the CM ones, is refused.
        for cm in ({"addr_resolve": 1.0}, {"reg_msgs": 0.1}):
            self.assertRefused("rdma_client", shape("rdma_client", dict(completed, cm_timings_ms=cm)))
        self.assertRefused("rdma_client", shape("rdma_client", dict(completed, timings_ms={"connect": 1.0})))


    def test_mesh_pairs_nodes_and_summaries(self):
        mesh = schema_check.load(SAMPLES / "rdma_mesh-netdev-without-rdma.json")
        self.assertAccepted("rdma_mesh", mesh)
        failed = next(index for index, pair in enumerate(mesh["pairs"]) if pair["cause"])
        measured = next(index for index, pair in enumerate(mesh["pairs"]) if pair["final_figure"] is not None)

        def changed(edit):
            document = copy.deepcopy(mesh)
            edit(document)
            return document

        # A rank with no address at all: rdma_mesh's own no_address verdict, and its pairs' cause.
        no_address = {"cause": "no_address", "exit_code": 1, "summary": "no ACTIVE port has an address",
                      "fix": "", "next": "give the address with --bind, or the netdev with --netdev",
                      "details": [], "warnings": []}
        self.assertAccepted("rdma_mesh", changed(lambda d: (d["nodes"][2].update(address="", verdict=no_address),
                                                            d["pairs"][failed].update(cause="no_address"))))
        # A usable node has no verdict; an unusable one has a failing one.
        self.assertRefused("rdma_mesh", changed(lambda d: d["nodes"][2].update(usable=True)))
        self.assertRefused("rdma_mesh", changed(lambda d: d["nodes"][0].update(usable=False)))
        self.assertRefused("rdma_mesh", changed(lambda d: d["pairs"][failed].update(cause="ok")))
        # A failed direction has no figure and is no outlier; a measured one has no error.
        self.assertRefused("rdma_mesh", changed(lambda d: d["pairs"][failed].update(outlier=True)))
        self.assertRefused("rdma_mesh", changed(lambda d: d["pairs"][failed].update(final_figure=1.0)))
        self.assertRefused("rdma_mesh", changed(lambda d: d["pairs"][measured].update(error={"message": "x"})))
        # Each test its unit and its figures.
        self.assertRefused("rdma_mesh", changed(lambda d: d["pairs"][measured].update(unit="us")))
        latency = next(pair["figures"] for pair in mesh["pairs"] if pair["test"] == "lat" and pair["figures"])
        self.assertRefused("rdma_mesh", changed(
            lambda d: d["pairs"][measured].update(test="bw", unit="MiB/s", figures=latency)))
        # The receiver's error rides along with the sender's figures.
        self.assertAccepted("rdma_mesh", changed(
            lambda d: d["pairs"][failed]["figures"].update(receiver_error={"message": "rdma_get_cm_event: ..."})))
        # A summary's spread is there exactly when something was measured.
        self.assertRefused("rdma_mesh", changed(lambda d: d["summary"]["bw"].update(median=None)))
        self.assertRefused("rdma_mesh", changed(lambda d: d["summary"]["lat"].update(unit="ms")))
        # Once the run started the mesh's keys are in the report.
        self.assertRefused("rdma_mesh", changed(lambda d: d.pop("pairs")))

    def test_connect_client_agent_and_diagnosis(self):
        replay = schema_check.load(SAMPLES / "diag-connect-replay-firewall_roce.json")
        self.assertAccepted("diag-connect", replay)

        def changed(edit, document=replay):
            document = copy.deepcopy(document)
            edit(document)
            return document

        # The outcome, the exit status and the verdict's cause belong to one class of cause.
        self.assertRefused("diag-connect", changed(lambda d: d.update(exit_code=0)))
        self.assertRefused("diag-connect", changed(lambda d: d["verdict"].update(exit_code=3)))
        self.assertRefused("diag-connect", changed(lambda d: d["verdict"].update(cause="ok")))
        self.assertRefused("diag-connect", changed(lambda d: d.pop("capture")))
        # Optional members are null, never absent; the agent's answer is one.
        self.assertAccepted("diag-connect", changed(lambda d: d["capture"].update(peer=None)))
        self.assertRefused("diag-connect", changed(lambda d: d["capture"].pop("peer")))
        self.assertRefused("diag-connect", changed(lambda d: d["capture"]["attempt"].pop("rejection")))
        self.assertRefused("diag-connect", changed(lambda d: d["capture"]["agent"].update(status="maybe")))
        self.assertRefused("diag-connect", changed(
            lambda d: d["capture"]["peer"]["view"]["netdevs"][0].update(mtu="1500")))
        # A step interrupted by Ctrl-C: exit 130 with the partial capture and an error.
        interrupted = changed(lambda d: d.update(role="client", exit_code=130,
                                                 errors=[{"message": "interrupted during connect"}]))
        self.assertAccepted("diag-connect", interrupted)
        self.assertRefused("diag-connect", dict(interrupted, errors=[]))

        # The agent (--serve) reports what it served, and nothing of a client's.
        agent = changed(lambda d: (d.pop("capture"), d.pop("verdict"), d.update(
            role="agent", outcome="completed", exit_code=0, local_address="", peer_address="", cm_timings_ms={}, timings_ms={},
            agent={"answers": 2, "bad_requests": 2, "unauthenticated": 1, "busy": 0, "connections": 3, "rejected": 1,
                   "expired": 0, "unticketed": 1})))
        agent["arguments"].update(serve=True, replay="")
        self.assertAccepted("diag-connect", agent)
        self.assertRefused("diag-connect", changed(lambda d: d.update(capture=replay["capture"]), agent))
        self.assertRefused("diag-connect", changed(lambda d: d["agent"].pop("expired"), agent))
        self.assertRefused("diag-connect", changed(lambda d: d.update(outcome="ok"), agent))
        # An agent whose listener could not be set up: failed, no tally.
        self.assertAccepted("diag-connect", changed(lambda d: (d.pop("agent"), d.update(
            outcome="failed", exit_code=1, errors=[{"message": "binding the side channel to TCP [::]:7472: ..."}])),
            agent))

        # The other tools' --diagnose of a failure to reach the peer: diag-connect's diagnosis.
        rping = first_sample("rping")
        diagnosis = {"tool": "diag-connect", "capture": replay["capture"], "verdict": replay["verdict"]}
        rping_with = dict(rping, outcome="failed", exit_code=1, diagnosis=diagnosis,
                          errors=[{"message": "rdma_connect(10.57.0.1:7471): Connection timed out",
                                   "call": "rdma_connect", "errno": 110, "errno_name": "ETIMEDOUT"}])
        self.assertAccepted("rping", rping_with)
        self.assertRefused("rping", dict(rping_with, diagnosis=dict(diagnosis, tool="diag-bind")))


    def test_smoke_cases_outcomes_and_no_device(self):
        rxe = schema_check.load(SAMPLES / "rdma_smoke-rxe.json")
        no_device = schema_check.load(SAMPLES / "rdma_smoke-no-device.json")
        self.assertAccepted("rdma_smoke", rxe)
        self.assertAccepted("rdma_smoke", no_device)

        def changed(edit, document=rxe):
            document = copy.deepcopy(document)
            edit(document)
            return document

        # A case failed (the server's error and hint), another skipped (the client exited 77): exit 1.
        def one_failed(d):
            d.update(outcome="failed", exit_code=1, errors=[{"message": "1 of 8 cases failed"}])
            d["smoke"].update(passed=6, failed=1, skipped=1)
            d["smoke"]["cases"][1].update(outcome="failed", hint="run: diag-bind 10.55.0.1",
                                          reason="rping (server): rdma_bind_addr(10.55.0.1:19401): ... (exit 1)")
            d["smoke"]["cases"][1]["runs"][1].update(exit_code=1, report=None, stderr="rping: ...\n")
            d["smoke"]["cases"][5].update(outcome="skipped", reason="mckey: ... (exit 77)")
        failed = changed(one_failed)
        self.assertAccepted("rdma_smoke", failed)
        # Exit 0 with a failed case, or with a no-device report.
        self.assertRefused("rdma_smoke", changed(lambda d: d["smoke"].update(failed=1)))
        self.assertRefused("rdma_smoke", changed(lambda d: d["smoke"].update(no_device=no_device["smoke"]["no_device"])))
        # A process outlived its case and was ended; one never started.
        self.assertAccepted("rdma_smoke", changed(lambda d: d["smoke"]["cases"][1]["runs"][0].update(
            exit_code=-1, signal=15, timed_out=True), failed))
        self.assertAccepted("rdma_smoke", changed(lambda d: d["smoke"]["cases"][1]["runs"][0].update(
            exit_code=-1, start_error="/usr/bin/rping: No such file or directory"), failed))
        self.assertRefused("rdma_smoke", changed(lambda d: d["smoke"]["cases"][1]["runs"][0].update(start_error="")))
        # Stopped by Ctrl-C: exit 130, the list ends with the case that was stopped.
        self.assertAccepted("rdma_smoke", changed(lambda d: (d.update(outcome="interrupted", exit_code=130, errors=[
            {"message": "stopped by a signal"}]), d["smoke"]["cases"].pop())))
        # Only the known cases, outcomes and roles.
        self.assertRefused("rdma_smoke", changed(lambda d: d["smoke"]["cases"][0].update(outcome="error")))
        self.assertRefused("rdma_smoke", changed(lambda d: d["smoke"]["cases"][0].update(name="send_bw.read")))
        self.assertRefused("rdma_smoke", changed(lambda d: d["smoke"]["cases"][1]["runs"][0].update(role="peer")))
        self.assertRefused("rdma_smoke", changed(lambda d: d["smoke"]["cases"][1]["runs"][0].update(report="{}")))
        # Exit 77: diag-bind alone ran, its report checked against diag-bind's schema.
        self.assertRefused("rdma_smoke", changed(lambda d: d["smoke"]["cases"].append(d["smoke"]["cases"][0]),
                                                 no_device))
        self.assertRefused("rdma_smoke", changed(lambda d: d["smoke"]["no_device"]["verdict"].update(cause="bogus"),
                                                 no_device))
        self.assertRefused("rdma_smoke", changed(lambda d: d.pop("smoke"), no_device))
        # Without smoke: a usage error, or rdma_smoke itself failed (the --junit file unwritable).
        self.assertAccepted("rdma_smoke", changed(lambda d: (d.pop("smoke"), d.update(outcome="failed", exit_code=1,
            errors=[{"message": "cannot write /nonexistent/rdma-smoke.xml"}]))))
        self.assertRefused("rdma_smoke", changed(lambda d: d.pop("smoke")))

class Checker(unittest.TestCase):
    """schema_check.py itself: the exit codes the integration cases rely on."""

    def test_exit_codes(self):
        import subprocess
        script = pathlib.Path(schema_check.__file__)
        good = SAMPLES / "rping-usage-error.json"
        run = lambda *args, **kw: subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                                                 **kw)
        self.assertEqual(run(str(SCHEMAS / "rping.schema.json"), str(good)).returncode, 0)
        refused = run(str(SCHEMAS / "rping.schema.json"), "-", input='{"tool": "rping"}')
        self.assertEqual(refused.returncode, 1)
        self.assertIn("'schema_version' is a required property", refused.stdout)
        self.assertEqual(run(str(SCHEMAS / "rping.schema.json"), "/nonexistent.json").returncode, 2)


if __name__ == "__main__":
    unittest.main()
