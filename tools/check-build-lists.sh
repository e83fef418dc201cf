#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Fails when the Makefile and the meson build list different library sources,
# headers, examples, tests or benchmarks (the two builds must build the same
# things). Usage: check-build-lists.sh SOURCE_ROOT
set -eu
cd "${1:-.}"
fail=0

# Words quoted in a meson list: files('a', 'b') or ['a', 'b'] after "NAME =".
meson_list() { # FILE VAR
    awk -v var="$2" '
        $0 ~ "^" var " *=" { on = 1 }
        on { line = line " " $0; if ($0 ~ /[\])]/) { on = 0 } }
        END { n = split(line, a, "'"'"'"); for (i = 2; i <= n; i += 2) print a[i] }' "$1" | sort
}
make_list() { make -s --no-print-directory print-"$1" | tr ' ' '\n' | sed '/^$/d' | sort; }

compare() { # LABEL MESON_WORDS MAKE_WORDS
    if [ "$2" != "$3" ]; then
        echo "FAIL: $1 differ between meson and the Makefile"
        echo "  meson:    $(echo $2)"
        echo "  Makefile: $(echo $3)"
        fail=1
    else
        echo "same $1: $(echo $2)"
    fi
}

compare "library sources" "$(meson_list src/meson.build cw_sources | sed 's|^|src/|')" "$(make_list LIB_SRCS)"
compare "public headers" "$(meson_list include/meson.build cw_headers | sed 's|^|include/|')" "$(make_list HEADERS)"
compare "C++ headers" "$(meson_list include/meson.build cw_cpp_headers | sed 's|^|include/|')" "$(make_list CPP_HEADERS)"
compare "C++ tests" "$(meson_list tests/meson.build cpp_tests)" "$(make_list CPP_TESTS)"
compare "C++ tests of both modes in one program" "$(meson_list tests/meson.build cpp_mode_tests)" "$(make_list CPP_MODE_TESTS)"
compare "C++ script checks" "$(meson_list tests/meson.build cpp_script_tests)" "$(make_list CPP_SCRIPT_TESTS)"
compare "GPU C++ tests" "$(meson_list tests/meson.build gpu_cpp_tests)" "$(make_list GPU_CPP_TESTS)"
compare "examples" "$(meson_list examples/meson.build cw_examples)" "$(make_list EXAMPLES)"
compare "C++ examples" "$(meson_list examples/meson.build cw_cpp_examples)" "$(make_list CPP_EXAMPLES)"
compare "CPU tests" "$(meson_list tests/meson.build cpu_tests)" "$(make_list CPU_TESTS)"
compare "static-link tests" "$(meson_list tests/meson.build static_tests)" "$(make_list STATIC_TESTS)"
compare "fake-driver tests" "$(meson_list tests/meson.build fake_tests)" "$(make_list FAKE_TESTS)"
compare "GPU tests" "$(meson_list tests/meson.build gpu_tests)" "$(make_list GPU_TESTS)"
compare "installed programs" "$(meson_list meson.build cw_programs)" "$(make_list PROGRAMS)"
compare "programs on disk and in the build" "$(ls programs/*.c | sed 's|^programs/||; s|\.c$||' | sort)" "$(make_list PROGRAMS)"
compare "FFmpeg examples" "$(meson_list examples/meson.build ffmpeg_examples)" "$(make_list FFMPEG_EXAMPLES)"
compare "FFmpeg GPU tests" "$(meson_list tests/meson.build ffmpeg_gpu_tests)" "$(make_list FFMPEG_GPU_TESTS)"
compare "FFmpeg CPU tests" "$(meson_list tests/meson.build ffmpeg_cpu_tests)" "$(make_list FFMPEG_CPU_TESTS)"
compare "FFmpeg benchmarks" "$(meson_list bench/meson.build ffmpeg_benches)" "$(make_list FFMPEG_BENCHES)"
compare "benchmarks" "$(meson_list bench/meson.build cw_benches)" "$(make_list BENCHES)"
compare "fuzz targets" "$(meson_list tests/fuzz/meson.build fuzz_targets)" "$(make_list FUZZ_TARGETS)"

# Every source file on disk is built, every example too.
on_disk=$(ls src/*/*.cpp | sort)
compare "sources on disk and in the build" "$on_disk" "$(make_list LIB_SRCS)"
compare "C examples on disk and in the build" "$(ls examples/*.c | sed 's|^examples/||; s|\.c$||' | sort)" \
    "$( (make_list EXAMPLES; make_list FFMPEG_EXAMPLES) | sort)"
compare "C++ examples on disk and in the build" "$(ls examples/*.cpp | sed 's|^examples/||; s|\.cpp$||' | sort)" \
    "$(make_list CPP_EXAMPLES)"
compare "C++ headers on disk and in the build" "$(ls include/cuweave/cuweave.hpp include/cuweave/cpp/*.hpp | sort)" \
    "$(make_list CPP_HEADERS)"
exit $fail
