# make: the pmixbus binary and lib/libpmix.so.2, the PMIx client library in
# C (cabi/src, docs/cabi.md). Needs Go, a C compiler and Debian's
# libmsgpuck-dev (header only: nothing extra is linked into the ranks).
GO      ?= go
CC      ?= gcc
CFLAGS  ?= -O2 -g
LIBDIR  ?= lib

LIB_CFLAGS  = -std=gnu11 -fPIC -fvisibility=hidden -Wall -Wextra -pthread \
              -Icabi/include -Icabi/src
LIB_LDFLAGS = -shared -pthread -Wl,-soname,libpmix.so.2 \
              -Wl,--version-script=cabi/libpmix.map -Wl,-z,defs -Wl,-z,now
LIB_SRCS    = $(wildcard cabi/src/*.c)
LIB_HDRS    = $(wildcard cabi/src/*.h) cabi/include/pmix.h cabi/include/pmix_common.h

# With hwloc's headers (Debian: libhwloc-dev), also lib/pmixbus-topology,
# which the agent runs once to give its ranks the node's topology
# (PMIX_LOCAL_TOPO); without them the ranks discover it themselves.
# With them the library's PMIx_Load_topology works too (cabi/src/topology.c:
# hwloc's headers only, libhwloc.so.15 is opened at run time).
HWLOC := $(shell pkg-config --exists hwloc 2>/dev/null && echo yes)
ifeq ($(HWLOC),yes)
LIB_CFLAGS += -DPMIXBUS_HWLOC $(shell pkg-config --cflags hwloc)
endif

.PHONY: all lib pmixbus fuzz clean
all: pmixbus lib
ifeq ($(HWLOC),yes)
all: $(LIBDIR)/pmixbus-topology
endif

pmixbus:
	$(GO) build -o pmixbus ./cmd/pmixbus

lib: $(LIBDIR)/libpmix.so.2

$(LIBDIR)/libpmix.so.2: $(LIB_SRCS) $(LIB_HDRS) cabi/libpmix.map Makefile
	@mkdir -p $(LIBDIR)
	$(CC) $(CFLAGS) $(LIB_CFLAGS) $(LIB_SRCS) $(LIB_LDFLAGS) -o $@.tmp
	mv $@.tmp $@
	ln -sf libpmix.so.2 $(LIBDIR)/libpmix.so

$(LIBDIR)/pmixbus-topology: cabi/topology/pmixbus-topology.c Makefile
	@mkdir -p $(LIBDIR)
	$(CC) $(CFLAGS) -std=gnu11 -Wall -Wextra $< -o $@ $(shell pkg-config --cflags --libs hwloc)

# The fuzz targets (libFuzzer, clang): the frame decoder for FUZZ_SECONDS,
# the node barrier's header check (one fixed-size struct, a few branches)
# for FUZZ_HEADER_SECONDS.
FUZZ_SECONDS ?= 30
FUZZ_HEADER_SECONDS ?= 10
FUZZDIR ?= .fuzz
fuzz:
	@mkdir -p $(FUZZDIR)/corpus
	clang -g -O1 -fsanitize=fuzzer,address,undefined -Icabi/include -Icabi/src \
	    cabi/fuzz/fuzz_frame.c cabi/src/wire.c cabi/src/values.c cabi/src/helpers.c cabi/src/objects.c -o $(FUZZDIR)/fuzz_frame
	@$(FUZZDIR)/fuzz_frame -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -artifact_prefix=$(FUZZDIR)/ \
	    $(FUZZDIR)/corpus cabi/fuzz/seeds 2>$(FUZZDIR)/fuzz.log \
	    && grep -h '^Done' $(FUZZDIR)/fuzz.log \
	    || { tail -60 $(FUZZDIR)/fuzz.log; exit 1; }
	@mkdir -p $(FUZZDIR)/corpus-nodefence
	clang -g -O1 -fsanitize=fuzzer,address,undefined -Icabi/include -Icabi/src \
	    cabi/fuzz/fuzz_nodefence.c -o $(FUZZDIR)/fuzz_nodefence
	@$(FUZZDIR)/fuzz_nodefence -max_total_time=$(FUZZ_HEADER_SECONDS) -max_len=4200 -artifact_prefix=$(FUZZDIR)/ \
	    $(FUZZDIR)/corpus-nodefence 2>$(FUZZDIR)/fuzz-nodefence.log \
	    && grep -h '^Done' $(FUZZDIR)/fuzz-nodefence.log \
	    || { tail -60 $(FUZZDIR)/fuzz-nodefence.log; exit 1; }

clean:
	rm -rf pmixbus $(LIBDIR) $(FUZZDIR)
