# SPDX-License-Identifier: BSD-2-Clause
# cuweave: the Makefile build. It builds the same library, examples, tests and
# benchmarks as meson; tools/check-build-lists.sh fails when the lists differ.
#
#   make            library (shared + static), cuweave-info, examples, tests, benchmarks
#   make check      build and run the tests (GPU tests skip without a GPU)
#   make example    build and run the main example
#   make api-docs   the API reference from the headers (Doxygen): $(O)/api/html
#   make info       build and run cuweave-info (what cuweave finds here; programs/)
#   make install PREFIX=/usr/local DESTDIR=   (LIBDIR=$(PREFIX)/lib64 etc.: below)
#   make uninstall PREFIX=... DESTDIR=         removes what install installed
#                   (the same variables) and the directories it made, if empty
#                   (paths with whitespace or quotes are refused: meson takes them)
#   make STATIC_LIBSTDCXX=1 O=build-nostdcxx   libcuweave.so with the C++ runtime
#                   linked in: it needs no libstdc++ at run time (docs/embedding.md)
#   make fuzz CC=clang CXX=clang++ O=build-fuzz   the libFuzzer targets of
#                   tests/fuzz/ and the library built for them (ASan, UBSan,
#                   coverage): give them an output directory of their own
#                   (docs/testing.md; tools/fuzz.sh builds with meson and runs them)
#
# Output goes to $(O) (default build-make).

O ?= build-make
CC ?= cc
CXX ?= c++
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
BINDIR ?= $(PREFIX)/bin
INCLUDEDIR ?= $(PREFIX)/include
DOCDIR ?= $(PREFIX)/share/doc/cuweave
PKG_CONFIG ?= pkg-config
CUDA_INCLUDE ?= /usr/local/cuda/include
# make's word lists and the recipes' shell cannot carry a path with
# whitespace or a quote: such a DESTDIR made directories named by its pieces
# (one in the source tree) before install failed. Refused at once (meson's
# install takes them).
cw_bad_path = $(or $(word 2,$(1)x),$(findstring ',$(1)),$(findstring ",$(1)))
$(foreach v,DESTDIR PREFIX LIBDIR BINDIR INCLUDEDIR DOCDIR,$(if $(call cw_bad_path,$($(v))),\
	$(error $(v)="$($(v))": the Makefile cannot take a path with whitespace or quotes (meson install can))))

LIB_SRCS = \
	src/api/cw_buffer.cpp \
	src/api/cw_collective.cpp \
	src/api/cw_common.cpp \
	src/api/cw_context.cpp \
	src/api/cw_device.cpp \
	src/api/cw_flow.cpp \
	src/api/cw_future.cpp \
	src/api/cw_graph.cpp \
	src/api/cw_jit.cpp \
	src/api/cw_multi.cpp \
	src/api/cw_partition.cpp \
	src/api/cw_resident.cpp \
	src/api/cw_share.cpp \
	src/api/cw_stream.cpp \
	src/api/cw_trace.cpp \
	src/base/glibc_compat.cpp \
	src/base/nvtx.cpp \
	src/core/buffer.cpp \
	src/core/buffer_cache.cpp \
	src/core/context.cpp \
	src/core/device.cpp \
	src/core/event.cpp \
	src/core/future.cpp \
	src/core/future_slab.cpp \
	src/core/future_watch.cpp \
	src/core/idle.cpp \
	src/core/partition.cpp \
	src/core/pool.cpp \
	src/core/registry.cpp \
	src/core/share.cpp \
	src/core/share_block.cpp \
	src/core/stream.cpp \
	src/core/trace.cpp \
	src/core/trace_cupti.cpp \
	src/driver/cupti.cpp \
	src/driver/driver.cpp \
	src/driver/error.cpp \
	src/driver/nvrtc.cpp \
	src/flow/executor.cpp \
	src/flow/fused_pipeline.cpp \
	src/flow/fused_stage.cpp \
	src/flow/io.cpp \
	src/flow/memory.cpp \
	src/flow/model.cpp \
	src/flow/pipeline_trace.cpp \
	src/flow/resident_pipeline.cpp \
	src/graph/capture.cpp \
	src/graph/exec.cpp \
	src/graph/graph.cpp \
	src/graph/resident_build.cpp \
	src/graph/resident_fused.cpp \
	src/graph/resident_dataflow.cpp \
	src/graph/resident_loop.cpp \
	src/graph/resident_timeline.cpp \
	src/graph/resident_trace.cpp \
	src/jit/cache.cpp \
	src/jit/disk.cpp \
	src/jit/program.cpp \
	src/jit/sha256.cpp \
	src/kernel/clock.cpp \
	src/kernel/launch.cpp \
	src/kernel/module.cpp \
	src/multi/bootstrap.cpp \
	src/multi/bootstrap_msg.cpp \
	src/multi/collective.cpp \
	src/multi/device_group.cpp \
	src/multi/peer.cpp \
	src/testing/hooks.cpp \
	src/testing/pipeline_hooks.cpp \
	src/testing/seam.cpp

HEADERS = \
	include/cuweave/buffer.h \
	include/cuweave/collective.h \
	include/cuweave/common.h \
	include/cuweave/context.h \
	include/cuweave/cuweave.h \
	include/cuweave/device.h \
	include/cuweave/flow.h \
	include/cuweave/future.h \
	include/cuweave/graph.h \
	include/cuweave/jit.h \
	include/cuweave/multi.h \
	include/cuweave/partition.h \
	include/cuweave/resident.h \
	include/cuweave/resident_device.h \
	include/cuweave/share.h \
	include/cuweave/stream.h \
	include/cuweave/trace.h \
	include/cuweave/version.h

# The C++ wrappers: cuweave.hpp includes the cpp/ ones (one per C header).
CPP_HEADERS = \
	include/cuweave/cuweave.hpp \
	include/cuweave/cpp/buffer.hpp \
	include/cuweave/cpp/collective.hpp \
	include/cuweave/cpp/context.hpp \
	include/cuweave/cpp/core.hpp \
	include/cuweave/cpp/device.hpp \
	include/cuweave/cpp/flow.hpp \
	include/cuweave/cpp/future.hpp \
	include/cuweave/cpp/graph.hpp \
	include/cuweave/cpp/jit.hpp \
	include/cuweave/cpp/multi.hpp \
	include/cuweave/cpp/partition.hpp \
	include/cuweave/cpp/resident.hpp \
	include/cuweave/cpp/share.hpp \
	include/cuweave/cpp/trace.hpp \
	include/cuweave/cpp/stream.hpp

EXAMPLES = devices diamond diamond_resident embed first forkjoin green graph guide_graph guide_pipeline guide_resident guide_streams kernels multi_gpu multi_process pipeline_fused resident resident_fused resident_handler video_pipeline
CPP_EXAMPLES = diamond_cpp fused_cpp resident_cpp
CPU_TESTS = test_api test_nodriver
STATIC_TESTS = test_static
FAKE_TESTS = test_stream_cpu test_future_cpu test_jit_cpu test_resident_cpu test_resident_fused_cpu test_flow_cpu test_multi_cpu test_handles_cpu test_model_cpu test_graph_jit_cpu test_share_cpu test_comm_rank_cpu test_trace_cpu test_fused_model_cpu test_resident_dataflow_cpu test_pipeline_fused_cpu test_frame_cost_cpu test_nvtx_cpu
CPP_TESTS = test_cpp
CPP_MODE_TESTS = test_cpp_modes
# Checks of the C++ wrappers run as scripts: sh tests/NAME.sh SOURCE_ROOT LIBCUWEAVE_SO.
CPP_SCRIPT_TESTS = check-cpp-coverage
GPU_CPP_TESTS = test_gpu_cpp
GPU_TESTS = test_gpu_device test_gpu_context test_gpu_stream test_gpu_future test_gpu_fault test_gpu_green test_gpu_graph test_gpu_jit test_gpu_resident test_gpu_resident_fused test_gpu_resident_dataflow test_gpu_pipeline_fused test_gpu_embed test_gpu_stress test_gpu_flow test_gpu_sweep test_gpu_multi test_gpu_churn test_gpu_share test_gpu_comm_rank test_gpu_trace
FUZZ_TARGETS = fuzz_cache_file fuzz_options fuzz_env fuzz_settings fuzz_comm_hello fuzz_comm_id fuzz_comm_file fuzz_share_handle
# Installed programs (bin/): what cuweave finds on this machine (docs/cuweave-info.md).
PROGRAMS = cuweave-info
# Built when pkg-config finds FFmpeg's development packages (libavformat,
# libavcodec, libavutil): the example, the GPU test and the benchmark of
# cuweave inside FFmpeg (docs/embedding.md, "Inside FFmpeg").
FFMPEG_EXAMPLES = ffmpeg_decode
FFMPEG_GPU_TESTS = test_gpu_ffmpeg
FFMPEG_CPU_TESTS = test_ffmpeg_cpu
FFMPEG_BENCHES = bench_ffmpeg
BENCHES = bench_streams bench_completion bench_green bench_graph bench_jit bench_jit_cache bench_resident bench_resident_fused bench_resident_frame bench_vmaf bench_pipeline bench_pipeline_wide bench_multi bench_share bench_comm_rank bench_trace bench_nvtx

vnum = $(shell sed -n 's/^\#define $(1) \([0-9]*\).*/\1/p' include/cuweave/version.h)
VERSION := $(call vnum,CW_VERSION_MAJOR).$(call vnum,CW_VERSION_MINOR).$(call vnum,CW_VERSION_PATCH)
SOMAJOR := $(call vnum,CW_API_VERSION_MAJOR)
SOVERSION := $(SOMAJOR).$(call vnum,CW_API_VERSION_MINOR).$(call vnum,CW_API_VERSION_PATCH)
SONAME := libcuweave.so.$(SOMAJOR)

WARN = -Wall -Wextra -Wno-unused-parameter
LIB_WARN = -Wno-format-truncation
# NVTX ranges for Nsight Systems (src/base/nvtx.hpp, docs/tracing.md): NVTX3
# is header-only; tools/find-nvtx.sh finds its headers (NVTX_INCLUDE=DIR, the
# CUDA toolkit's, the nvidia-nvtx wheel's), as meson does. NVTX=no compiles
# the ranges out, NVTX=yes fails without the headers. No link dependency.
NVTX ?= auto
NVTX_INCLUDE ?=
ifeq ($(NVTX),no)
NVTX_DIR :=
NVTX_ORIGIN = off (NVTX=no)
else
NVTX_DIR := $(shell sh tools/find-nvtx.sh '$(NVTX_INCLUDE)' '$(CUDA_INCLUDE)')
NVTX_ORIGIN = $(if $(NVTX_DIR),on: $(shell sh tools/find-nvtx.sh --origin '$(NVTX_INCLUDE)' '$(CUDA_INCLUDE)'),off: no NVTX3 headers found (CUDA toolkit, pip install nvidia-nvtx, or NVTX_INCLUDE=DIR))
ifneq ($(NVTX_INCLUDE),)
$(if $(NVTX_DIR),,$(error NVTX_INCLUDE=$(NVTX_INCLUDE) holds no nvtx3/nvToolsExt.h))
endif
ifeq ($(NVTX),yes)
$(if $(NVTX_DIR),,$(error NVTX=yes: no NVTX3 headers found (the CUDA toolkit's, the nvidia-nvtx wheel's: pip install nvidia-nvtx; or NVTX_INCLUDE=DIR)))
endif
endif
NVTX_CPPFLAGS = $(if $(NVTX_DIR),-DCW_NVTX_HEADER='"$(NVTX_DIR)/nvtx3/nvToolsExt.h"')
CPPFLAGS_LIB = -Iinclude -Isrc -DCW_BUILDING_LIBRARY $(if $(DEBUG_ABORT),-DCW_DEBUG_ABORT) $(NVTX_CPPFLAGS)
CXXFLAGS ?= -O2 -g
CFLAGS ?= -O2 -g
LIB_CXXFLAGS = -std=c++17 -fPIC -fvisibility=hidden -fno-exceptions -fno-rtti \
	-Werror=missing-declarations $(WARN) $(LIB_WARN) $(CXXFLAGS)
LIBS_PRIVATE = -ldl -lpthread
# What a program linking libcuweave.a needs (cuweave.pc's Libs.private).
LIBS_STATIC = -ldl -lpthread -lstdc++ -lm
LIB_LDFLAGS = $(if $(filter 1,$(STATIC_LIBSTDCXX)),-static-libstdc++ -static-libgcc)
CMOCKA_CFLAGS = $(shell $(PKG_CONFIG) --cflags cmocka 2>/dev/null)
CMOCKA_LIBS = $(shell $(PKG_CONFIG) --libs cmocka 2>/dev/null || echo -lcmocka)
FFMPEG_PC = libavformat libavcodec libavutil
HAVE_FFMPEG := $(shell $(PKG_CONFIG) --exists $(FFMPEG_PC) 2>/dev/null && echo yes)
FFMPEG_CFLAGS = $(shell $(PKG_CONFIG) --cflags $(FFMPEG_PC) 2>/dev/null) -DFCW_DATA_DIR='"$(abspath tests/data)"'
FFMPEG_LIBS = $(shell $(PKG_CONFIG) --libs $(FFMPEG_PC) 2>/dev/null)

OBJS = $(LIB_SRCS:%.cpp=$(O)/%.o) $(O)/src/builtin_image.o

# The library's own kernels (ptx/README.md): a fatbin made by nvcc when there
# is one (BUILTIN=ptx forces the checked-in PTX), embedded by tools/embed.py.
NVCC ?= $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
ifeq ($(if $(filter ptx,$(BUILTIN)),,$(NVCC)),)
BUILTIN_IMAGE = ptx/cuweave_kernels.ptx
BUILTIN_ORIGIN = ptx compute_80 (checked in)
else
BUILTIN_IMAGE = $(O)/ptx/cuweave_kernels.fatbin
BUILTIN_ORIGIN = cubin sm_80 sm_90 + ptx compute_80 compute_90 (nvcc at build time)
endif
# make fuzz: the library and the targets with the sanitizers and libFuzzer's
# coverage (clang only).
ifneq ($(filter fuzz,$(MAKECMDGOALS)),)
FUZZ_FLAGS = -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
LIB_CXXFLAGS += $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -Wno-unknown-warning-option
endif
SHARED = $(O)/$(SONAME)
STATIC = $(O)/libcuweave.a
PACKAGE_FILES = $(O)/cuweave.pc $(O)/cuweaveConfig.cmake $(O)/cuweaveConfigVersion.cmake
HAVE_CUDA_H := $(shell test -f $(CUDA_INCLUDE)/cuda.h && echo yes)

HAVE_DOXYGEN := $(shell command -v doxygen 2>/dev/null)
all: lib programs examples tests benches headers $(if $(HAVE_DOXYGEN),api-docs)
lib: $(SHARED) $(STATIC) $(PACKAGE_FILES)
programs: $(PROGRAMS:%=$(O)/%)
examples: $(EXAMPLES:%=$(O)/examples/%) $(CPP_EXAMPLES:%=$(O)/examples/%) $(O)/examples/devices-static \
	$(if $(HAVE_FFMPEG),$(FFMPEG_EXAMPLES:%=$(O)/examples/%))
tests: $(GPU_CPP_TESTS:%=$(O)/tests/%) $(CPU_TESTS:%=$(O)/tests/%) $(STATIC_TESTS:%=$(O)/tests/%) $(FAKE_TESTS:%=$(O)/tests/%) $(CPP_TESTS:%=$(O)/tests/%) $(CPP_TESTS:%=$(O)/tests/%_noexcept) $(CPP_MODE_TESTS:%=$(O)/tests/%) $(O)/tests/libfakecuda.so $(O)/tests/libfakenvrtc.so $(O)/tests/libfakecupti.so $(O)/tests/libfakenccl.so $(O)/tests/libfakenccl_old.so $(if $(NVTX_DIR),$(O)/tests/libnvtxinject.so) $(GPU_TESTS:%=$(O)/tests/%) $(if $(HAVE_CUDA_H),$(O)/tests/cuda_abi) \
	$(if $(HAVE_FFMPEG),$(FFMPEG_GPU_TESTS:%=$(O)/tests/%) $(FFMPEG_CPU_TESTS:%=$(O)/tests/%))
benches: $(BENCHES:%=$(O)/bench/%) $(if $(HAVE_FFMPEG),$(FFMPEG_BENCHES:%=$(O)/bench/%))

$(O)/src/%.o: src/%.cpp $(wildcard src/*/*.hpp src/*/*.h) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS_LIB) $(LIB_CXXFLAGS) -MMD -MP -c $< -o $@

# The build says whether the NVTX ranges are in (meson's summary says it too).
$(O)/src/base/nvtx.o: src/base/nvtx.cpp src/base/nvtx.hpp
	@mkdir -p $(dir $@)
	@echo "nvtx ranges: $(NVTX_ORIGIN)"
	$(CXX) $(CPPFLAGS_LIB) $(LIB_CXXFLAGS) -MMD -MP -c $< -o $@

$(O)/ptx/cuweave_kernels.fatbin: ptx/cuweave_kernels.cu src/graph/resident_abi.h include/cuweave/resident_device.h
	@mkdir -p $(dir $@)
	$(NVCC) -fatbin -O3 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
		-gencode arch=compute_80,code=compute_80 -gencode arch=compute_90,code=compute_90 -o $@ $<

$(O)/src/builtin_image.cpp: $(BUILTIN_IMAGE) tools/embed.py include/cuweave/resident_device.h src/graph/resident_abi.h \
		src/graph/fused_dataflow.h
	@mkdir -p $(dir $@)
	python3 tools/embed.py $(BUILTIN_IMAGE) "$(BUILTIN_ORIGIN)" $@ include/cuweave/resident_device.h \
		src/graph/resident_abi.h src/graph/fused_dataflow.h

$(O)/src/builtin_image.o: $(O)/src/builtin_image.cpp
	$(CXX) $(CPPFLAGS_LIB) $(LIB_CXXFLAGS) -c $< -o $@

$(SHARED): $(OBJS) src/cuweave.map
	$(CXX) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=src/cuweave.map -Wl,--no-undefined \
		$(LIB_LDFLAGS) $(LDFLAGS) -o $(O)/libcuweave.so.$(SOVERSION) $(OBJS) $(LIBS_PRIVATE)
	ln -sf libcuweave.so.$(SOVERSION) $@
	ln -sf $(SONAME) $(O)/libcuweave.so

$(STATIC): $(OBJS)
	rm -f $@
	$(AR) rcs $@ $(OBJS)

# cuweave.pc and the CMake package (cuweaveConfig.cmake, cuweaveConfigVersion.cmake):
# the templates src/cuweave.pc.in and src/cuweaveConfig*.cmake.in, written by
# tools/gen-package-files.sh as meson does; relocatable. Regenerated on every
# run: they carry PREFIX, LIBDIR and INCLUDEDIR, which install may change.
$(O)/cuweave.pc: FORCE
	@mkdir -p $(O)
	sh tools/gen-package-files.sh . $(O) $(PREFIX) $(LIBDIR) $(INCLUDEDIR)
$(O)/cuweaveConfig.cmake $(O)/cuweaveConfigVersion.cmake: $(O)/cuweave.pc

# The installed programs' rpath: LIBDIR as seen from BINDIR ($$ORIGIN/../lib64
# for LIBDIR=$(PREFIX)/lib64); the stamp changes, and the programs are linked
# again, when that does.
BIN_TO_LIB = $(shell realpath -m --relative-to=$(BINDIR) $(LIBDIR))
$(O)/.rpath: FORCE
	@mkdir -p $(O)
	@echo '$(BIN_TO_LIB)' | cmp -s - $@ || echo '$(BIN_TO_LIB)' > $@

# Installed programs: the library beside them in $(O), in LIBDIR once installed.
$(PROGRAMS:%=$(O)/%): $(O)/%: programs/%.c $(SHARED) $(HEADERS) $(O)/.rpath
	$(CC) -std=c11 $(WARN) $(CFLAGS) -Iinclude $< -o $@ -L$(O) -l:$(SONAME) -ldl \
		-Wl,-rpath,'$$ORIGIN:$$ORIGIN/$(BIN_TO_LIB)'

# Programs linking the shared library.
$(O)/examples/%: examples/%.c examples/video_filter.h $(SHARED) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(WARN) $(CFLAGS) -Iinclude $< -o $@ -L$(O) -l:$(SONAME) -Wl,-rpath,'$$ORIGIN/..'

# The FFmpeg example: the shared library and FFmpeg's.
$(FFMPEG_EXAMPLES:%=$(O)/examples/%): $(O)/examples/%: examples/%.c examples/ffmpeg_cuweave.h $(SHARED) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(WARN) $(CFLAGS) -Iinclude $(FFMPEG_CFLAGS) $< -o $@ -L$(O) -l:$(SONAME) -Wl,-rpath,'$$ORIGIN/..' \
		$(FFMPEG_LIBS) -ldl

# C++ programs (cuweave.hpp) linking the shared library.
$(CPP_EXAMPLES:%=$(O)/examples/%): $(O)/examples/%: examples/%.cpp $(CPP_HEADERS) $(SHARED) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 $(WARN) $(CXXFLAGS) -Iinclude $< -o $@ -L$(O) -l:$(SONAME) -Wl,-rpath,'$$ORIGIN/..'

# The main example linked with libcuweave.a, as a firmware-style program.
$(O)/examples/devices-static: examples/devices.c $(STATIC) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CXX) -x c -std=c11 $(WARN) $(CFLAGS) -Iinclude $< -x none -o $@ $(STATIC) \
		-static-libstdc++ -static-libgcc $(LIBS_PRIVATE)

$(O)/tests/test_api $(O)/tests/test_nodriver: $(O)/tests/%: tests/%.c tests/cwtest.h $(SHARED) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(WARN) $(CFLAGS) -Iinclude $(CMOCKA_CFLAGS) $< -o $@ -L$(O) -l:$(SONAME) \
		-Wl,-rpath,'$$ORIGIN/..' $(CMOCKA_LIBS) -lpthread

# libcuweave.a linked by the C compiler with only cuweave.pc's Libs.private
# (tests/check-static.sh checks what the program links).
$(STATIC_TESTS:%=$(O)/tests/%): $(O)/tests/%: tests/%.c tests/cwtest.h $(STATIC) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(WARN) $(CFLAGS) -Iinclude $(CMOCKA_CFLAGS) $< -o $@ $(STATIC) $(CMOCKA_LIBS) $(LIBS_STATIC)

# The C++ wrappers' tests, with exceptions and without.
$(CPP_TESTS:%=$(O)/tests/%) $(GPU_CPP_TESTS:%=$(O)/tests/%): $(O)/tests/%: tests/%.cpp $(CPP_HEADERS) $(SHARED) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 $(WARN) $(CXXFLAGS) -Iinclude $(CMOCKA_CFLAGS) $< -o $@ -L$(O) -l:$(SONAME) \
		-Wl,-rpath,'$$ORIGIN/..' $(CMOCKA_LIBS) -ldl -lpthread
$(CPP_TESTS:%=$(O)/tests/%_noexcept): $(O)/tests/%_noexcept: tests/%.cpp $(CPP_HEADERS) $(SHARED) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -fno-exceptions $(WARN) $(CXXFLAGS) -Iinclude $(CMOCKA_CFLAGS) $< -o $@ -L$(O) \
		-l:$(SONAME) -Wl,-rpath,'$$ORIGIN/..' $(CMOCKA_LIBS) -ldl -lpthread

# Both modes in one program: T.cpp with exceptions, T_noexcept.cpp without,
# linked together; -fno-inline so that every call goes through the
# definition the linker keeps.
$(CPP_MODE_TESTS:%=$(O)/tests/%): $(O)/tests/%: tests/%.cpp tests/%_noexcept.cpp tests/%.h $(CPP_HEADERS) $(SHARED) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -fno-exceptions $(WARN) $(CXXFLAGS) -fno-inline -Iinclude -c tests/$*_noexcept.cpp -o $@_noexcept.o
	$(CXX) -std=c++17 $(WARN) $(CXXFLAGS) -fno-inline -Iinclude $(CMOCKA_CFLAGS) tests/$*.cpp $@_noexcept.o -o $@ \
		-L$(O) -l:$(SONAME) -Wl,-rpath,'$$ORIGIN/..' $(CMOCKA_LIBS) -ldl -lpthread

# The fake driver, the fake NVRTC and the fake NCCL for the CPU tests.
$(O)/tests/libfakecuda.so: tests/fake_cuda.c
	@mkdir -p $(dir $@)
	$(CC) -shared -fPIC -std=c11 $(WARN) $(CFLAGS) $< -o $@ -lpthread
$(O)/tests/libfakenvrtc.so: tests/fake_nvrtc.c
	@mkdir -p $(dir $@)
	$(CC) -shared -fPIC -std=c11 $(WARN) $(CFLAGS) $< -o $@ -lpthread
$(O)/tests/libfakecupti.so: tests/fake_cupti.c src/driver/cupti_min.h src/driver/cuda_min.h
	@mkdir -p $(dir $@)
	$(CC) -shared -fPIC -std=c11 $(WARN) $(CFLAGS) -Isrc $< -o $@ -ldl -lpthread
$(O)/tests/libfakenccl.so: tests/fake_nccl.c
	@mkdir -p $(dir $@)
	$(CC) -shared -fPIC -std=c11 $(WARN) $(CFLAGS) $< -o $@ -lpthread
# An NVTX tool of the tests' own, where NVTX3's headers are (test_nvtx_cpu
# finds it beside the fake driver and names it in NVTX_INJECTION64_PATH).
$(O)/tests/libnvtxinject.so: tests/nvtx_inject.c
	@mkdir -p $(dir $@)
	$(CC) -shared -fPIC -fvisibility=hidden -std=c11 $(WARN) $(CFLAGS) $(NVTX_CPPFLAGS) $< -o $@ -lpthread
$(O)/tests/libfakenccl_old.so: tests/fake_nccl.c
	@mkdir -p $(dir $@)
	$(CC) -shared -fPIC -std=c11 $(WARN) $(CFLAGS) -DFAKE_NCCL_OLD $< -o $@ -lpthread

# GPU tests and fake-driver tests link libcuweave.a: they use the internal
# test seam (src/testing/seam.h).
$(FAKE_TESTS:%=$(O)/tests/%) $(GPU_TESTS:%=$(O)/tests/%): $(O)/tests/%: tests/%.c tests/cwtest.h tests/fakelive.h tests/dataflow_stages.h tests/rawcuda.h tests/kernels/test_kernels_fatbin.h examples/video_filter.h $(STATIC) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(WARN) $(CFLAGS) -Iinclude -Isrc -Itests $(CMOCKA_CFLAGS) -c $< -o $@.o
	$(CXX) $@.o -o $@ $(STATIC) $(CMOCKA_LIBS) $(LIBS_PRIVATE)

# The FFmpeg tests: libcuweave.a, CMocka and FFmpeg's libraries.
$(FFMPEG_GPU_TESTS:%=$(O)/tests/%) $(FFMPEG_CPU_TESTS:%=$(O)/tests/%): $(O)/tests/%: tests/%.c tests/cwtest.h examples/ffmpeg_cuweave.h $(STATIC) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(WARN) $(CFLAGS) -Iinclude -Isrc -Itests -Iexamples $(CMOCKA_CFLAGS) $(FFMPEG_CFLAGS) -c $< -o $@.o
	$(CXX) $@.o -o $@ $(STATIC) $(CMOCKA_LIBS) $(FFMPEG_LIBS) $(LIBS_PRIVATE)

# The libFuzzer targets (make fuzz, above), the seed corpora's maker, and the
# fakes next to them.
fuzz: $(FUZZ_TARGETS:%=$(O)/tests/%) $(O)/tests/make_seeds $(O)/tests/libfakecuda.so $(O)/tests/libfakenvrtc.so
$(FUZZ_TARGETS:%=$(O)/tests/%): $(O)/tests/%: tests/fuzz/%.c $(STATIC) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(WARN) $(CFLAGS) $(FUZZ_FLAGS) -fsanitize=fuzzer -Iinclude -Isrc -c $< -o $@.o
	$(CXX) $(FUZZ_FLAGS) -fsanitize=fuzzer $@.o -o $@ $(STATIC) $(LIBS_PRIVATE)
$(O)/tests/make_seeds: tests/fuzz/make_seeds.c $(STATIC) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(WARN) $(CFLAGS) $(FUZZ_FLAGS) -Iinclude -c $< -o $@.o
	$(CXX) $(FUZZ_FLAGS) $@.o -o $@ $(STATIC) $(LIBS_PRIVATE)

$(O)/tests/cuda_abi: tests/cuda_abi.cpp src/driver/cuda_min.h src/driver/cupti_min.h
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -Wall -Werror -I$(CUDA_INCLUDE) -I$(CUDA_INCLUDE)/../extras/CUPTI/include -Isrc -Iinclude $< -o $@

$(FFMPEG_BENCHES:%=$(O)/bench/%): $(O)/bench/%: bench/%.c bench/bench_common.h examples/ffmpeg_cuweave.h $(STATIC) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(WARN) $(CFLAGS) -Iinclude -Isrc -Iexamples $(FFMPEG_CFLAGS) -c $< -o $@.o
	$(CXX) $@.o -o $@ $(STATIC) $(FFMPEG_LIBS) $(LIBS_PRIVATE) -lm

$(O)/bench/%: bench/%.c bench/bench_common.h $(STATIC) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(WARN) $(CFLAGS) -Iinclude -Isrc -c $< -o $@.o
	$(CXX) $@.o -o $@ $(STATIC) $(LIBS_PRIVATE) -lm

# Every public header compiles alone as C11 and as C++17 without warnings;
# every C++ header (cuweave.hpp and each cpp/*.hpp) alone, with and without
# exceptions.
headers: $(HEADERS) $(CPP_HEADERS)
	@set -e; for h in $(HEADERS:include/%=%); do \
		printf '#include "%s"\nint cw_header_check(void);\n' $$h | $(CC) -std=c11 -Wall -Wextra -pedantic -Werror -Iinclude -x c -fsyntax-only - ; \
		printf '#include "%s"\nint cw_header_check(void);\n' $$h | $(CXX) -std=c++17 -Wall -Wextra -pedantic -Werror -Iinclude -x c++ -fsyntax-only - ; \
	done
	@set -e; for h in $(CPP_HEADERS:include/%=%); do \
		printf '#include "%s"\nint cw_header_check(void);\n' $$h | $(CXX) -std=c++17 -Wall -Wextra -pedantic -Werror -Iinclude -x c++ -fsyntax-only - ; \
		printf '#include "%s"\nint cw_header_check(void);\n' $$h | $(CXX) -std=c++17 -fno-exceptions -Wall -Wextra -pedantic -Werror -Iinclude -x c++ -fsyntax-only - ; \
	done
	$(if $(HAVE_CUDA_H),$(CC) -std=c11 -Wall -Wextra -Werror -Iinclude -I$(CUDA_INCLUDE) -fsyntax-only tests/header_with_cuda.c)
	@echo "headers: every public header compiles alone as C11 and C++17, every C++ header with and without exceptions"

check: all
	sh tools/run-tests.sh make \
		$(CPU_TESTS:%=$(O)/tests/%) $(STATIC_TESTS:%=$(O)/tests/%) $(if $(HAVE_CUDA_H),$(O)/tests/cuda_abi) \
		$(foreach t,$(FAKE_TESTS) $(CPP_TESTS) $(CPP_TESTS:%=%_noexcept) $(CPP_MODE_TESTS),"$(O)/tests/$(t) $(O)/tests/libfakecuda.so") \
		"sh tests/check-exports.sh $(SHARED) $(O)/examples/devices-static tests/test_nodriver.c" \
		$(foreach t,$(STATIC_TESTS),"sh tests/check-static.sh $(O)/tests/$(t)") \
		$(if $(filter 1,$(STATIC_LIBSTDCXX)),"sh tests/check-no-libstdcxx.sh $(SHARED)") \
		$(foreach t,$(CPP_SCRIPT_TESTS),"sh tests/$(t).sh . $(SHARED)") \
		"sh tools/check-build-lists.sh ." \
		"env BENCH_DIR=$(O)/bench sh tests/check-tools.sh ." \
		"python3 tools/doc-commands.py . lint" \
		"sh tests/check-cuweave-info.sh $(O)/cuweave-info $(O)/tests/libfakecuda.so ." \
		"sh tools/check-spdx.sh . $(O)/cuweave.pc" \
		"sh tests/check-layers.sh ." \
		"sh tests/check-api.sh ." \
		"sh tools/check-ptx.sh" \
		"sh tests/check-trace-plot.sh . $(O)/tests/test_trace_cpu $(O)/tests/libfakecuda.so" \
		"sh tests/expect-exit.sh 77 env CUWEAVE_LIBCUDA=/nonexistent/libcuda.so.1 $(O)/examples/devices-static" \
		"env FAKE_CUDA_DEVICES=2 CUWEAVE_LIBCUDA=$(abspath $(O))/tests/libfakecuda.so CUWEAVE_LIBNCCL=$(abspath $(O))/tests/libfakenccl.so $(O)/examples/multi_process" \
		$(GPU_TESTS:%=$(O)/tests/%) $(GPU_CPP_TESTS:%=$(O)/tests/%) \
		$(if $(HAVE_FFMPEG),$(foreach t,$(FFMPEG_CPU_TESTS),"$(O)/tests/$(t) $(O)/tests/libfakecuda.so") $(FFMPEG_GPU_TESTS:%=$(O)/tests/%))

# The API reference from the headers (Doxygen, warnings as errors, Returns:
# blocks as lists, docs/api-mainpage.md its main page): $(O)/api/html, made
# by `make` too where doxygen is installed; make install installs it.
api-docs: $(O)/api/html/index.html
$(O)/api/html/index.html: $(HEADERS) docs/api-mainpage.md tools/api-docs.sh tools/api-docs-filter.py
	sh tools/api-docs.sh . $(O)/api

# (exit 77, no usable GPU, is not a failure of make)
example: $(O)/examples/devices
	$(O)/examples/devices || [ $$? -eq 77 ]

# What cuweave finds here; exit 77 (no usable GPU) is not a failure of make.
info: $(O)/cuweave-info
	$(O)/cuweave-info || [ $$? -eq 77 ]

# What install installs (uninstall removes the same): the library, the
# headers, cuweave.pc, the CMake package, cuweave-info, and the docs (README,
# CHANGELOG, LICENSE, docs/, and the API reference when make api-docs made it).
DOC_FILES = README.md CHANGELOG.md LICENSE $(wildcard docs/*.md)
DOC_IMAGES = $(wildcard docs/img/*)
# The directories install makes are listed in DOCDIR/install-dirs
# (tools/install-dirs.sh): uninstall removes those, and no other.
INSTALL_DIRS = $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(LIBDIR)/cmake/cuweave $(DESTDIR)$(INCLUDEDIR)/cuweave \
	$(DESTDIR)$(INCLUDEDIR)/cuweave/cpp $(DESTDIR)$(BINDIR) $(DESTDIR)$(DOCDIR)/docs/img
OWN_DIRS = $(DESTDIR)$(INCLUDEDIR)/cuweave/cpp $(DESTDIR)$(INCLUDEDIR)/cuweave $(DESTDIR)$(LIBDIR)/cmake/cuweave \
	$(DESTDIR)$(DOCDIR)/docs/img $(DESTDIR)$(DOCDIR)/docs $(DESTDIR)$(DOCDIR)
install: lib programs
	sh tools/install-dirs.sh make $(DESTDIR)$(DOCDIR)/install-dirs $(INSTALL_DIRS)
	install -m 755 $(PROGRAMS:%=$(O)/%) $(DESTDIR)$(BINDIR)/
	install -m 644 $(HEADERS) $(filter-out include/cuweave/cpp/%,$(CPP_HEADERS)) $(DESTDIR)$(INCLUDEDIR)/cuweave/
	install -m 644 $(filter include/cuweave/cpp/%,$(CPP_HEADERS)) $(DESTDIR)$(INCLUDEDIR)/cuweave/cpp/
	install -m 755 $(O)/libcuweave.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/
	ln -sf libcuweave.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libcuweave.so
	install -m 644 $(STATIC) $(DESTDIR)$(LIBDIR)/
	install -m 644 $(O)/cuweave.pc $(DESTDIR)$(LIBDIR)/pkgconfig/
	install -m 644 $(O)/cuweaveConfig.cmake $(O)/cuweaveConfigVersion.cmake $(DESTDIR)$(LIBDIR)/cmake/cuweave/
	install -m 644 $(filter-out docs/%,$(DOC_FILES)) $(DESTDIR)$(DOCDIR)/
	install -m 644 $(filter docs/%,$(DOC_FILES)) $(DESTDIR)$(DOCDIR)/docs/
	$(if $(DOC_IMAGES),install -m 644 $(DOC_IMAGES) $(DESTDIR)$(DOCDIR)/docs/img/)
	if [ -f $(O)/api/html/index.html ]; then rm -rf $(DESTDIR)$(DOCDIR)/api && install -d $(DESTDIR)$(DOCDIR)/api \
		&& cp -R $(O)/api/html $(DESTDIR)$(DOCDIR)/api/html; fi

# Removes each file install installs, then each directory it made (its list,
# DOCDIR/install-dirs) that is left empty, and cuweave's own directories.
uninstall:
	rm -f $(PROGRAMS:%=$(DESTDIR)$(BINDIR)/%)
	rm -f $(patsubst include/cuweave/%,$(DESTDIR)$(INCLUDEDIR)/cuweave/%,$(HEADERS) $(CPP_HEADERS))
	rm -f $(DESTDIR)$(LIBDIR)/libcuweave.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/$(SONAME) $(DESTDIR)$(LIBDIR)/libcuweave.so \
		$(DESTDIR)$(LIBDIR)/libcuweave.a $(DESTDIR)$(LIBDIR)/pkgconfig/cuweave.pc \
		$(DESTDIR)$(LIBDIR)/cmake/cuweave/cuweaveConfig.cmake $(DESTDIR)$(LIBDIR)/cmake/cuweave/cuweaveConfigVersion.cmake
	rm -f $(patsubst %,$(DESTDIR)$(DOCDIR)/%,$(DOC_FILES) $(DOC_IMAGES))
	rm -rf $(DESTDIR)$(DOCDIR)/api
	@sh tools/install-dirs.sh remove $(DESTDIR)$(DOCDIR)/install-dirs $(OWN_DIRS)

clean:
	rm -rf $(O)

# For tools/check-build-lists.sh: make -s print-LIB_SRCS
print-%:
	@echo $($*)

-include $(OBJS:.o=.d)

.PHONY: api-docs info programs all lib examples tests benches headers check example install uninstall clean fuzz FORCE
FORCE:
