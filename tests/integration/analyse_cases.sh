# rdma_mesh --analyse: saved reports judged again, on the build host (label nodevice): no
# MPI and no device. The synthetic meshes come from tests/synth's mesh_synth.

# analyse_synth NAME RANKS FAULT [mesh_synth options...]: a synthetic report and its
# topology.conf in $T/NAME.json and $T/NAME.conf.
analyse_synth() {
  local name=$1 ranks=$2 fault=$3
  shift 3
  "$TEST_BIN/mesh_synth" --ranks "$ranks" --fault "$fault" --out "$T/$name.json" --topology-out "$T/$name.conf" "$@" \
    > "$T/$name.planted" || fail "mesh_synth --fault $fault"
}

# ctest: nodevice
case_mesh_analyse() {
  local repo=$here/../.. sample
  sample=$repo/tests/schema/samples/rdma_mesh-rxe-5-ranks-outliers.json
  # A live run's report read back: same figures, now as matrices; judged again with other
  # thresholds and ClusterKit's rule.
  run same 30 "$OURS_RDMA_MESH" --analyse "$sample" --json
  expect_rc 0 "--analyse of a clean live report"
  [[ $(jq -c '.summary.bw | {median, measured, failed}' "$T/same.out") == \
    "$(jq -c '.summary.bw | {median, measured, failed}' "$sample")" ]] || fail "the figures read back differ from the saved ones"
  expect_jq '.form == "matrix" and .analysed_from != "" and (.matrices.bw.final | length) == 5' same.out
  expect_jq '.arguments.size == 4096 and .arguments.iterations == 200 and .arguments.analyse != "" and .arguments.threshold == 0.8' same.out
  expect_schema rdma_mesh same.out
  # Outliers are judged against the first pass's median (15.4 us here).
  run strict 30 "$OURS_RDMA_MESH" --analyse "$sample" --lat-threshold 1.1 --json
  expect_rc 1 "--analyse --lat-threshold 1.1"
  expect_jq '.arguments.lat_threshold == 1.1 and (.summary.lat.outliers | length) > 0' strict.out
  run ck 30 "$OURS_RDMA_MESH" --analyse "$sample" --rule clusterkit
  expect_rc 1 "--analyse --rule clusterkit"
  expect_grep 'below 0.93 x max' ck.out
  # The matrix form it wrote reads back to the same judgement.
  run again 30 "$OURS_RDMA_MESH" --analyse "$T/strict.out" --json
  expect_rc 1 "--analyse of a matrix-form report"
  [[ $(jq -c '.summary' "$T/again.out") == "$(jq -c '.summary' "$T/strict.out")" ]] ||
    fail "the matrix form judged again differs from the report it came from"

  # Planted faults at 64 ranks, 16 hosts a leaf: each named, with its topology.
  local fault expected
  for fault in node link leaf failed; do
    analyse_synth "$fault" 64 "$fault" --seed 3
    run "$fault.analysed" 60 "$OURS_RDMA_MESH" --analyse "$T/$fault.json" --topology "$T/$fault.conf" --json
    expect_rc 1 "--analyse of a mesh with a bad $fault"
    case $fault in
      node) expected="node" ;; link) expected="link" ;; leaf) expected="switch" ;; failed) expected="cause" ;;
    esac
    export KIND=$expected
    expect_jq '.summary.bw.culprits[0].kind == env.KIND' "$fault.analysed.out"
    expect_schema rdma_mesh "$fault.analysed.out"
    note "$fault: $(jq -r '.summary.bw.culprits[0] | "\(.kind) \(.name): \(.evidence)"' "$T/$fault.analysed.out")"
  done
  analyse_synth clean 64 none --seed 3
  run clean.analysed 60 "$OURS_RDMA_MESH" --analyse "$T/clean.json" --topology "$T/clean.conf" --json
  expect_rc 0 "--analyse of a clean synthetic mesh"
  expect_jq '.summary.bw.culprits == []' clean.analysed.out
  # Text: one culprit line with what to check next; the 64 x 64 matrix is not printed.
  run node.text 60 "$OURS_RDMA_MESH" --analyse "$T/node.json" --topology "$T/node.conf"
  expect_grep '^culprit: node node' node.text.out
  expect_grep '^  next: check node' node.text.out
  expect_grep 'too wide to print' node.text.out

  # A topology that does not place every host: a warning, and the run goes on.
  printf 'node0001 leafA\nnode0002 leafA\nelsewhere leafB\n' > "$T/partial.txt"
  run partial 60 "$OURS_RDMA_MESH" --analyse "$T/node.json" --topology "$T/partial.txt" --json
  expect_rc 1 "--analyse with a partial topology"
  expect_grep 'of the mesh.s 64 hosts are not in it' partial.err
  expect_jq '.warnings | any(contains("are not in it"))' partial.out
}

# Bad input to --analyse and --topology: one line naming the file, exit 2.
# ctest: nodevice
case_mesh_analyse_bad_input() {
  local repo=$here/../.. sample
  sample=$repo/tests/schema/samples/rdma_mesh-rxe-5-ranks-outliers.json
  run notmesh 30 "$OURS_RDMA_MESH" --analyse "$repo/tests/schema/samples/send_bw-usage-error.json"
  expect_rc 2 "--analyse of a send_bw report"
  expect_grep '^rdma_mesh: --analyse .*send_bw-usage-error.json: not an rdma_mesh report (its tool is send_bw)$' notmesh.err
  head -c 2000 "$sample" > "$T/truncated.json"
  run truncated 30 "$OURS_RDMA_MESH" --analyse "$T/truncated.json" --json
  expect_rc 2 "--analyse of a truncated report"
  expect_jq '.outcome == "usage_error" and (.errors[0].message | contains("not a complete JSON document at byte"))' \
    truncated.out
  run missing 30 "$OURS_RDMA_MESH" --analyse "$T/no-such.json"
  expect_rc 2 "--analyse of a missing file"
  expect_grep 'cannot read it' missing.err
  run measuring 30 "$OURS_RDMA_MESH" --analyse "$sample" -s 4096
  expect_rc 2 "--analyse with -s"
  printf 'SwitchName=spine1 Switches=leaf1\nSwitchName=leaf1 Switches=spine1\n' > "$T/loop.conf"
  run loop 30 "$OURS_RDMA_MESH" --analyse "$sample" --topology "$T/loop.conf"
  expect_rc 2 "--topology with a loop"
  [[ $(wc -l < "$T/loop.err") -eq 1 ]] || fail "expected one line for a topology loop"
  expect_grep 'loop.conf:2: ' loop.err
  printf 'SwitchName=leaf1 Nodes=node[01-04\n' > "$T/bad.conf"
  run badline 30 "$OURS_RDMA_MESH" --analyse "$sample" --topology "$T/bad.conf"
  expect_rc 2 "--topology with an unclosed bracket"
  expect_grep 'bad.conf:1: ' badline.err
  note "$(cat "$T/loop.err") / $(cat "$T/badline.err")"
}
