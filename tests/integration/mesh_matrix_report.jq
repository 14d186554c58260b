# jq -n --argjson n N -f mesh_matrix_report.jq: an rdma_mesh report of N ranks in the matrix
# form, for bench-plot.sh's cases: one rank a host (node0001, node0002, ... as
# tests/fixtures/topology/tree64.conf names them, but rank 255's host "stray", named by no
# topology), 1000 MiB/s with a little spread, rank 200 at half both ways, the direction 0 -> 3
# failed and 200 -> 1 an outlier.
def figure($s; $d):
  if $s == $d or ($s == 0 and $d == 3) then null
  elif $s == 200 or $d == 200 then 500
  else 1000 + (($s * 7 + $d * 13) % 50) end;
def host($r): if $r == 255 then "stray" else "node" + ("000\($r + 1)" | .[-4:]) end;
{
  tool: "rdma_mesh", form: "matrix", ranks: $n, tests: ["bw"], finished: true,
  nodes: [range($n) | {rank: ., host: host(.)}],
  matrices: {bw: {
    unit: "MiB/s",
    first: [range($n) as $s | [range($n) as $d | figure($s; $d)]],
    final: [range($n) as $s | [range($n) as $d | figure($s; $d)]],
    failures: [{source: 0, destination: 3, cause: null, message: "timed out"}]
  }},
  summary: {bw: {
    unit: "MiB/s", figure: "average bandwidth", median: 1025, threshold: 0.8,
    outliers: [{source: 200, destination: 1, figure: 500, first_figure: 500, ratio: 0.49}]
  }}
}
