#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# The layering check (tools/check-layers.py) on the source tree, and proof
# that it can fail: on a copy of the tree with a core file including a graph
# header, flow code calling a public function, and a public function defined
# outside src/api/, it must report each of the three and exit 1.
# Usage: check-layers.sh SOURCE_ROOT
set -u
root=${1:-.}
python3 "$root/tools/check-layers.py" "$root" || exit 1

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/include"
cp -r "$root/src" "$tmp/src"
cp -r "$root/include/cuweave" "$tmp/include/cuweave"
printf '#include "graph/graph.hpp"\n' >> "$tmp/src/core/stream.cpp"
printf 'static cw_status bad(cw_pipeline *p) { return cw_pipeline_check(p); }\n' >> "$tmp/src/flow/model.cpp"
sed 's/^CW_API cw_status cw_stream_query(/CW_API cw_status cw_stream_query_moved(/' "$tmp/src/api/cw_stream.cpp" > "$tmp/x" &&
    mv "$tmp/x" "$tmp/src/api/cw_stream.cpp"
printf 'CW_API cw_status cw_stream_query(cw_stream *s) { return CW_SUCCESS; }\n' >> "$tmp/src/core/stream.cpp"
out=$(python3 "$root/tools/check-layers.py" "$tmp")
rc=$?
fail=0
[ $rc -eq 1 ] || { echo "FAIL: the check passed a tree with three violations (exit $rc)"; fail=1; }
for want in 'src/core/stream.cpp:.*#include "graph/graph.hpp": core/ may not use graph/' \
            'src/flow/model.cpp:.*calls the public cw_pipeline_check' \
            'src/core/stream.cpp:.*defines a public function outside src/api/' \
            'cw_stream_query (cuweave/stream.h) is defined in no src/api/ file'; do
    echo "$out" | grep -q "$want" || { echo "FAIL: the check did not report: $want"; fail=1; }
done
[ $fail -eq 0 ] && echo "PASS: the check reports a bad include, a public call and a misplaced public function"
exit $fail
