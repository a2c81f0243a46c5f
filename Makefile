# seckill - build, test, demo.  `make test` and `make demo` install missing
# Debian packages first (scripts/deps.sh), then build into build/ (build-san/
# with SANITIZE=1: ASan + UBSan; build-tsan/ with TSAN=1: ThreadSanitizer).
#
# The tree, by layer (scripts/check-layers.sh keeps includes pointing down):
#   src/core  src/redis  src/engine  src/store  src/orders  src/http  -> libseckill.a
#   src/cmd (the sub-commands), src/load (`seckill load`), src/spawn (the
#   demo's private redis-server) -> the seckill binary;
#   bench/ (benchmarks) -> the seckill-bench binary, never in seckill;
#   tests/support/spawn (Cluster, Sentinel, PostgreSQL, MariaDB spawners):
#   test support, shared by the tests and the benchmarks;
#   tools/ (the generators of the embedded scripts and pages): the build.
#
# CFLAGS is yours (`make CFLAGS="-O0 -g"`); the warnings, the language level
# and the sanitizers are always added.
CC       ?= cc
SANITIZE ?= 0
TSAN     ?= 0
ifeq ($(SANITIZE),1)
BUILD    := build-san
SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
OPT      := -O1 -g
# Freed memory filled: a use after free inside a library ASan does not
# instrument (h2o) reads garbage and dies at once instead of passing
export ASAN_OPTIONS ?= max_free_fill_size=4096
else ifeq ($(TSAN),1)
BUILD    := build-tsan
SANFLAGS := -fsanitize=thread -fno-omit-frame-pointer
OPT      := -O1 -g
else
BUILD    := build
SANFLAGS :=
OPT      := -O2 -g
endif
CFLAGS   ?= $(OPT)
# The release, from the VERSION file (`seckill --version`, the Debian
# package's version: debian/changelog must name the same).
VERSION  := $(shell cat VERSION 2>/dev/null || echo unknown)

WARN     := -std=c11 -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Werror
# Hardening, as the Debian package builds (dpkg-buildflags, hardening=+all):
# a stack protector, FORTIFY (when optimising, and not under the
# sanitizers, which check more and do not mix with it; not twice when the
# caller's flags have it) and a read-only GOT bound at start (RELRO, BIND_NOW).
# tests/test_install.c reads the installed binary's ELF for them.
FORTIFY  := $(if $(filter -O1 -O2 -O3 -Os -Og -Ofast,$(CFLAGS)),$(if $(findstring _FORTIFY_SOURCE,$(CFLAGS) $(CPPFLAGS)),,-D_FORTIFY_SOURCE=2))
HARDEN   := -fstack-protector-strong $(if $(SANFLAGS),,$(FORTIFY))
HARDEN_LD := -Wl,-z,relro,-z,now
PKGS     := hiredis sqlite3 jansson libssl libcrypto libh2o-evloop libpq libmariadb libcurl
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
SK_CFLAGS  = $(WARN) $(CFLAGS) $(HARDEN) $(SANFLAGS) -D_GNU_SOURCE -DH2O_USE_LIBUV=0 \
             -Isrc -I. -Itests -I$(BUILD)/gen $(PKG_CFLAGS)
LDLIBS     = $(PKG_LIBS) -lpthread -lm

LAYERS    := core redis engine store orders http
LUA       := $(sort $(wildcard lua/*.lua))
LUA_LIB   := $(wildcard lua/lib/*.lua)
LIB_SRC   := $(sort $(foreach l,$(LAYERS),$(wildcard src/$(l)/*.c)))
CMD_SRC   := $(filter-out src/cmd/main.c,$(sort $(wildcard src/cmd/*.c))) \
             $(sort $(wildcard src/load/*.c src/spawn/*.c))
SPAWN_SRC := $(sort $(wildcard tests/support/spawn/*.c))
BENCH_SRC := $(filter-out bench/main.c,$(sort $(wildcard bench/*.c)))
TEST_SRC  := $(sort $(wildcard tests/*.c tests/unit/*.c tests/support/*.c))
obj        = $(patsubst %.c,$(BUILD)/%.o,$(1))
GEN_H     := $(BUILD)/gen/scripts_gen.h
GEN_O     := $(BUILD)/gen/scripts_gen.o
WEB       := $(sort $(wildcard web/*.* web/buyer/*.*))
WEB_H     := $(BUILD)/gen/web_gen.h
WEB_O     := $(BUILD)/gen/web_gen.o

.PHONY: all deps deps-check deps-build deps-demo deps-bench test test-unit demo clean format check-format check-layers check-errors \
        bench fuzz fuzz-smoke buyer-shots config-doc install install-only install-bench uninstall deb package-test \
        partitions chaos soak
# A plain `make` needs the build dependencies only and installs nothing: it
# names a missing -dev package and stops (SK_NO_DEPS=1: not even a look:
# the Debian package build, whose tools checked them). `make test`, `make
# partitions` and `make chaos` install what they need first (deps-check),
# `make demo` only the build's and redis-server (deps-demo), `make bench`
# also the reference servers (deps-bench): before anything is compiled,
# also under -j (every compile waits for DEPS_STEP).
ifneq ($(SK_NO_DEPS),)
DEPS_STEP :=
else ifneq ($(filter bench,$(MAKECMDGOALS)),)
DEPS_STEP := deps-bench
else ifneq ($(filter test partitions chaos soak,$(MAKECMDGOALS)),)
DEPS_STEP := deps-check
else ifneq ($(filter demo,$(MAKECMDGOALS)),)
DEPS_STEP := deps-demo
else
DEPS_STEP := deps-build
endif
all: $(DEPS_STEP) $(BUILD)/seckill $(BUILD)/seckill-bench $(BUILD)/seckill-tests \
     $(BUILD)/seckill-hooks $(BUILD)/libsk-clock-shift.so

# Without touching apt when everything is there; `make deps` installs what
# the tests, the demo and the package test need too.
deps-build:
	@sh scripts/deps.sh build
deps-check:
	@sh scripts/deps.sh
deps-demo:
	@sh scripts/deps.sh demo
deps-bench:
	@sh scripts/deps.sh bench
deps:
	@sh scripts/deps.sh

# The Lua scripts, embedded. The header only names the scripts and the
# positions of src/engine/script_pos.def, and is rewritten only when those
# change, so a .lua edit recompiles the generated .c alone.
$(BUILD)/gen/gen_scripts: tools/gen_scripts.c tools/gen_emit.c tools/gen_emit.h src/core/codes.def \
                          src/engine/script_pos.def src/engine/script_names.def \
                          | $(DEPS_STEP)
	@mkdir -p $(dir $@)
	$(CC) -O1 -I. -o $@ tools/gen_scripts.c tools/gen_emit.c
$(BUILD)/gen/scripts_gen.c: $(BUILD)/gen/gen_scripts $(LUA) $(LUA_LIB)
	$(BUILD)/gen/gen_scripts $@ $(GEN_H) lua $(LUA)
$(GEN_H): $(BUILD)/gen/scripts_gen.c
$(GEN_O): $(BUILD)/gen/scripts_gen.c
	$(CC) $(SK_CFLAGS) -c -o $@ $<

# The pages (web/: the dashboard; web/buyer/: the buyer's sale page), each
# one self-contained page embedded the same way.
$(BUILD)/gen/gen_web: tools/gen_web.c tools/gen_emit.c tools/gen_emit.h | $(DEPS_STEP)
	@mkdir -p $(dir $@)
	$(CC) -O1 -I. -o $@ tools/gen_web.c tools/gen_emit.c
$(BUILD)/gen/web_gen.c: $(BUILD)/gen/gen_web $(WEB)
	$(BUILD)/gen/gen_web $@ $(WEB_H) dashboard=web/dashboard.html sale=web/buyer/sale.html
$(WEB_H): $(BUILD)/gen/web_gen.c
$(WEB_O): $(BUILD)/gen/web_gen.c
	$(CC) $(SK_CFLAGS) -c -o $@ $<

# Every object: its own dependency file (-MMD); the generated headers must
# exist before the first compile (order-only: their date does not matter).
$(BUILD)/%.o: %.c | $(GEN_H) $(WEB_H) $(DEPS_STEP)
	@mkdir -p $(dir $@)
	$(CC) $(SK_CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/libseckill.a: $(call obj,$(LIB_SRC)) $(GEN_O) $(WEB_O)
	rm -f $@; ar rcs $@ $^
$(BUILD)/libseckill-cmd.a: $(call obj,$(CMD_SRC))
	rm -f $@; ar rcs $@ $^
$(BUILD)/libseckill-spawn.a: $(call obj,$(SPAWN_SRC))
	rm -f $@; ar rcs $@ $^
$(BUILD)/libseckill-bench.a: $(call obj,$(BENCH_SRC))
	rm -f $@; ar rcs $@ $^

# Archives in dependency order: bench and the tests use the test spawners,
# which use cmd's (load, the demo's spawner); all use the library.
BIN_LIBS   := $(BUILD)/libseckill-cmd.a $(BUILD)/libseckill.a
BENCH_LIBS := $(BUILD)/libseckill-bench.a $(BUILD)/libseckill-spawn.a $(BIN_LIBS)
TEST_LIBS  := $(BUILD)/libseckill-spawn.a $(BIN_LIBS)
$(BUILD)/src/cmd/version.o $(BUILD)/bench/main.o: SK_CFLAGS += -DSK_VERSION='"$(VERSION)"'
$(BUILD)/src/cmd/version.o $(BUILD)/bench/main.o: VERSION
# Where the commands look for the config file when none is named (after
# /etc/seckill/seckill.conf's place under the installed prefix).
$(BUILD)/src/cmd/settings.o: SK_CFLAGS += -DSK_SYSCONFDIR='"$(SYSCONFDIR)"'

$(BUILD)/seckill: $(BUILD)/src/cmd/main.o $(BIN_LIBS)
	$(CC) $(SK_CFLAGS) $(LDFLAGS) $(HARDEN_LD) -o $@ $< $(BIN_LIBS) $(LDLIBS)
# seckill with the test fault hooks compiled in (-DSK_TEST, as SQLite's
# SQLITE_TEST): SECKILL_TEST_* in the environment crash or pause the order
# worker at a chosen step. Only the tests that aim such a fault spawn it;
# the seckill binary, `make install` and the package have no hooks.
HOOKS_SRC := src/orders/order_worker.c src/orders/order_batch.c
HOOKS_O   := $(patsubst %.c,$(BUILD)/hooks/%.o,$(HOOKS_SRC))
$(BUILD)/hooks/%.o: %.c | $(GEN_H) $(WEB_H) $(DEPS_STEP)
	@mkdir -p $(dir $@)
	$(CC) $(SK_CFLAGS) -DSK_TEST -MMD -MP -c -o $@ $<
$(BUILD)/seckill-hooks: $(BUILD)/src/cmd/main.o $(HOOKS_O) $(BIN_LIBS)
	$(CC) $(SK_CFLAGS) $(LDFLAGS) $(HARDEN_LD) -o $@ $< $(HOOKS_O) $(BIN_LIBS) $(LDLIBS)
$(BUILD)/seckill-bench: $(BUILD)/bench/main.o $(BENCH_LIBS)
	$(CC) $(SK_CFLAGS) $(LDFLAGS) $(HARDEN_LD) -o $@ $< $(BENCH_LIBS) $(LDLIBS)
# The nemesis's clock jumps on redis-server (tests/preload/clock_shift.c),
# preloaded by the tests only.
$(BUILD)/libsk-clock-shift.so: tests/preload/clock_shift.c | $(DEPS_STEP)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -Wall -Wextra -Werror -O2 -fPIC -shared -o $@ $< -ldl
$(BUILD)/seckill-tests: $(call obj,$(TEST_SRC)) $(TEST_LIBS)
	$(CC) $(SK_CFLAGS) $(LDFLAGS) $(HARDEN_LD) -o $@ $(call obj,$(TEST_SRC)) $(TEST_LIBS) $(LDLIBS)

# The whole suite: one runner; it starts its own redis-server (and other
# servers) on private ports in a temporary directory and stops them.
# T=word runs the tests whose name or file contains word; J=N runs N tests
# at once; TIMEOUT=S is the per-test limit (a test may ask for more).
TEST_ARGS = $(if $(J),-j $(J)) $(if $(TIMEOUT),--timeout $(TIMEOUT)) $(T)
test: all check-layers check-format check-errors fuzz-smoke
	SECKILL_BIN=$(abspath $(BUILD)/seckill) SECKILL_BENCH_BIN=$(abspath $(BUILD)/seckill-bench) $(BUILD)/seckill-tests $(TEST_ARGS)

# The network partition tests (tests/test_partitions.c): hosts in network
# namespaces of their own, cut with nft; root only, a few minutes; not part
# of `make test`, run by .ci/run. The four scripted cuts, then the partition
# nemesis: a seeded mix of cuts, kills and freezes for PARTITION_S seconds
# (default 60); PARTITION_SEED=N repeats a schedule; T=word runs only the
# tests whose name holds word (T=nemesis: the nemesis alone).
partitions: all
	SECKILL_BIN=$(abspath $(BUILD)/seckill) SECKILL_BENCH_BIN=$(abspath $(BUILD)/seckill-bench) \
	  PARTITION_SEED=$(PARTITION_SEED) PARTITION_S=$(PARTITION_S) \
	  $(BUILD)/seckill-tests $(if $(TIMEOUT),--timeout $(TIMEOUT)) $(if $(T),partition_$(T),partition_)

# The nemesis (tests/test_chaos.c, docs/failover.md): a sale under a seeded
# random mix of faults on each topology, then the checker. CHAOS_SEED=N
# repeats a schedule (a fresh seed is printed otherwise), CHAOS_S=S its
# length (default 120), CHAOS_TOPO=sentinel|cluster|all (default all),
# CHAOS_STORE=postgres|sqlite|mariadb (default postgres); CHAOS_KINDS=id,... only those
# faults (master_kill, lag_failover, db_freeze, ...: tests/test_chaos.c).
# New kinds: redis_oom, clock_jump, disk_full, backlog_cap, sentinel_drift,
# webhook_faults, webhook_kill (serve A posts its events to a receiver of the test's own).
CHAOS_TOPO ?= all
CHAOS_S    ?= 120
CHAOS_FILTER = $(if $(filter sentinel,$(CHAOS_TOPO)),chaos_nemesis_sentinel,$(if $(filter cluster,$(CHAOS_TOPO)),chaos_nemesis_cluster,chaos_nemesis))
chaos: all
	@case "$(CHAOS_TOPO)" in sentinel|cluster|all) ;; *) echo "CHAOS_TOPO=$(CHAOS_TOPO): sentinel, cluster or all" >&2; exit 2;; esac
	SECKILL_BIN=$(abspath $(BUILD)/seckill) CHAOS_SEED=$(CHAOS_SEED) CHAOS_S=$(CHAOS_S) \
	  CHAOS_STORE=$(CHAOS_STORE) CHAOS_KINDS=$(CHAOS_KINDS) $(BUILD)/seckill-tests --timeout $$(( $(CHAOS_S) + 400 )) \
	  $(CHAOS_FILTER)

# The soak (tests/test_chaos.c, docs/failover.md "Soak"): a steady sale
# with the nemesis at a low rate for SOAK_MIN minutes (default 30), every
# process sampled each minute, judged against its bounds after the
# warm-up and by the nemesis's checker; draws docs/soak.svg (SOAK_SVG=path
# elsewhere). SOAK_TOPO=cluster for Redis Cluster; CHAOS_STORE, CHAOS_SEED
# and CHAOS_KINDS as for chaos.
SOAK_MIN ?= 30
SOAK_SVG ?= $(abspath docs/soak.svg)
soak: all
	SECKILL_BIN=$(abspath $(BUILD)/seckill) CHAOS_SEED=$(CHAOS_SEED) SOAK_MIN=$(SOAK_MIN) \
	  SOAK_SVG=$(SOAK_SVG) SOAK_TOPO=$(SOAK_TOPO) CHAOS_STORE=$(CHAOS_STORE) \
	  CHAOS_KINDS=$(CHAOS_KINDS) $(BUILD)/seckill-tests --timeout $$(( $(SOAK_MIN) * 60 + 900 )) \
	  chaos_soak

# Unit tests only: no server is started (tests/unit/).
test-unit: all
	SECKILL_BIN=$(abspath $(BUILD)/seckill) SECKILL_BENCH_BIN=$(abspath $(BUILD)/seckill-bench) $(BUILD)/seckill-tests --unit $(TEST_ARGS)

# Screenshots of the buyer's page in each state at phone and desktop width
# (docs/buyer/), taken by its browser tests.
buyer-shots: all
	mkdir -p docs/buyer
	SECKILL_SHOTS=$(abspath docs/buyer) SECKILL_BIN=$(abspath $(BUILD)/seckill) \
	    $(BUILD)/seckill-tests buyer_page

# docs/configuration.md's table of keys, made from src/http/config_keys.def
# by the binary (the test config_reference_in_docs_matches_the_table
# fails until it is run after a key changed).
config-doc: $(BUILD)/seckill
	$(BUILD)/seckill config --reference > $(BUILD)/config-keys.md
	awk -v f=$(BUILD)/config-keys.md \
	    '/^<!-- keys:end/ { skip = 0 } !skip { print } \
	     /^<!-- keys:begin/ { while ((getline l < f) > 0) print l; skip = 1 }' \
	    docs/configuration.md > $(BUILD)/configuration.md
	mv $(BUILD)/configuration.md docs/configuration.md

check-layers:
	@sh scripts/check-layers.sh
check-errors:
	@sh scripts/check-errors.sh

FORMAT_FILES = $(shell git ls-files '*.c' '*.h' 2>/dev/null || find src tools bench tests -name '*.[ch]')
check-format:
	@sh scripts/check-format.sh $(FORMAT_FILES)
format:
	clang-format -i $(FORMAT_FILES)

# The demo needs the seckill binary and redis-server only (deps.sh demo).
demo: $(DEPS_STEP) $(BUILD)/seckill
	$(BUILD)/seckill demo $(DEMO_ARGS)

# ---- installing ---------------------------------------------------------------
# `make install` (PREFIX=/usr/local, DESTDIR for staging): the binary, the
# man pages, an example config (never over an existing one; 0640
# root:seckill, it may hold secrets), the seckill user and group and
# STATEDIR (or, not root, the commands that make them), the systemd
# unit (disabled: nothing is enabled or started), the Prometheus alert
# rules and the OpenAPI document; and the benchmarks, seckill-bench and its
# page (install-bench: the Debian package puts them in a package of their
# own). install-only copies the product without building (INSTALL_BIN:
# which binary, default $(BUILD)/seckill; INSTALL_BENCH_BIN likewise).
PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
SYSCONFDIR  ?= $(if $(filter /usr,$(PREFIX)),/etc,$(PREFIX)/etc)
DATADIR     ?= $(PREFIX)/share
MANDIR      ?= $(DATADIR)/man
UNITDIR     ?= $(PREFIX)/lib/systemd/system
# The service's state (its SQLite database): the unit's StateDirectory=.
STATEDIR    ?= /var/lib/seckill
# The seckill user and group, STATEDIR and the config's owners and modes
# (scripts/install-user.sh): auto, or no (the Debian package's postinst).
INSTALL_USER ?= auto
INSTALL_BIN ?= $(BUILD)/seckill
INSTALL_BENCH_BIN ?= $(BUILD)/seckill-bench
SUBST = sed -e 's|@VERSION@|$(VERSION)|g' -e 's|@BINDIR@|$(BINDIR)|g' \
            -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' -e 's|@DATADIR@|$(DATADIR)|g'
install: all install-only install-bench
install-bench:
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1
	install -m 755 $(INSTALL_BENCH_BIN) $(DESTDIR)$(BINDIR)/seckill-bench
	$(SUBST) man/seckill-bench.1.in > $(DESTDIR)$(MANDIR)/man1/seckill-bench.1
	chmod 644 $(DESTDIR)$(MANDIR)/man1/seckill-bench.1
install-only:
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 \
	    $(DESTDIR)$(SYSCONFDIR)/seckill $(DESTDIR)$(UNITDIR) \
	    $(DESTDIR)$(DATADIR)/seckill/prometheus
	install -m 755 $(INSTALL_BIN) $(DESTDIR)$(BINDIR)/seckill
	$(SUBST) man/seckill.1.in > $(DESTDIR)$(MANDIR)/man1/seckill.1
	$(SUBST) man/seckill.conf.5.in > $(DESTDIR)$(MANDIR)/man5/seckill.conf.5
	chmod 644 $(DESTDIR)$(MANDIR)/man1/seckill.1 $(DESTDIR)$(MANDIR)/man5/seckill.conf.5
	$(SUBST) contrib/systemd/seckill.service.in > $(DESTDIR)$(UNITDIR)/seckill.service
	chmod 644 $(DESTDIR)$(UNITDIR)/seckill.service
	[ -e $(DESTDIR)$(SYSCONFDIR)/seckill/seckill.conf ] || \
	    install -m 640 etc/seckill.conf $(DESTDIR)$(SYSCONFDIR)/seckill/seckill.conf
	install -m 644 contrib/prometheus/seckill-rules.yml $(DESTDIR)$(DATADIR)/seckill/prometheus/
	install -m 644 docs/openapi.yaml $(DESTDIR)$(DATADIR)/seckill/openapi.yaml
	sh scripts/install-user.sh "$(DESTDIR)" "$(SYSCONFDIR)" "$(STATEDIR)" "$(INSTALL_USER)"
# The config stays when it was edited (it is the operator's), and so do the
# user seckill and STATEDIR (the database in it).
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/seckill $(DESTDIR)$(MANDIR)/man1/seckill.1 \
	    $(DESTDIR)$(BINDIR)/seckill-bench $(DESTDIR)$(MANDIR)/man1/seckill-bench.1 \
	    $(DESTDIR)$(MANDIR)/man5/seckill.conf.5 $(DESTDIR)$(UNITDIR)/seckill.service \
	    $(DESTDIR)$(DATADIR)/seckill/prometheus/seckill-rules.yml \
	    $(DESTDIR)$(DATADIR)/seckill/openapi.yaml
	-rmdir $(DESTDIR)$(DATADIR)/seckill/prometheus $(DESTDIR)$(DATADIR)/seckill 2>/dev/null
	if cmp -s etc/seckill.conf $(DESTDIR)$(SYSCONFDIR)/seckill/seckill.conf; then \
	    rm -f $(DESTDIR)$(SYSCONFDIR)/seckill/seckill.conf; \
	    rmdir $(DESTDIR)$(SYSCONFDIR)/seckill 2>/dev/null || true; fi

# The Debian package, with Debian's own tools, from a clean copy of the
# tree (the files git knows, committed or not) in build-deb/: the .deb
# lands there, never beside the source folder.
DEB_DIR := build-deb
deb:
	@sh scripts/deps.sh package
	rm -rf $(DEB_DIR) && mkdir -p $(DEB_DIR)/seckill-$(VERSION)
	git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t $(DEB_DIR)/seckill-$(VERSION)
	cd $(DEB_DIR)/seckill-$(VERSION) && dpkg-buildpackage -us -uc -b
	@ls -1 $(DEB_DIR)/*.deb

# What is too slow for every `make test`: the package built and installed
# into a throwaway root, lintian, the installed unit checked
# (scripts/package-test.sh; about a minute on 2 cores).
package-test: deb
	sh scripts/package-test.sh $(DEB_DIR) $(VERSION)

bench: all
	$(BUILD)/seckill-bench admission
	$(BUILD)/seckill-bench persist
	$(BUILD)/seckill-bench http
	$(BUILD)/seckill-bench scrape
	$(BUILD)/seckill-bench strategies --chart docs/strategies.svg
	$(BUILD)/seckill-bench cluster
	$(BUILD)/seckill-bench recover

# Fuzzing (libFuzzer, clang): one target per parser of outside bytes in
# tests/fuzz/fuzz_<target>.c, built with AddressSanitizer and UBSan into
# build-fuzz/ with only the sources it needs. `make fuzz FUZZ_S=60` runs
# each for FUZZ_S seconds from its seeds (tests/fuzz/corpus/<target>/; what
# it learns stays in build-fuzz/corpus/); `make test` runs each for
# FUZZ_SMOKE_S seconds, or skips them when clang is not installed.
FUZZ_CC      ?= clang
FUZZ_S       ?= 60
FUZZ_SMOKE_S ?= 2
FUZZ_BUILD   := build-fuzz
FUZZ_FLAGS   := -std=c11 -Wall -Wextra -Werror -g -O1 -D_GNU_SOURCE -Isrc -I. -Itests/fuzz \
                -I$(BUILD)/gen -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_TARGETS := framing http1_parse chunked http_body purchase_body auth router config redis_url http_resp \
                mysql_url cors jwt order_id order_event redis_settings challenge captcha event_batch
FUZZ_SRC_framing   := src/http/framing.c src/core/error.c
FUZZ_SRC_http1_parse := src/http/http1_parse.c src/http/framing.c src/core/error.c
FUZZ_SRC_chunked   := src/http/chunked.c src/core/error.c
FUZZ_SRC_http_body := src/http/http_body.c src/engine/activity.c src/orders/webhook_filter.c \
                      src/orders/webhook_sign.c src/core/error.c
FUZZ_SRC_purchase_body := $(FUZZ_SRC_http_body)
FUZZ_SRC_auth      := src/http/auth.c src/core/num.c src/core/error.c
FUZZ_SRC_router    := src/http/router.c
FUZZ_SRC_config    := src/http/config.c src/http/captcha.c src/http/cors.c src/orders/webhook_sign.c src/redis/redis_url.c src/core/url.c \
                      src/core/ip.c src/core/num.c src/core/log.c src/core/redact.c \
                      src/core/error.c src/engine/activity.c
FUZZ_SRC_cors      := src/http/cors.c src/core/error.c
FUZZ_SRC_redis_url := src/redis/redis_url.c src/core/url.c src/core/num.c src/core/redact.c \
                      src/core/error.c
FUZZ_SRC_mysql_url := src/store/mysql_url.c src/core/url.c src/core/num.c src/core/redact.c \
                      src/core/error.c
FUZZ_SRC_http_resp := src/core/http_resp.c src/core/num.c src/core/error.c
FUZZ_SRC_jwt       := src/http/auth_jwt.c src/core/num.c src/core/error.c
FUZZ_SRC_order_id  := src/engine/order_id.c src/engine/keys.c src/redis/stream_id.c src/core/num.c \
                      src/core/error.c
FUZZ_SRC_order_event := src/orders/order_event.c src/engine/order_id.c src/engine/keys.c \
                        src/redis/stream_id.c src/core/num.c src/core/error.c
FUZZ_SRC_redis_settings := src/redis/redis_settings.c src/core/num.c src/core/error.c
FUZZ_LIBS_redis_settings := -lhiredis
FUZZ_SRC_challenge := src/engine/challenge.c src/core/codes.c src/core/num.c src/core/error.c
FUZZ_SRC_captcha   := src/http/captcha.c src/core/error.c
FUZZ_SRC_event_batch := src/store/event_batch.c
FUZZ_LIBS_http_body := -ljansson -lcrypto
FUZZ_LIBS_challenge := -lcrypto
FUZZ_LIBS_captcha   := -ljansson
FUZZ_LIBS_purchase_body := -ljansson -lcrypto
FUZZ_LIBS_jwt       := -lcrypto -ljansson
FUZZ_LIBS_auth      := -lcrypto
FUZZ_LIBS_config    := -lcrypto -ljansson
# picohttpparser, as libh2o exports it
FUZZ_LIBS_http1_parse := -lh2o-evloop
FUZZ_BINS := $(addprefix $(FUZZ_BUILD)/fuzz_,$(FUZZ_TARGETS))

.SECONDEXPANSION:
$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $$(FUZZ_SRC_$$*) $$(wildcard src/*/*.h) \
                      $(GEN_H)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) $$(pkg-config --cflags jansson hiredis) -o $@ $< $(FUZZ_SRC_$*) \
	    $(FUZZ_LIBS_$*)

fuzz: $(FUZZ_BINS)
	@sh scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_S) $(FUZZ_TARGETS)

fuzz-smoke:
	@if command -v $(FUZZ_CC) >/dev/null 2>&1; then \
	    $(MAKE) --no-print-directory $(FUZZ_BINS) && \
	    sh scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SMOKE_S) $(FUZZ_TARGETS); \
	else echo "fuzz: $(FUZZ_CC) not installed, fuzzing skipped"; fi

clean:
	rm -rf build build-san build-tsan build-fuzz build-deb

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
