# dsgd — GNU Make build.
#   make               build/dsgd and build/libdsgd.a
#   make test          unit + multi-process tests (SANITIZE=1: ASan+UBSan build in build-san/)
#   MPI=mpich          any of these with MPICH (mpicc.mpich, build-mpich/, mpiexec) instead of Open MPI
#   make bench         throughput benchmarks (against PyTorch when installed)
#   make demo          a real Fashion-MNIST training run
#   make check-deps    say what is missing
#   make fuzz          libFuzzer harnesses (clang), FUZZ_RUNS executions (default 10.5 million) each;
#                      make test runs each for 5 s
#   make sim           build-sim/dsgd for SimGrid (scripts/dsgd-sim runs it)
#   make sim-check     the simulator's calibration checks (also part of make test)
#   make install       dsgd, dsgd-plot, dsgd-sim (with build-sim/dsgd when built, and
#                      dsgd-regime), dsgd-cluster, dsgd-summarize (experiments/summarize.py)
#                      and the man page
#                      under PREFIX (default /usr/local), staged under DESTDIR if given
# Builds use every core (make -jN, -j1 included, overrides it; sub-makes share
# the jobs).

ifeq ($(MAKELEVEL),0)
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 1)
endif
SANITIZE ?= 0
SIM ?= 0
MPI ?= openmpi
ifeq ($(MPI),mpich)
ifneq ($(SIM),1)
CC := mpicc.mpich
BUILD ?= build-mpich$(if $(filter 1,$(SANITIZE)),-san)
endif
else ifneq ($(MPI),openmpi)
$(error MPI=$(MPI): choose openmpi or mpich)
endif
ifeq ($(SIM),1)
# the same sources, built for SimGrid's simulated MPI
BUILD ?= build-sim
CC := smpicc
SANFLAGS :=
DEFS := -DDSGD_SIM
OPT := -O3 -g
else ifeq ($(SANITIZE),1)
BUILD ?= build-san
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
OPT := -O1 -g
else
BUILD ?= build
SANFLAGS :=
OPT := -O3 -g
endif

CC ?= mpicc
ifeq ($(origin CC),default)
CC := mpicc
endif
# the worker's threads (--threads, src/util/par.h): OpenMP, except in the
# simulated build, whose ranks are threads of one process and compute on one
ifeq ($(SIM),1)
OMPFLAGS :=
else
OMPFLAGS := -fopenmp
endif
CFLAGS ?= $(OPT)
CFLAGS += $(OMPFLAGS) -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter -Wno-format-truncation $(DEFS) $(SANFLAGS)
LDFLAGS += $(SANFLAGS) $(OMPFLAGS)
LDLIBS := -lopenblas -lcjson -lz -lm

SRC := $(filter-out src/cli/main.c,$(wildcard src/*/*.c src/*/*/*.c))
HDR := $(wildcard src/*/*.h src/*/*/*.h src/*/*.inc)
OBJ := $(SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
# tests that run under mpirun (a suite launches them): tests/mpi_*.c
TEST_BIN += $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/mpi_*.c))
BENCH_SRC := $(wildcard bench/*.c)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

.PHONY: all test bench demo sim sim-check sim-extras check-deps clean fuzz fuzz-build install
all: check-deps $(BUILD)/dsgd

# ---- dependency detection: one line per missing piece, with the fix ----
HAVE_MPICC := $(shell command -v $(CC) >/dev/null 2>&1 && echo yes)
have_header = $(shell echo 'int main(void){return 0;}' | $(CC) -include $(1) -x c -fsyntax-only - >/dev/null 2>&1 && echo yes)
check-deps:
ifneq ($(HAVE_MPICC),yes)
	@echo "missing: $(CC) (MPI; smpicc for make sim). Install: apt-get install libopenmpi-dev openmpi-bin (MPI=mpich: libmpich-dev mpich; make sim: libsimgrid-dev), or run scripts/install-deps" >&2; exit 1
else
	@test "$(call have_header,cblas.h)" = yes || { echo "missing: CBLAS header (OpenBLAS). Install: apt-get install libopenblas-dev, or run scripts/install-deps" >&2; exit 1; }
	@test "$(call have_header,zlib.h)" = yes || { echo "missing: zlib. Install: apt-get install zlib1g-dev, or run scripts/install-deps" >&2; exit 1; }
	@test "$(call have_header,cjson/cJSON.h)" = yes || { echo "missing: cJSON. Install: apt-get install libcjson-dev, or run scripts/install-deps" >&2; exit 1; }
ifneq ($(filter check-deps,$(MAKECMDGOALS)),)
	@echo "check-deps: everything dsgd needs is present ($(CC), CBLAS, zlib, cJSON)"
endif
endif

$(BUILD)/%.o: %.c $(HDR)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libdsgd.a: $(OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/dsgd: $(BUILD)/src/cli/main.o $(BUILD)/libdsgd.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: tests/%.c tests/test.h $(BUILD)/libdsgd.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Isrc -o $@ $< $(BUILD)/libdsgd.a $(LDFLAGS) $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(BUILD)/libdsgd.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Isrc -o $@ $< $(BUILD)/libdsgd.a $(LDFLAGS) $(LDLIBS)

test: all $(TEST_BIN) $(BUILD)/bench/ps_bench $(BUILD)/bench/par_bench
ifeq ($(SANITIZE)$(SIM)$(MPI),00openmpi)
	@$(MAKE) --no-print-directory sim
	@$(MAKE) --no-print-directory fuzz-build
endif
	@SANITIZE=$(SANITIZE) tests/run.sh $(BUILD)

bench: all $(BENCH_BIN)
	@bench/run.sh $(BUILD)

demo: all
	@scripts/demo $(BUILD)

# build-sim/dsgd: run it with scripts/dsgd-sim (smpirun on a generated platform).
# CC, BUILD and MPI given for the real build do not reach this one.
sim:
	@$(MAKE) --no-print-directory SIM=1 MPI=openmpi CC=smpicc BUILD=build-sim all sim-extras

# the all-reduce benchmark and ps_bench (its latency probe), simulated, for
# the calibration checks
sim-extras: $(BUILD)/bench/allreduce $(BUILD)/bench/ps_bench

# the simulator's own checks (platforms, all-reduce against its cost model,
# shared data, every paradigm on a heterogeneous cluster); part of make test
sim-check: all sim
	@tests/sim.sh build-sim $(BUILD)

# ---- fuzzing: clang's libFuzzer with ASan and UBSan over the same sources ----
# The harnesses (fuzz/) call the loaders, the checkpoint reader and the
# option parser; seed corpora live in fuzz/seeds/, what a run finds goes to
# build-fuzz/corpus/ (the seeds stay as they are).
FUZZ_RUNS ?= 10500000
FUZZ_CC := OMPI_CC=clang MPICH_CC=clang mpicc
FUZZ_CFLAGS := -O1 -g -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -fno-omit-frame-pointer \
    -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
FUZZ_NAMES := idx cifar checkpoint options
FUZZ_OBJ := $(SRC:%.c=build-fuzz/%.o)
FUZZ_BIN := $(FUZZ_NAMES:%=build-fuzz/fuzz_%)

build-fuzz/src/%.o: src/%.c $(HDR)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@

build-fuzz/libdsgd.a: $(FUZZ_OBJ)
	@rm -f $@
	ar rcs $@ $^

build-fuzz/fuzz_%: fuzz/fuzz_%.c build-fuzz/libdsgd.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -Isrc -o $@ $< build-fuzz/libdsgd.a $(LDLIBS)

fuzz-build: $(FUZZ_BIN)

fuzz: fuzz-build
	@FUZZ_RUNS=$(FUZZ_RUNS) tests/fuzz.sh build-fuzz

# ---- install: the programs, the simulated build beside them, the man page ----
PREFIX ?= /usr/local
BINDIR := $(DESTDIR)$(PREFIX)/bin
LIBDIR := $(DESTDIR)$(PREFIX)/lib/dsgd
MANDIR := $(DESTDIR)$(PREFIX)/share/man/man1
install: $(BUILD)/dsgd
	install -d $(BINDIR) $(MANDIR)
	install -m 755 $(BUILD)/dsgd $(BINDIR)/dsgd
	install -m 755 scripts/dsgd-plot $(BINDIR)/dsgd-plot
	install -m 755 scripts/dsgd-cluster $(BINDIR)/dsgd-cluster
	install -m 755 scripts/dsgd-cluster-agent $(BINDIR)/dsgd-cluster-agent
	install -m 755 experiments/summarize.py $(BINDIR)/dsgd-summarize
	install -m 755 scripts/dsgd-regime $(BINDIR)/dsgd-regime
	install -m 644 docs/dsgd.1 $(MANDIR)/dsgd.1
	@if [ -x build-sim/dsgd ]; then \
	    install -d $(LIBDIR)/sim && install -m 755 build-sim/dsgd $(LIBDIR)/sim/dsgd && \
	    sed 's|build=build-sim |build=$(PREFIX)/lib/dsgd/sim |' scripts/dsgd-sim > $(BINDIR)/dsgd-sim.tmp; \
	else \
	    echo "install: no build-sim/dsgd (make sim): dsgd-sim installed without it, pass it --build DIR"; \
	    cp scripts/dsgd-sim $(BINDIR)/dsgd-sim.tmp; \
	fi
	chmod 755 $(BINDIR)/dsgd-sim.tmp && mv $(BINDIR)/dsgd-sim.tmp $(BINDIR)/dsgd-sim
	@echo "installed dsgd, dsgd-plot, dsgd-sim (with dsgd-regime), dsgd-cluster (with its agent) and dsgd-summarize in $(BINDIR) and dsgd(1) in $(MANDIR)"

clean:
	rm -rf build build-san build-sim build-fuzz build-mpich build-mpich-san
