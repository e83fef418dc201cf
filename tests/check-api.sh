#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# The API convention check (tools/check-api.py) on the public headers, and
# proof that it can fail: on a copy of the headers with one violation of
# each kind it checks, it must report every one and exit 1.
# Usage: check-api.sh SOURCE_ROOT
set -u
root=${1:-.}
python3 "$root/tools/check-api.py" --root="$root" || exit 1

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/include"
cp -r "$root/include/cuweave" "$tmp/include/cuweave"
h=$tmp/include/cuweave/stream.h
cat >> "$h" <<'BAD'
#ifdef CW_CHECK_API_SELF_TEST
CW_API cw_status cw_stream_undocumented(cw_stream *s);

/* Does a thing.
 */
CW_API cw_status cw_stream_no_returns(cw_stream *s);

/* Returns: CW_SUCCESS, CW_ERROR_MADE_UP. */
CW_API cw_status cw_stream_bad_status(cw_stream *s);

typedef struct cw_widget cw_widget;
/* Returns: CW_SUCCESS. */
CW_API cw_status cw_widget_destroy(cw_widget **w);
/* Returns: CW_SUCCESS. */
CW_API cw_status cw_widget_create(cw_context *ctx, cw_widget **out);
/* Returns: CW_SUCCESS. */
CW_API cw_status cw_widget_get_size(size_t *size, const cw_widget *w);
/* Returns: the name. */
CW_API const char *cw_widget_name(const cw_widget *w);
/* Returns: CW_SUCCESS. */
CW_API cw_status cw_gadget_poke(int x);
/* Returns: CW_SUCCESS. */
CW_API cw_status cw_widget_Poke(cw_widget *w);
/* Returns: CW_SUCCESS. */
CW_API cw_status cw_widget_get_addr(const cw_widget *w, unsigned long long *addr);
typedef struct cw_widget_set cw_widget_set;
typedef struct cw_widget_settings {
    int size;
    int reserved[4];
} cw_widget_settings;
#endif
BAD
out=$(python3 "$root/tools/check-api.py" --root="$tmp")
rc=$?
fail=0
[ $rc -eq 1 ] || { echo "FAIL: the check passed headers with violations (exit $rc)"; fail=1; }
for want in 'doc: cw_stream_undocumented has no comment' \
            'doc: cw_stream_no_returns: its comment has no Returns block' \
            'returns: cw_stream_bad_status: CW_ERROR_MADE_UP is not a cw_status' \
            'destroy: cw_widget_destroy returns cw_status' \
            'out-first: cw_widget_create hands out a handle' \
            'getter: cw_widget_get_size: a getter takes its object' \
            'getter: cw_widget_name returns a value' \
            'name: cw_gadget_poke: names no handle type' \
            'name: cw_widget_Poke: not lower snake case' \
            'devptr: unsigned long long' \
            'type-name: cw_widget_set: get and set are verbs' \
            'reserved: cw_widget_settings.reserved is int' \
            'settings: cw_widget_settings has no cw_widget_settings_default'; do
    echo "$out" | grep -q "$want" || { echo "FAIL: the check did not report: $want"; fail=1; }
done
[ $fail -eq 0 ] && echo "PASS: the check reports each kind of violation"
exit $fail
