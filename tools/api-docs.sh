#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# The API reference, generated from the public C headers by Doxygen
# (Debian: apt-get install doxygen) with warnings as errors; HTML in OUT/html.
# The headers' comments are plain C comments (docs/api-convention.md); the
# filter makes a comment that opens at column 0 document what follows it,
# and one after a struct member or an enumerator document that.
# Usage: api-docs.sh SOURCE_ROOT OUT   (meson: ninja -C build api-docs;
# tools/test-all.sh runs it, and fails on any warning)
set -eu
root=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
command -v doxygen >/dev/null 2>&1 || { echo "api-docs: doxygen is not installed (apt-get install doxygen)"; exit 1; }
# The filter (tools/api-docs-filter.py): plain comments as documentation
# comments, each Returns: block as a list of its statuses.
printf '#!/bin/sh\nexec python3 "%s/tools/api-docs-filter.py" "$1"\n' "$root" > "$out/filter.sh"
chmod +x "$out/filter.sh"
# The main page: what each header holds (docs/api-mainpage.md).
version=$(sed -n 's/^#define CW_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' "$root/include/cuweave/version.h" | paste -sd.)
cat > "$out/Doxyfile" <<EOF2
PROJECT_NAME = cuweave
PROJECT_NUMBER = $version
PROJECT_BRIEF = "CUDA runtime with a C ABI"
INPUT = $root/docs/api-mainpage.md $root/include/cuweave
USE_MDFILE_AS_MAINPAGE = $root/docs/api-mainpage.md
FILE_PATTERNS = *.h *.md
RECURSIVE = NO
STRIP_FROM_PATH = $root/include
OUTPUT_DIRECTORY = $out
GENERATE_LATEX = NO
HAVE_DOT = NO
FILTER_PATTERNS = *.h=$out/filter.sh
EXTRACT_ALL = YES
OPTIMIZE_OUTPUT_FOR_C = YES
WARN_IF_UNDOCUMENTED = YES
WARN_AS_ERROR = FAIL_ON_WARNINGS
QUIET = YES
EOF2
doxygen "$out/Doxyfile"
echo "api-docs: $out/html/index.html ($(ls "$out/html" | wc -l) files), no warning"
