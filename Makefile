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
