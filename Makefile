# hpmalloc build. `make` builds the library, the hpm command and the
# benchmark programs; `make test` runs every test; `make bench` runs the
# quick evaluation. Sources are found by folder, so adding a file needs no
# edit here: src/ (library), tools/hpm/ (command), sim/src/ (simulator),
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
SIM_SRC   := $(wildcard sim/src/*.c)
SIM_OBJ   := $(patsubst %.c,$(B)/obj/%.o,$(SIM_SRC))
HPM_SRC   := $(wildcard tools/hpm/*.c tools/hpm/*/*.c)
HPM_OBJ   := $(patsubst %.c,$(B)/obj/%.o,$(HPM_SRC))
BENCH_SRC := $(wildcard bench/*/*.c)
BENCH_BIN := $(addprefix $(B)/bench/,$(basename $(notdir $(BENCH_SRC))))
UNIT_SRC  := $(wildcard tests/unit/*.c)
UNIT_BIN  := $(patsubst tests/unit/%.c,$(B)/tests/unit/%,$(UNIT_SRC))
PROG_SRC  := $(wildcard tests/progs/*.c)
PROG_BIN  := $(patsubst tests/progs/%.c,$(B)/tests/progs/%,$(PROG_SRC))
SIMT_SRC  := $(wildcard sim/tests/*.c)
SIMT_BIN  := $(patsubst sim/tests/%.c,$(B)/tests/sim/%,$(SIMT_SRC))

all: $(B)/libhpmalloc.so $(B)/libhpmalloc.a $(B)/hpm $(BENCH_BIN)
tests: all $(UNIT_BIN) $(PROG_BIN) $(SIMT_BIN)

$(B)/obj/src/%.o: src/%.c $(wildcard src/*.h src/*/*.h) include/hpmalloc.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LIBFLAGS) -c $< -o $@

$(B)/libhpmalloc.so: $(LIB_OBJ)
	@mkdir -p $(B)
	$(CC) -shared -o $@ $^ -pthread -ldl

$(B)/libhpmalloc.a: $(LIB_OBJ)
	@mkdir -p $(B); rm -f $@
	ar rcs $@ $^

$(B)/obj/sim/%.o: sim/%.c $(wildcard sim/src/*.h sim/include/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BASE) -Isim/include -Isim/src -c $< -o $@

$(B)/libhpmsim.a: $(SIM_OBJ)
	@mkdir -p $(B); rm -f $@
	ar rcs $@ $^

$(B)/obj/tools/%.o: tools/%.c $(wildcard tools/hpm/*.h tools/hpm/*/*.h sim/include/*.h) include/hpmalloc.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BASE) -Iinclude -Isim/include -Itools/hpm -Itools/hpm/bench -Itools/hpm/stat -c $< -o $@

$(B)/hpm: $(HPM_OBJ) $(B)/libhpmsim.a
	$(CC) -o $@ $(HPM_OBJ) $(B)/libhpmsim.a -pthread -lm -ldl

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

$(B)/tests/sim/%: sim/tests/%.c $(B)/libhpmsim.a tests/testhelper.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BASE) -Isim/include -Isim/src -Itests -o $@ $< $(B)/libhpmsim.a -lm

test:
	tools/install-deps.sh test
	$(MAKE) tests
	tests/run.sh

bench:
	tools/install-deps.sh bench
	$(MAKE) all
	$(B)/hpm bench --quick

clean:
	rm -rf $(B)

.PHONY: all tests test bench clean

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
