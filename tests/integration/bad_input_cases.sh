# Bad invocations of every tool, one table: each must be a usage error (exit 2) told in one
# line on stderr, with nothing on stdout, or with --json the one report on stdout. The first
# table needs no RDMA device (flags and names are checked before anything opens one); the
# second holds what only an open device can refuse.

# expect_usage_errors: reads table rows from stdin, one invocation each:
#   EXIT | TOOL | ARGUMENTS | ERE the stderr line must match
# ARGUMENTS split on blanks (no quoting); the ERE is the rest of the line and may hold '|'.
# Blank lines and lines starting with '#' are skipped.
expect_usage_errors() {
  local line expected tool arguments pattern n=0
  local -a argv lines
  while IFS= read -r line; do
    [[ $line =~ ^[[:space:]]*(#|$) ]] && continue
    IFS='|' read -r expected tool arguments pattern <<< "$line"
    expected=${expected//[[:space:]]/} tool=${tool//[[:space:]]/}
    read -r -a argv <<< "$arguments"
    pattern=$(sed 's/^[[:space:]]*//; s/[[:space:]]*$//' <<< "$pattern")
    [[ -x $BIN/$tool ]] || fail "table row for a tool that is not built: $line"
    n=$((n + 1))
    local name="row$n" what="$tool ${argv[*]}"
    run "$name" 20 "$BIN/$tool" "${argv[@]}"
    [[ $RC -ne 124 ]] || fail "$what: still running after 20 s"
    expect_rc "$expected" "$what"
    mapfile -t lines < "$T/$name.err"
    [[ ${#lines[@]} -eq 1 ]] || fail "$what: ${#lines[@]} lines on stderr, expected one"
    [[ ${lines[0]} == "$tool: "* ]] || fail "$what: the stderr line does not start with '$tool: '"
    grep -Eq -- "$pattern" "$T/$name.err" || fail "$what: the stderr line does not match /$pattern/"
    if [[ " ${argv[*]} " == *" --json "* ]]; then
      [[ $(jq -s length "$T/$name.out" 2> /dev/null) == 1 ]] || fail "$what: stdout is not one JSON document"
      expect_jq ".tool == \"$tool\" and .outcome == \"usage_error\" and .exit_code == $expected
        and (.errors | length == 1) and (.errors[0].message | length > 0)" "$name.out"
      # The same message as on stderr, which may add where to look for help.
      local message
      message=$(jq -r '.errors[0].message' "$T/$name.out")
      [[ ${lines[0]} == "$tool: $message"* ]] || fail "$what: JSON message differs from stderr"
    else
      [[ ! -s $T/$name.out ]] || fail "$what: output on stdout without --json"
    fi
  done
  note "$n bad invocations: exit 2, one line on stderr each"
}

# about 150 tool starts, the ASan build's too: at nice 19 beside two busy guests they took 182 s
# (CI at 0929e51), inside RDMAKIT_DEVICE_FREE_TIMEOUT
# ctest: nodevice
case_all_tools_bad_flags() {
  # Device-free: must hold on any host (it runs on the build host, label nodevice). No name here may
  # need DNS to fail (the VM reaches no DNS server: "try again" is a run failure, exit 1);
  # names under .invalid never resolve (RFC 6761) and are refused without asking.
  expect_usage_errors <<'ROWS'
# exit | tool   | arguments                              | stderr says
2 | rping       | -c -a 1.2.3.4 -p 70000                  | --port: Value 70000 not in range
2 | rping       | -c -a 1.2.3.4 -C -1                     | --count: Value -1
2 | rping       | -c -a 1.2.3.4 -C 10x                    | --count: Value 10x
2 | rping       | -c -a 1.2.3.4 -S 65536                  | -S 65536 is outside
2 | rping       | -s -c -a 1.2.3.4                        | exactly one of -s .* and -c
2 | rping       | -c                                      | needs the server address: -a
2 | rping       | -c -a nohost.invalid                    | cannot resolve 'nohost.invalid'
2 | rping       | -c -a 1.2.3.4:7174                      | cannot resolve '1.2.3.4:7174'
2 | rping       | -s -a 1.2.3.4 extra                     | not expected: extra
2 | rping       | -c -a 1.2.3.4 --timeout 0               | --timeout must be between
2 | rping       | -c -I nohost.invalid -a 1.2.3.4 --json  | cannot resolve 'nohost.invalid'
2 | rping       | -s --accept-timeout nan                 | --accept-timeout: 'nan' is not a finite number
2 | rping       | -c -a 1.2.3.4 --timeout inf             | --timeout: 'inf' is not a finite number
2 | udaddy      | -s 1.2.3.4 --port 70000                 | --port: Value 70000
2 | udaddy      | -s 1.2.3.4 -c 0                         | --connections: Value 0
2 | udaddy      | -s nohost.invalid                       | cannot resolve 'nohost.invalid'
2 | udaddy      | -f ipv6 -s 1.2.3.4                      | cannot resolve '1.2.3.4'
2 | udaddy      | -P udp -p 0x111 -s 1.2.3.4              | port space once
2 | udaddy      | -s 1.2.3.4 --timeout -1 --json          | --timeout must be between
2 | udaddy      | -s 1.2.3.4 --accept-timeout NaN --json  | --accept-timeout: 'NaN' is not a finite number
2 | ucmatose    | -s 1.2.3.4 -c 1025                      | --connections: Value 1025
2 | ucmatose    | -s 1.2.3.4 -a 32                        | --ack-timeout: Value 32
2 | ucmatose    | -s 1.2.3.4 -P udp                       | connected port space
2 | ucmatose    | -b nohost.invalid --json                | cannot resolve 'nohost.invalid'
2 | ucmatose    | -s 1.2.3.4 -f ip -S 0                   | --size: Value 0
2 | mckey       |                                         | give the multicast group
2 | mckey       | -m 239.1.1.1 -M ff12::1                 | --group excludes --unmapped-group
2 | mckey       | -m nohost.invalid                       | cannot resolve 'nohost.invalid'
2 | mckey       | -m 239.1.1.1 -c -3                      | --connections: Value -3
2 | mckey       | -m 239.1.1.1 --settle 5s                | --settle: Value 5s
2 | mckey       | -s -m 239.1.1.1 --settle nan            | --settle: 'nan' is not a finite number
2 | mckey       | -m 239.1.1.1 --first-timeout inf        | --first-timeout: 'inf' is not a finite number
2 | mckey       | -m 239.1.1.1 -b nohost.invalid --json   | cannot resolve 'nohost.invalid'
2 | rdma_server | -p 0                                    | --port: Value 0
2 | rdma_server | --accept-timeout -1                     | --accept-timeout: Value -1
2 | rdma_server | --accept-timeout NaN                    | --accept-timeout: 'NaN' is not a finite number
2 | rdma_server | -s nohost.invalid                       | cannot resolve 'nohost.invalid'
2 | rdma_server | extra --json                            | not expected: extra
2 | rdma_client | -C 0                                    | --count: Value 0
2 | rdma_client | -s 1.2.3.4 -p 65536                     | --port: Value 65536
2 | rdma_client | -s 1.2.3.4 -C 10x                       | --count: Value 10x
2 | rdma_client | -s nohost.invalid --json                | cannot resolve 'nohost.invalid'
2 | rdma_client | --timeout 3601                          | --timeout must be between
2 | send_bw     | 1.2.3.4 -s 0                            | --size: Value 0
2 | send_bw     | 1.2.3.4 -t 0                            | --tx-depth: Value 0
2 | send_bw     | 1.2.3.4 -n -5                           | --iters: Value -5
2 | send_bw     | 1.2.3.4 -D 10x                          | --duration: Value 10x
2 | send_bw     | 1.2.3.4 -D nan                          | --duration: 'nan' is not a finite number
2 | send_bw     | --accept-timeout inf --json             | --accept-timeout: 'inf' is not a finite number
2 | send_bw     | 1.2.3.4 -a -s 64                        | --size excludes --all
2 | send_bw     | 1.2.3.4 -x 1 --bind 1.2.3.4             | -x and --bind
2 | send_bw     | 1.2.3.4 extra                           | not expected: extra
2 | send_bw     | 1.2.3.4 --bogus                         | not expected: --bogus
2 | send_bw     | nohost.invalid                          | cannot resolve 'nohost.invalid'
2 | send_bw     | --bind nohost.invalid --json            | cannot resolve 'nohost.invalid'
2 | send_bw     | 1.2.3.4 -m 300 --json                   | -m 300: the MTU must be
2 | send_bw     | --expect-bw 100                         | --expect-\* and --baseline are the client's
2 | send_bw     | 1.2.3.4 --lat --expect-bw 1             | --expect-bw and --expect-rate check bandwidth rows
2 | send_bw     | 1.2.3.4 --expect-lat-p99 5 --json       | --expect-lat-p99 checks latency rows
2 | send_bw     | 1.2.3.4 --expect-rate 0                 | --expect-rate: must be above 0
2 | send_bw     | 1.2.3.4 --tolerance 0.2                 | --tolerance requires --baseline
2 | send_bw     | 1.2.3.4 --baseline /nonexistent/old.json | --baseline: cannot read /nonexistent/old.json
2 | send_bw     | --tclass 96                             | --tclass is the client's
2 | send_bw     | --counters --json                       | --counters is the client's
2 | send_bw     | 1.2.3.4 --tclass 256                    | --tclass: Value 256
2 | send_bw     | 1.2.3.4 --ack-timeout 32                | --ack-timeout: Value 32
2 | send_bw     | 1.2.3.4 --retry-count 8                 | --retry-count: Value 8
2 | send_bw     | --histogram                             | --histogram is the latency client's
2 | send_bw     | 1.2.3.4 --histogram                     | --histogram applies to latency tests
2 | send_bw     | 1.2.3.4 --interval 1                    | --interval cuts a timed bandwidth run
2 | send_bw     | 1.2.3.4 --lat -D 2 --interval 1         | --interval cuts a timed bandwidth run
2 | send_bw     | 1.2.3.4 --lat --op write -e             | -e does not apply to the write latency test
2 | send_bw     | 1.2.3.4 --op atomic -s 16               | --op atomic works on 8 bytes
2 | send_bw     | 1.2.3.4 --op atomic -a                  | -a has no sizes to sweep
2 | send_bw     | 1.2.3.4 --atomic compare-swap           | --atomic chooses the atomic of --op atomic
2 | send_bw     | 1.2.3.4 --op atomic -b                  | -b works with --op send
2 | send_bw     | 1.2.3.4 -c UD -s 8192                   | -c UD: -s 8192 is above 4096, the largest MTU
2 | send_bw     | 1.2.3.4 -c UD --lat --op write          | -c UD carries SEND only
2 | send_bw     | 1.2.3.4 -c UD --op read                 | -c UD carries SEND only
2 | send_bw     | 1.2.3.4 -c UD -b                        | -b needs -c RC
2 | send_bw     | 1.2.3.4 -c UD -m 1024                   | UD datagrams go at the port's active MTU
2 | send_bw     | 1.2.3.4 -c UC                           | --connection: UC: send_bw runs RC or UD
2 | send_bw     | 1.2.3.4 --pin-core 1000                 | --pin-core 1000: this process may run on cores
2 | send_bw     | -D 2 --interval 1                       | --interval is the client's
2 | send_bw     | 1.2.3.4 -D 2 --interval 0               | --interval: Value 0
2 | send_bw     | 1.2.3.4 --lat --rate-limit 5            | --rate-limit paces a bandwidth test
2 | send_bw     | --rate-limit 5                          | --rate-limit is the client's
2 | send_bw     | 1.2.3.4 --rate-limit 5 --rate-units x   | --rate-units: x not in
2 | send_bw     | 1.2.3.4 -s 8388608 --rate-limit 1e-6 --rate-units g | is below one 8388608-byte message a second
2 | diag-bind   | -p 70000 10.55.0.1                      | --port: Value 70000
2 | diag-bind   | --ps foo                                | --ps: foo not in
2 | diag-bind   | nohost.invalid --json                   | cannot resolve 'nohost.invalid'
2 | diag-bind   | 1.2.3.4 extra                           | not expected: extra
2 | diag-bind   | --mr-size -4                            | --mr-size: Value -4
2 | rdma_smoke  | --tools foo                             | --tools: unknown tool 'foo'
2 | rdma_smoke  | --skip rping,bar --json                 | --skip: unknown tool 'bar'
2 | rdma_smoke  | --tools rping --skip rping              | leave no case to run
2 | rdma_smoke  | --case-timeout 0                        | --case-timeout: Value 0
2 | rdma_smoke  | -p 70000                                | --port: Value 70000
2 | rdma_smoke  | nohost.invalid                          | cannot resolve 'nohost.invalid'
2 | rdma_smoke  | --tools-dir /nonexistent                | no rdmakit tools in /nonexistent
2 | rdma_smoke  | --junit /nonexistent/smoke.xml          | --junit: '/nonexistent/smoke.xml': no folder /nonexistent
2 | rdma_smoke  | --junit /                               | --junit: '/' is a directory
2 | send_bw     | 1.2.3.4 --json-file /nonexistent/r.json  | --json-file: '/nonexistent/r.json': no folder
2 | rdma_pingmesh | --json                                | --pinglist is required
2 | rdma_pingmesh | --pinglist /nonexistent               | /nonexistent: cannot read it
2 | rdma_pingmesh | --pinglist /dev/null --window 0.1     | --window: Value 0.1
2 | rdma_pingmesh | --pinglist /dev/null --metrics 70000  | --metrics 70000: expected PORT, ADDRESS:PORT
2 | rdma_pingmesh | --pinglist /dev/null --metrics ::1:80 | --metrics ::1:80: expected PORT
2 | rdma_pingmesh | --pinglist /dev/null --prom-file /nonexistent/x.prom | --prom-file /nonexistent/x.prom: no folder
2 | rdma_pingmesh | --pinglist /dev/null --window 1 --answer-timeout 20 | --answer-timeout 20 s is more than ten windows
2 | rdma_pingmesh | --pinglist /dev/null --metrics 9100 --metrics-allow 10.0.0.0/33 | --metrics-allow '10.0.0.0/33'
2 | rdma_pingmesh | --pinglist /dev/null --metrics-allow 10.0.0.0/8 | --metrics-allow without --metrics
2 | send_bw     | --json-file / --json                    | --json-file: '/' is a directory
ROWS

}

# A host without RDMA (the build host, label nodevice): every tool exits 77, the code a CI
# reads as "skipped", whichever call it makes first, server and client; -x fails in
# ibv_get_device_list rather than in librdmacm. Skipped where the host has a device.
# ctest: nodevice skip_77
case_all_tools_no_device() {
  require_no_device
  local line tool n=0
  local -a argv
  while read -r line; do
    read -r -a argv <<< "$line"
    tool=${argv[0]}
    n=$((n + 1))
    run "row$n" 20 "$BIN/$tool" "${argv[@]:1}" --json
    expect_rc 77 "$line"
    expect_jq '.exit_code == 77 and (.errors | length == 1)' "row$n.out"
    grep -q "^$tool: " "$T/row$n.err" || fail "$line: stderr does not name $tool"
  done <<'ROWS'
rping -s -a 127.0.0.1 --accept-timeout 2
rping -c -a 127.0.0.1
udaddy
udaddy -s 127.0.0.1
ucmatose
ucmatose -s 127.0.0.1
mckey -m 239.1.1.1
rdma_server --accept-timeout 2
rdma_client -s 127.0.0.1
send_bw --accept-timeout 2
send_bw 127.0.0.1
send_bw 127.0.0.1 -x 0
rdma_pingmesh --pinglist /dev/null --bind 127.0.0.1
ROWS
  note "$n runs without a device: exit 77 each"
}

# Each tool links only the libraries it uses: the ones that measure carry none of the
# diagnosers' (their --diagnose runs diag-bind), the daemons' or rdma_smoke's.
# ctest: nodevice
case_tools_link_what_they_use() {
  local tool needed
  for tool in rping udaddy ucmatose mckey rdma_server rdma_client send_bw; do
    needed=$(readelf -d "$BIN/$tool" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')
    [[ -n $needed ]] || fail "$tool: readelf -d lists no shared library"
    if grep -Eq 'lib(nftables|cap|crypto|ssl|microhttpd|mpi|pugixml)\.' <<< "$needed"; then
      fail "$tool links $needed"
    fi
  done
  # rdma_mesh's ranks read the host as diag-bind does, not as diag-connect's agent and probe
  # do: Open MPI, but neither libnftables, libcap nor libcrypto.
  if [[ -x $BIN/rdma_mesh ]]; then
    needed=$(readelf -d "$BIN/rdma_mesh" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')
    if grep -Eq 'lib(nftables|cap|crypto|ssl|microhttpd|pugixml)\.' <<< "$needed"; then
      fail "rdma_mesh links $needed"
    fi
  fi
  # rdma_pingmesh runs diag-bind for a path's diagnosis: libmicrohttpd for /metrics, none of
  # the diagnosers' libraries.
  needed=$(readelf -d "$BIN/rdma_pingmesh" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')
  if grep -Eq 'lib(nftables|cap|crypto|ssl|mpi|pugixml)\.' <<< "$needed"; then
    fail "rdma_pingmesh links $needed"
  fi
  # rdma_smoke asks the kernel which rdma_cm ids listen (netlink) and reads the host as
  # diag-bind does: libcrypto for --serve's keyed handshake, pugixml for JUnit, neither
  # libnftables nor libcap (diag-connect's firewall reader and agent).
  needed=$(readelf -d "$BIN/rdma_smoke" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')
  if grep -Eq 'lib(nftables|cap|ssl|mpi|microhttpd)\.' <<< "$needed"; then
    fail "rdma_smoke links $needed"
  fi
  note "rping: $(readelf -d "$BIN/rping" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')"
}

# The package installs the tools as rdmakit-<tool>: every message names the program as
# invoked, and a hint names the sibling under the same prefix (rdmakit-diag-bind), never the
# stock program a host with rdmacm-utils has under the plain name. Skipped with a device (the
# no-device hint is the one checked).
# ctest: nodevice skip_77
case_renamed_tool() {
  require_no_device
  cp "$BIN/rping" "$T/rdmakit-rping"
  run bad 20 "$T/rdmakit-rping" -c -a 1.2.3.4 --bogus
  expect_rc 2 "rdmakit-rping --bogus"
  expect_grep "^rdmakit-rping: .*(see 'rdmakit-rping --help')$" bad.err
  run help 20 "$T/rdmakit-rping" --help
  expect_rc 0 "rdmakit-rping --help"
  expect_grep "^Usage: rdmakit-rping " help.out
  run version 20 "$T/rdmakit-rping" --version
  expect_grep "^rdmakit-rping (rdmakit)" version.out
  run nodevice 20 "$T/rdmakit-rping" -c -a 10.0.0.1 --json
  expect_rc 77 "rdmakit-rping without a device"
  expect_grep "^rdmakit-rping: hint: .*'rdmakit-diag-bind" nodevice.err
  expect_jq '.tool == "rping" and (.errors[0].hint | contains("rdmakit-diag-bind"))' nodevice.out
  if grep -q "[^-]diag-bind\|'diag-bind" "$T/nodevice.err"; then fail "a hint names diag-bind without the prefix"; fi
  note "$(grep hint "$T/nodevice.err")"
  # --diagnose runs the diag-bind beside the program, under its prefix; here there is none.
  run lone 20 "$T/rdmakit-rping" -c -a 10.0.0.1 --diagnose
  expect_rc 77 "rdmakit-rping --diagnose without its diag-bind"
  expect_grep "^diagnosis failed: --diagnose runs $T/rdmakit-diag-bind, which could not start: " lone.err
  note "$(grep '^diagnosis failed' "$T/lone.err")"
  # A report's own words too: rdma_mesh's culprit says what to run next, in the text and the JSON.
  if [[ -x $BIN/rdma_mesh ]]; then
    cp "$BIN/rdma_mesh" "$T/rdmakit-rdma_mesh"
    local sample=$here/../../tests/schema/samples/rdma_mesh-netdev-without-rdma.json
    run culprit 20 "$T/rdmakit-rdma_mesh" --analyse "$sample"
    expect_grep "^  next: run rdmakit-diag-bind on rxevm" culprit.out
    run culprit_json 20 "$T/rdmakit-rdma_mesh" --analyse "$sample" --json
    expect_jq '.tool == "rdma_mesh" and (.summary.bw.culprits[0].next | startswith("run rdmakit-diag-bind on rxevm"))' \
      culprit_json.out
    note "$(grep next: "$T/culprit.out" | head -1)"
  fi
}

# A host without RDMA: diag-bind, diag-connect and a tool's --diagnose give one verdict, the
# host's (diag-connect asks diag-bind's questions first). Skipped with a device.
# ctest: nodevice skip_77
case_one_verdict_per_host() {
  require_no_device
  local address=192.0.2.77 causes
  run bind 20 "$BIN/diag-bind" "$address" --json
  run connect 20 "$BIN/diag-connect" "$address" --no-agent --timeout 2 --json
  run rping 20 "$BIN/rping" -c -a "$address" --diagnose --json
  expect_rc 77 "rping --diagnose without a device"
  causes=$(jq -r '.verdict.cause' "$T/bind.out")/$(jq -r '.verdict.cause' "$T/connect.out")/$(jq -r '.diagnosis.verdict.cause' "$T/rping.out")
  local first=${causes%%/*}
  [[ $first == no_rdma* && $causes == "$first/$first/$first" ]] || fail "three verdicts for one host: $causes"
  expect_jq '.verdict.fix_host == (if .verdict.fix == "" then "" else "client" end)' connect.out
  note "diag-bind, diag-connect, rping --diagnose: $causes"
}

# What only the device can refuse: a device name, a GID index, the device's limits. All are
# checked before connecting (an unknown -d even before the address resolves), so nobody
# needs to listen on the port.
# ctest: integration quick
case_all_tools_device_limits() {
  require_device
  next_port
  local dev=${RXE_DEV:-[[:alnum:]_]+}
  expect_usage_errors << ROWS
2 | send_bw | $RXE_ADDR -p $PORT -d nosuchdev0                | no RDMA device nosuchdev0 \(present: ([^)]*, )?${dev}[,)]
2 | send_bw | $RXE_ADDR -p $PORT -d nosuchdev0 --json         | no RDMA device nosuchdev0 \(present: ([^)]*, )?${dev}[,)]
2 | send_bw | --bind $RXE_ADDR -p $PORT -d nosuchdev0         | no RDMA device nosuchdev0 \(present: ([^)]*, )?${dev}[,)]
2 | send_bw | $RXE_ADDR -p $PORT -x 999                        | GID index 999 (is outside|of) ${dev} port 1
2 | send_bw | $RXE_ADDR -p $PORT -x 999 --json                 | GID index 999 (is outside|of) ${dev} port 1
2 | send_bw | $RXE_ADDR -p $PORT -t 65536                      | completion queue entries|maximum queue depth
2 | udaddy  | -s $RXE_ADDR --port $PORT -S 9000 --json         | larger than the active MTU
ROWS
}
