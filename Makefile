# seckill - build, test, demo.  `make test` and `make demo` install missing
# Debian packages first (scripts/deps.sh), then build into build/ (or
# build-san/ with SANITIZE=1: ASan + UBSan).
CC      ?= cc
SANITIZE ?= 0
ifeq ($(SANITIZE),1)
BUILD   := build-san
SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
OPT     := -O1 -g
else
BUILD   := build
SANFLAGS :=
OPT     := -O2 -g
endif

WARN    := -std=c11 -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Werror
PKGS    := hiredis sqlite3 jansson libssl libcrypto libh2o-evloop libpq
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CFLAGS  := $(WARN) $(OPT) $(SANFLAGS) -D_GNU_SOURCE -DH2O_USE_LIBUV=0 -Isrc -I$(BUILD)/gen
LDLIBS   = $(PKG_LIBS) -lpthread -lm

LUA      := $(sort $(wildcard lua/*.lua))
LUA_LIB  := $(wildcard lua/lib/*.lua)
LIB_SRC  := $(filter-out src/main.c,$(sort $(wildcard src/*.c)))
LIB_OBJ  := $(LIB_SRC:src/%.c=$(BUILD)/src/%.o) $(BUILD)/gen/scripts_gen.o
BENCH_SRC := $(sort $(wildcard bench/*.c))
BENCH_OBJ := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%.o)
TEST_SRC := $(sort $(wildcard tests/*.c))
TEST_OBJ := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%.o)

.PHONY: all deps deps-check test demo clean format bench
all: deps-check $(BUILD)/seckill $(BUILD)/seckill-tests

# Build without touching apt when everything is there; `make deps` installs.
deps-check:
	@sh scripts/deps.sh
deps:
	@sh scripts/deps.sh

$(BUILD)/gen/gen_scripts: tools/gen_scripts.c src/codes.def
	@mkdir -p $(dir $@)
	$(CC) -O1 -o $@ $<

$(BUILD)/gen/scripts_gen.c $(BUILD)/gen/scripts_gen.h: $(BUILD)/gen/gen_scripts $(LUA) $(LUA_LIB)
	$(BUILD)/gen/gen_scripts $(BUILD)/gen/scripts_gen.c $(BUILD)/gen/scripts_gen.h lua $(LUA)

$(BUILD)/gen/scripts_gen.o: $(BUILD)/gen/scripts_gen.c
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/src/%.o: src/%.c $(BUILD)/gen/scripts_gen.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/bench/%.o: bench/%.c $(BUILD)/gen/scripts_gen.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -Ibench -MMD -MP -c -o $@ $<

$(BUILD)/tests/%.o: tests/%.c $(BUILD)/gen/scripts_gen.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -Itests -MMD -MP -c -o $@ $<

$(BUILD)/libseckill.a: $(LIB_OBJ) $(BENCH_OBJ)
	rm -f $@; ar rcs $@ $^

$(BUILD)/seckill: $(BUILD)/src/main.o $(BUILD)/libseckill.a
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libseckill.a $(LDLIBS)

$(BUILD)/seckill-tests: $(TEST_OBJ) $(BUILD)/libseckill.a
	$(CC) $(CFLAGS) -o $@ $(TEST_OBJ) $(BUILD)/libseckill.a $(LDLIBS)

# The whole suite: one runner; it starts its own redis-server (and other
# servers) on private ports in a temporary directory and stops them.
test: all
	SECKILL_BIN=$(abspath $(BUILD)/seckill) $(BUILD)/seckill-tests $(T)

demo: all
	$(BUILD)/seckill demo $(DEMO_ARGS)

bench: all
	@sh scripts/deps.sh bench
	$(BUILD)/seckill bench admission
	$(BUILD)/seckill bench persist
	$(BUILD)/seckill bench http
	$(BUILD)/seckill bench strategies --chart docs/strategies.svg
	$(BUILD)/seckill bench cluster

format:
	clang-format -i src/*.c src/*.h tests/*.c tests/*.h bench/*.c tools/*.c

clean:
	rm -rf build build-san

-include $(wildcard $(BUILD)/*/*.d)
