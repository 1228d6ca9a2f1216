# hpmalloc build. `make` builds the library, the hpm command and the
# benchmark programs; `make test` runs every test; `make bench` runs the
# quick evaluation. Sources are found by folder, so adding a file needs no
# edit here: src/ (library), tools/hpm/ (command), sim/src/ (simulator),
# sim/cli/ (`hpm sim`, linked into hpm),
# bench/<group>/<name>.c (one program each), tests/unit/*.c (linked with
# the static library), tests/progs/*.c (plain programs run under
# LD_PRELOAD), sim/tests/*.c (simulator tests).
CC      ?= cc
OPT     ?= -O2
CFLAGS  ?= $(OPT) -g
WARN    := -Wall -Wextra -Wno-unused-parameter
BASE    := -std=c11 -D_GNU_SOURCE -pthread $(WARN)
LIBFLAGS := $(BASE) -fPIC -fvisibility=hidden -ftls-model=initial-exec -fno-builtin-malloc -Iinclude -Isrc
B := build

LIB_SRC   := $(filter-out src/static.c,$(wildcard src/*.c src/*/*.c))
LIB_OBJ   := $(patsubst %.c,$(B)/obj/%.o,$(LIB_SRC))
VERSION   := $(shell sed -n 's/^\#define HPM_VERSION "\(.*\)"/\1/p' include/hpmalloc.h)
SOVER     := 0
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
# C++ operator new/delete (src/cxx/*.cc) are built only when a C++ compiler
# exists; they refer to the C++ runtime weakly, so the library does not
# depend on libstdc++ (docs/install.md).
CXX       ?= c++
HAVE_CXX  := $(shell command -v $(CXX) >/dev/null 2>&1 && echo yes)
LIB_LD    := $(CC)
ifeq ($(HAVE_CXX),yes)
LIB_OBJ   += $(patsubst %.cc,$(B)/obj/%.o,$(wildcard src/cxx/*.cc))
endif
SIM_SRC   := $(wildcard sim/src/*.c)
SIM_OBJ   := $(patsubst %.c,$(B)/obj/%.o,$(SIM_SRC))
HPM_SRC   := $(wildcard tools/hpm/*.c tools/hpm/*/*.c)
HPM_OBJ   := $(patsubst %.c,$(B)/obj/%.o,$(HPM_SRC))
HPM_OBJ   += $(patsubst %.c,$(B)/obj/%.o,$(wildcard sim/cli/*.c))
BENCH_SRC := $(wildcard bench/*/*.c)
BENCH_BIN := $(addprefix $(B)/bench/,$(basename $(notdir $(BENCH_SRC))))
UNIT_SRC  := $(wildcard tests/unit/*.c)
UNIT_BIN  := $(patsubst tests/unit/%.c,$(B)/tests/unit/%,$(UNIT_SRC))
PROG_SRC  := $(wildcard tests/progs/*.c)
PROG_BIN  := $(patsubst tests/progs/%.c,$(B)/tests/progs/%,$(PROG_SRC))
SIMT_SRC  := $(wildcard sim/tests/*.c)
SIMT_BIN  := $(patsubst sim/tests/%.c,$(B)/tests/sim/%,$(SIMT_SRC))

all: lib $(B)/hpm $(BENCH_BIN)
lib: $(B)/libhpmalloc.so $(B)/libhpmalloc.so.$(SOVER) $(B)/libhpmalloc.a
tests: all $(UNIT_BIN) $(PROG_BIN) $(SIMT_BIN)

$(B)/obj/src/%.o: src/%.c $(wildcard src/*.h src/*/*.h) include/hpmalloc.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LIBFLAGS) -c $< -o $@

CXXFLAGS ?= $(OPT) -g
$(B)/obj/src/%.o: src/%.cc $(wildcard src/*.h src/*/*.h) include/hpmalloc.h
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -std=c++17 -D_GNU_SOURCE -pthread $(WARN) -fPIC -fvisibility=hidden -Iinclude -Isrc -c $< -o $@

# The shared library: libhpmalloc.so.$(VERSION) with soname libhpmalloc.so.0
# (the ABI number), and the links libhpmalloc.so.0 and libhpmalloc.so.
$(B)/libhpmalloc.so.$(VERSION): $(LIB_OBJ)
	@mkdir -p $(B)
	$(LIB_LD) -shared -Wl,-soname,libhpmalloc.so.$(SOVER) $(LDFLAGS) -o $@ $^ -pthread -ldl

$(B)/libhpmalloc.so.$(SOVER) $(B)/libhpmalloc.so: $(B)/libhpmalloc.so.$(VERSION)
	ln -sf $(notdir $<) $@

$(B)/libhpmalloc.a: $(LIB_OBJ)
	@mkdir -p $(B); rm -f $@
	ar rcs $@ $^

$(B)/obj/sim/%.o: sim/%.c $(wildcard sim/src/*.h sim/include/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BASE) -Isim/include -Isim/src -c $< -o $@

$(B)/libhpmsim.a: $(SIM_OBJ)
	@mkdir -p $(B); rm -f $@
	ar rcs $@ $^

$(B)/obj/tools/%.o: tools/%.c $(wildcard tools/hpm/*.h tools/hpm/*/*.h tools/proc/*.h sim/include/*.h) include/hpmalloc.h bench/common/bench_common.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(BASE) -DHPM_MULTIARCH='"$(MULTIARCH)"' -Iinclude -Isim/include -Itools/hpm -Itools/hpm/bench -Itools/hpm/stat -Itools/proc -Ibench/common -c $< -o $@

$(B)/hpm: $(HPM_OBJ) $(B)/libhpmsim.a
	$(CC) $(LDFLAGS) -o $@ $(HPM_OBJ) $(B)/libhpmsim.a -pthread -lm -ldl

# Benchmarks use the process's malloc, so LD_PRELOAD chooses the allocator.
define bench_rule
$(B)/bench/$(basename $(notdir $(1))): $(1) $(wildcard bench/common/*.h)
	@mkdir -p $(B)/bench
	$(CC) $(CFLAGS) $(BASE) -Ibench/common -Iinclude -o $$@ $$< -lm -ldl
endef
$(foreach s,$(BENCH_SRC),$(eval $(call bench_rule,$(s))))

$(B)/tests/unit/%: tests/unit/%.c $(B)/libhpmalloc.a tests/testhelper.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BASE) -Iinclude -Isrc -Itests -o $@ $< $(B)/libhpmalloc.a -ldl -lm

$(B)/tests/progs/%: tests/progs/%.c tests/testhelper.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BASE) -Iinclude -Itests -o $@ $< -ldl -lm

ifeq ($(HAVE_CXX),yes)
CXXPROG_SRC := $(wildcard tests/progs/*.cc)
CXXPROG_BIN := $(patsubst tests/progs/%.cc,$(B)/tests/progs/%,$(CXXPROG_SRC))
tests: $(CXXPROG_BIN) $(addsuffix _linked,$(CXXPROG_BIN))
$(B)/tests/progs/%: tests/progs/%.cc tests/testhelper.h include/hpmalloc.h
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -std=c++17 -Wall -Wextra -Iinclude -Itests -o $@ $< -ldl
$(B)/tests/progs/%_linked: tests/progs/%.cc tests/testhelper.h $(B)/libhpmalloc.so.$(SOVER)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -std=c++17 -Wall -Wextra -Iinclude -Itests -o $@ $< -L$(B) -lhpmalloc -Wl,-rpath,$(abspath $(B)) -ldl
endif

$(B)/tests/sim/%: sim/tests/%.c $(B)/libhpmsim.a tests/testhelper.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BASE) -Isim/include -Isim/src -Itests -o $@ $< $(B)/libhpmsim.a -lm

test:
	tools/install-deps.sh test
	$(MAKE) tests
	tests/run.sh

# Every test, as CI runs it: `make test` with warnings as errors, the clang
# build with warnings as errors, then the debug, TSan, ASan+UBSan and fuzz
# runs (tests/sanitize.sh). About 10 minutes on 2 cores.
check:
	$(MAKE) test WERROR=1
	$(MAKE) -j2 WERROR=1 CC=clang B=build-clang all
	WERROR=1 tests/sanitize.sh debug tsan asan fuzz

bench:
	tools/install-deps.sh bench
	$(MAKE) all
	$(B)/hpm bench --quick

clean:
	rm -rf $(B)

# Installation (docs/install.md). `make install PREFIX=/usr/local
# DESTDIR=` copies the library (shared and static), the header, hpm, a
# pkg-config file, a CMake package and the docs; `make uninstall` with the
# same variables removes exactly those files.
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR     ?= $(PREFIX)/share/man
DOCDIR     ?= $(PREFIX)/share/doc/hpmalloc
PCDIR      ?= $(LIBDIR)/pkgconfig
CMAKEDIR   ?= $(LIBDIR)/cmake/hpmalloc
DOCS       := README.md $(wildcard docs/*.md)
SUBST       = sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' \
                  -e 's|@VERSION@|$(VERSION)|g' -e 's|@SOVER@|$(SOVER)|g'

install: lib $(B)/hpm
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PCDIR) \
	    $(DESTDIR)$(CMAKEDIR) $(DESTDIR)$(DOCDIR) $(DESTDIR)$(MANDIR)/man1
	install -m 755 $(B)/hpm $(DESTDIR)$(BINDIR)/hpm
	install -m 644 $(B)/libhpmalloc.so.$(VERSION) $(DESTDIR)$(LIBDIR)/
	ln -sf libhpmalloc.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libhpmalloc.so.$(SOVER)
	ln -sf libhpmalloc.so.$(SOVER) $(DESTDIR)$(LIBDIR)/libhpmalloc.so
	install -m 644 $(B)/libhpmalloc.a $(DESTDIR)$(LIBDIR)/
	install -m 644 include/hpmalloc.h $(DESTDIR)$(INCLUDEDIR)/
	$(SUBST) pkgconfig/hpmalloc.pc.in > $(DESTDIR)$(PCDIR)/hpmalloc.pc
	$(SUBST) cmake/hpmalloc-config.cmake.in > $(DESTDIR)$(CMAKEDIR)/hpmalloc-config.cmake
	$(SUBST) cmake/hpmalloc-config-version.cmake.in > $(DESTDIR)$(CMAKEDIR)/hpmalloc-config-version.cmake
	chmod 644 $(DESTDIR)$(PCDIR)/hpmalloc.pc $(DESTDIR)$(CMAKEDIR)/*.cmake
	install -m 644 docs/hpm.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 644 $(DOCS) $(DESTDIR)$(DOCDIR)/

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/hpm $(DESTDIR)$(LIBDIR)/libhpmalloc.so.$(VERSION) \
	    $(DESTDIR)$(LIBDIR)/libhpmalloc.so.$(SOVER) $(DESTDIR)$(LIBDIR)/libhpmalloc.so \
	    $(DESTDIR)$(LIBDIR)/libhpmalloc.a $(DESTDIR)$(INCLUDEDIR)/hpmalloc.h $(DESTDIR)$(PCDIR)/hpmalloc.pc \
	    $(DESTDIR)$(CMAKEDIR)/hpmalloc-config.cmake $(DESTDIR)$(CMAKEDIR)/hpmalloc-config-version.cmake \
	    $(DESTDIR)$(MANDIR)/man1/hpm.1 $(addprefix $(DESTDIR)$(DOCDIR)/,$(notdir $(DOCS)))
	-rmdir $(DESTDIR)$(CMAKEDIR) $(DESTDIR)$(DOCDIR) 2>/dev/null

.PHONY: all lib tests test check bench clean install uninstall

# ---- the debug tier and the sanitizer builds (docs/tests.md) ----
# make debug: HPM_DEBUG=3 (every assert, the lock order and the expensive
#   checkers; src/debug.h) in build-debug/, the whole build, libc names
#   included (tests preload build-debug/libhpmalloc.so).
# make asan (ASan+UBSan), make ubsan, make tsan: clang, HPM_DEBUG=2 and
#   -DHPM_NO_OVERRIDE (the sanitizer's allocator keeps the libc names; the
#   tests reach hpmalloc through tests/hpm_names.h), in build-asan/,
#   build-ubsan/, build-tsan/: the static library, the unit tests and the
#   test programs linked with it (build-*/tests/linked/). make fuzz-asan:
#   the libFuzzer harness on an ASan+UBSan library, in build-fuzz/.
# Header dependencies are tracked (-MMD -MP); WERROR=1 (CI) makes
# warnings errors.
override CFLAGS += -MMD -MP
ifeq ($(WERROR),1)
override CFLAGS += -Werror
endif
SAN_CC ?= clang
SAN_FLAGS := -O1 -g -fno-omit-frame-pointer -DHPM_NO_OVERRIDE -DHPM_DEBUG=2
SAN_NAMES := -include tests/hpm_names.h
SAN_PROGS := stress forktest
$(B)/tests/unit/%: override CFLAGS += $(TEST_EXTRA)
# test_forkstats needs the published page: publish.c is a weak hook, which
# a static link leaves out unless something asks for it.
$(B)/tests/unit/test_forkstats: override CFLAGS += -Wl,-u,_hpm_publish_init

$(B)/tests/linked/%: tests/progs/%.c $(B)/libhpmalloc.a tests/hpm_names.h tests/testhelper.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BASE) $(SAN_NAMES) -Iinclude -Itests -o $@ $< -rdynamic $(B)/libhpmalloc.a -ldl -lm

$(B)/fuzz/fuzz_alloc: tests/fuzz/fuzz_alloc.c $(B)/libhpmalloc.a tests/hpm_names.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BASE) -fsanitize=fuzzer $(SAN_NAMES) -Iinclude -Itests -o $@ $< $(B)/libhpmalloc.a -ldl -lm

san-tests: $(B)/libhpmalloc.a $(UNIT_BIN) $(addprefix $(B)/tests/linked/,$(SAN_PROGS))

debug:
	$(MAKE) B=build-debug CFLAGS="-O2 -g -DHPM_DEBUG=3" tests
asan:
	$(MAKE) B=build-asan CC=$(SAN_CC) TEST_EXTRA="$(SAN_NAMES)" \
	    CFLAGS="$(SAN_FLAGS) -fsanitize=address,undefined -fno-sanitize-recover=undefined" san-tests
ubsan:
	$(MAKE) B=build-ubsan CC=$(SAN_CC) TEST_EXTRA="$(SAN_NAMES)" \
	    CFLAGS="$(SAN_FLAGS) -fsanitize=undefined -fno-sanitize-recover=undefined" san-tests
tsan:
	$(MAKE) B=build-tsan CC=$(SAN_CC) TEST_EXTRA="$(SAN_NAMES)" CFLAGS="$(SAN_FLAGS) -fsanitize=thread" san-tests
# The library gets coverage for libFuzzer, but not trace-cmp: libFuzzer
# would learn the free-block cookie from free()'s comparison (fuzz.sh).
fuzz-asan:
	$(MAKE) B=build-fuzz CC=$(SAN_CC) CFLAGS="$(SAN_FLAGS) -fsanitize=address,undefined -fno-sanitize-recover=undefined \
	    -fsanitize=fuzzer-no-link -fno-sanitize-coverage=trace-cmp" build-fuzz/fuzz/fuzz_alloc

-include $(wildcard $(B)/obj/*/*.d $(B)/obj/*/*/*.d $(B)/obj/*/*/*/*.d $(B)/tests/*/*.d $(B)/bench/*.d $(B)/fuzz/*.d)
.PHONY: san-tests debug asan ubsan tsan fuzz-asan
