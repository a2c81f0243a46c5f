/* test_install.c - `make install` into a staging root (DESTDIR; never the
 * machine's /usr): the files land where they should, the installed binary
 * says its version, `man -l` renders both pages and seckill(1) names every
 * flag of every sub-command's --help, seckill.conf(5) and the example
 * config name every serve option, the installed binary is hardened as the
 * package's is, the installed unit passes `systemd-analyze verify` and
 * keeps its sandbox, and `make uninstall` removes what install put there. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/harness.h"

static int exists(const char *dir, const char *rel)
{
    char p[800];
    struct stat st;
    snprintf(p, sizeof p, "%s%s", dir, rel);
    return stat(p, &st) == 0;
}

/* dir/rel has these permission bits and is a directory (or not). */
static void mode_is(const char *dir, const char *rel, mode_t mode, int is_dir)
{
    char p[800];
    struct stat st;
    snprintf(p, sizeof p, "%s%s", dir, rel);
    CHECK_MSG(stat(p, &st) == 0, "%s is missing", p);
    CHECK_MSG((st.st_mode & 07777) == mode, "%s: mode %o, not %o", p,
              (unsigned)(st.st_mode & 07777), (unsigned)mode);
    CHECK_MSG((S_ISDIR(st.st_mode) != 0) == is_dir, "%s: %s a directory", p, is_dir ? "not" : "is");
}

/* Every "--flag" in text must be in man (rendered, hyphens plain). */
static void flags_in(const char *what, const char *text, const char *man)
{
    for (const char *p = text; (p = strstr(p, "--")) != NULL;) {
        const char *e = p + 2;
        while ((*e >= 'a' && *e <= 'z') || (*e >= '0' && *e <= '9') || *e == '-')
            e++;
        if (e - p > 2) {
            char flag[64], pat[80];
            snprintf(flag, sizeof flag, "%.*s", (int)(e - p), p);
            snprintf(pat, sizeof pat, "%s", flag);
            /* as a whole word: followed by a non-flag character */
            int found = 0;
            for (const char *m = man; (m = strstr(m, pat)) != NULL; m++) {
                char after = m[strlen(pat)];
                if (!((after >= 'a' && after <= 'z') || (after >= '0' && after <= '9') ||
                      after == '-')) {
                    found = 1;
                    break;
                }
            }
            CHECK_MSG(found, "%s: %s is not in its man page", what, flag);
        }
        p = e;
    }
}

/* Every flag of `bin <sub> --help` (its output says usage) is in man, and
 * each sub-command has its section there: its last word. */
static void helps_in(const char *bin, const char *const *subs, size_t n, const char *man,
                     const char *usage)
{
    static char out[1 << 16];
    char cmd[600];
    for (size_t i = 0; i < n; i++) {
        snprintf(cmd, sizeof cmd, "%s %s --help 2>&1", bin, subs[i]);
        sk_th_sh(cmd, out, sizeof out);
        CHECK_MSG(strstr(out, usage) != NULL, "%s --help: %.200s", subs[i], out);
        flags_in(subs[i], out, man);
        const char *sp = strrchr(subs[i], ' ');
        const char *last = sp ? sp + 1 : subs[i];
        CHECK_MSG(strstr(man, last) != NULL, "no section for %s", subs[i]);
    }
}

/* The installed page dest/rel rendered into out: it renders without groff
 * warnings and carries its title. */
static void man_page(const char *dest, const char *rel, const char *title, char *out, size_t cap)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "MANWIDTH=200 man --warnings -l -P cat %s%s 2>&1", dest, rel);
    CHECK_EQ(sk_th_sh(cmd, out, cap), 0);
    CHECK_MSG(strstr(out, title) && !strstr(out, "warning:"), "%s: %.3000s", rel, out);
}

/* The installed binary carries the package's hardening (dpkg-buildflags
 * hardening=+all): a GNU_RELRO segment, BIND_NOW, the stack protector's
 * symbol and FORTIFY's checked functions (not in a sanitizer build, where
 * the sanitizers check instead), read from its ELF with readelf. */
static void elf_hardened(const char *bin)
{
    static char out[1 << 20];
    char cmd[800];
    snprintf(cmd, sizeof cmd, "readelf -lW %s 2>&1", bin);
    CHECK_EQ(sk_th_sh(cmd, out, sizeof out), 0);
    CHECK_MSG(strstr(out, "GNU_RELRO") != NULL, "%s: no GNU_RELRO segment", bin);
    snprintf(cmd, sizeof cmd, "readelf -dW %s 2>&1", bin);
    CHECK_EQ(sk_th_sh(cmd, out, sizeof out), 0);
    CHECK_MSG(strstr(out, "BIND_NOW") || strstr(out, "Flags: NOW"), "%s: not BIND_NOW:\n%.2000s",
              bin, out);
    snprintf(cmd, sizeof cmd, "readelf -sW --dyn-syms %s 2>&1 | awk '{print $8}' | sort -u", bin);
    CHECK_EQ(sk_th_sh(cmd, out, sizeof out), 0);
    CHECK_MSG(strstr(out, "\n__stack_chk_fail@") || strstr(out, "\n__stack_chk_fail\n"),
              "%s: no stack protector", bin);
    if (strstr(out, "\n__asan_init") || strstr(out, "\n__tsan_init")) return;
    int fortified = 0;
    static const char *const chk[] = {"\n__snprintf_chk", "\n__memcpy_chk", "\n__fprintf_chk",
                                      "\n__vsnprintf_chk", "\n__strcpy_chk"};
    for (size_t i = 0; i < sizeof chk / sizeof chk[0]; i++)
        fortified += strstr(out, chk[i]) != NULL;
    CHECK_MSG(fortified >= 2, "%s: not built with _FORTIFY_SOURCE (%d checked functions)", bin,
              fortified);
}

SK_TEST_T(install_stages_every_file_man_pages_name_every_flag_unit_verifies, 180)
{
    char dest[400], cmd[2000];
    static char out[1 << 18], man[1 << 18];
    snprintf(dest, sizeof dest, "%s/stage", sk_th_tmpdir());
    snprintf(cmd, sizeof cmd,
             "make -s -C %s install-only install-bench DESTDIR=%s PREFIX=/usr INSTALL_BIN=%s "
             "INSTALL_BENCH_BIN=%s 2>&1",
             sk_th_source_root(), dest, sk_th_seckill_bin(), sk_th_bench_bin());
    CHECK_MSG(sk_th_sh(cmd, out, sizeof out) == 0, "%s\n%s", cmd, out);
    /* staged: the modes are set, the owners are the target system's, and
     * the exact commands are printed */
    static const char *const said[] = {
        "install: staged in ",
        "  getent group seckill >/dev/null || groupadd --system seckill\n",
        "  getent passwd seckill >/dev/null || useradd --system --gid seckill --home-dir "
        "/var/lib/seckill --no-create-home --shell /usr/sbin/nologin",
        "  install -d -o seckill -g seckill -m 0750 /var/lib/seckill\n",
        "  chown root:seckill /etc/seckill /etc/seckill/seckill.conf\n",
        "  chmod 0750 /etc/seckill\n",
        "  chmod 0640 /etc/seckill/seckill.conf\n"};
    for (size_t i = 0; i < sizeof said / sizeof said[0]; i++)
        CHECK_MSG(strstr(out, said[i]) != NULL, "install did not say \"%s\":\n%s", said[i], out);
    mode_is(dest, "/etc/seckill/seckill.conf", 0640, 0);
    mode_is(dest, "/etc/seckill", 0750, 1);
    mode_is(dest, "/var/lib/seckill", 0750, 1);
    static const char *const files[] = {"/usr/bin/seckill",
                                        "/usr/share/man/man1/seckill.1",
                                        "/usr/bin/seckill-bench",
                                        "/usr/share/man/man1/seckill-bench.1",
                                        "/usr/share/man/man5/seckill.conf.5",
                                        "/etc/seckill/seckill.conf",
                                        "/usr/lib/systemd/system/seckill.service",
                                        "/usr/share/seckill/prometheus/seckill-rules.yml",
                                        "/usr/share/seckill/openapi.yaml"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        CHECK_MSG(exists(dest, files[i]), "%s was not installed", files[i]);
    /* the installed binary and its version */
    char ver[64] = "";
    snprintf(cmd, sizeof cmd, "cat %s/VERSION", sk_th_source_root());
    sk_th_sh(cmd, ver, sizeof ver);
    ver[strcspn(ver, "\n")] = 0;
    snprintf(cmd, sizeof cmd, "%s/usr/bin/seckill --version", dest);
    CHECK_EQ(sk_th_sh(cmd, out, sizeof out), 0);
    char want[96];
    snprintf(want, sizeof want, "seckill %s\n", ver);
    CHECK_STR(out, want);
    char installed[600];
    snprintf(installed, sizeof installed, "%s/usr/bin/seckill", dest);
    elf_hardened(installed);

    /* the pages render, without groff warnings */
    man_page(dest, "/usr/share/man/man1/seckill.1", "SECKILL(1)", man, sizeof man);
    snprintf(want, sizeof want, "seckill %s", ver);
    CHECK_MSG(strstr(man, want) != NULL, "the page does not carry version %s", ver);
    /* every flag of every --help */
    static const char *const helps[] = {"serve",
                                        "worker",
                                        "reconcile",
                                        "load",
                                        "demo",
                                        "config",
                                        "activity create",
                                        "activity preheat",
                                        "activity open",
                                        "activity close",
                                        "activity show",
                                        "activity list",
                                        "activity delete",
                                        "activity recover",
                                        "activity page",
                                        "events list",
                                        "events replay"};
    helps_in(sk_th_seckill_bin(), helps, sizeof helps / sizeof helps[0], man, "usage");
    /* `seckill --help` and the page name every command and every store */
    snprintf(cmd, sizeof cmd, "%s --help 2>&1", sk_th_seckill_bin());
    CHECK_EQ(sk_th_sh(cmd, out, sizeof out), 0);
    static const char *const words[] = {
        "serve",   "worker", "activity", "reconcile",   "config",   "load",    "demo",
        "recover", "page",   "sqlite:",  "postgres://", "mysql://", "MariaDB", "--check"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        CHECK_MSG(strstr(out, words[i]) != NULL, "seckill --help does not name %s:\n%s", words[i],
                  out);
        CHECK_MSG(strstr(man, words[i]) != NULL, "seckill(1) does not name %s", words[i]);
    }
    /* the benchmarks: their own binary and page, every flag of each */
    static char bman[1 << 16];
    man_page(dest, "/usr/share/man/man1/seckill-bench.1", "SECKILL-BENCH(1)", bman, sizeof bman);
    snprintf(cmd, sizeof cmd, "%s/usr/bin/seckill-bench --version", dest);
    CHECK_EQ(sk_th_sh(cmd, out, sizeof out), 0);
    snprintf(want, sizeof want, "seckill-bench %s\n", ver);
    CHECK_STR(out, want);
    static const char *const benches[] = {"admission", "cluster", "http",      "scrape",
                                          "persist",   "recover", "strategies"};
    helps_in(sk_th_bench_bin(), benches, sizeof benches / sizeof benches[0], bman,
             "usage: seckill-bench");
    static char conf5[1 << 16], example[1 << 16];
    man_page(dest, "/usr/share/man/man5/seckill.conf.5", "SECKILL.CONF(5)", conf5, sizeof conf5);
    snprintf(cmd, sizeof cmd, "cat %s/etc/seckill/seckill.conf", dest);
    sk_th_sh(cmd, example, sizeof example);
    /* every serve option, as a key, in both */
    snprintf(cmd, sizeof cmd, "%s serve --help 2>&1", sk_th_seckill_bin());
    sk_th_sh(cmd, out, sizeof out);
    for (const char *p = out; (p = strstr(p, "--")) != NULL;) {
        const char *e = p + 2;
        char key[64];
        size_t k = 0;
        while (((*e >= 'a' && *e <= 'z') || (*e >= '0' && *e <= '9') || *e == '-') && k < 63)
            key[k++] = *e == '-' ? '_' : *e, e++;
        key[k] = 0;
        p = e;
        /* --config and --check are serve's own, not keys */
        if (k == 0 || !strcmp(key, "config") || !strcmp(key, "check") || !strcmp(key, "help"))
            continue;
        CHECK_MSG(strstr(conf5, key) != NULL, "%s is not in seckill.conf(5)", key);
        CHECK_MSG(strstr(example, key) != NULL, "%s is not in the example config", key);
    }
    /* the example config loads as it is installed: the only complaint is
     * the bad flag given after it (the file is read first) */
    snprintf(cmd, sizeof cmd, "%s serve --config %s/etc/seckill/seckill.conf --processes 0 2>&1",
             sk_th_seckill_bin(), dest);
    CHECK_EQ(sk_th_sh(cmd, out, sizeof out) >> 8, 2);
    CHECK_MSG(strstr(out, "processes: must be") && !strstr(out, "line "), "%s", out);

    /* the unit, with its ExecStart pointing into the staging root */
    snprintf(
        cmd, sizeof cmd,
        "sed 's|/usr/bin/seckill|%s/usr/bin/seckill|' %s/usr/lib/systemd/system/seckill.service "
        "> %s/seckill.service && systemd-analyze verify --man=no %s/seckill.service 2>&1",
        dest, dest, dest, dest);
    CHECK_MSG(sk_th_sh(cmd, out, sizeof out) == 0 && out[0] == 0, "systemd-analyze verify:\n%s",
              out);
    snprintf(cmd, sizeof cmd,
             "grep -E '^(Type|NotifyAccess|WatchdogSec|ExecReload)=' "
             "%s/usr/lib/systemd/system/seckill.service",
             dest);
    sk_th_sh(cmd, out, sizeof out);
    CHECK_MSG(strstr(out, "Type=notify\n") && strstr(out, "WatchdogSec=") &&
                  strstr(out, "ExecReload=/bin/kill -HUP $MAINPID"),
              "%s", out);
    /* the sandbox, and systemd's own score of it (docs/security.md) */
    snprintf(cmd, sizeof cmd,
             "grep -E '^(SystemCallFilter|ProtectProc|ProcSubset|RemoveIPC|PrivateUsers|"
             "LoadCredential)=' %s/usr/lib/systemd/system/seckill.service",
             dest);
    sk_th_sh(cmd, out, sizeof out);
    CHECK_MSG(strstr(out, "SystemCallFilter=@system-service\n") &&
                  strstr(out, "ProtectProc=invisible\n") && strstr(out, "ProcSubset=pid\n") &&
                  strstr(out, "RemoveIPC=yes\n") && strstr(out, "PrivateUsers=yes\n") &&
                  strstr(out, "LoadCredential=admin_token:/etc/seckill/admin_token\n"),
              "%s", out);
    snprintf(cmd, sizeof cmd,
             "systemd-analyze security --offline=true %s/seckill.service 2>&1 | tail -1", dest);
    sk_th_sh(cmd, out, sizeof out);
    const char *lvl = strstr(out, "exposure level for seckill.service: ");
    CHECK_MSG(lvl != NULL, "%s", out);
    double exposure = atof(lvl + strlen("exposure level for seckill.service: "));
    CHECK_MSG(exposure > 0 && exposure <= 1.5, "exposure %.1f (was 3.2): %s", exposure, out);

    /* install again: an edited config stays */
    snprintf(cmd, sizeof cmd, "echo 'log_level = warn' >> %s/etc/seckill/seckill.conf", dest);
    CHECK_EQ(sk_th_sh(cmd, out, sizeof out), 0);
    snprintf(cmd, sizeof cmd,
             "make -s -C %s install-only DESTDIR=%s PREFIX=/usr INSTALL_BIN=%s 2>&1 && "
             "make -s -C %s uninstall DESTDIR=%s PREFIX=/usr 2>&1",
             sk_th_source_root(), dest, sk_th_seckill_bin(), sk_th_source_root(), dest);
    CHECK_MSG(sk_th_sh(cmd, out, sizeof out) == 0, "%s", out);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        if (strcmp(files[i], "/etc/seckill/seckill.conf"))
            CHECK_MSG(!exists(dest, files[i]), "%s was not uninstalled", files[i]);
    CHECK_MSG(exists(dest, "/etc/seckill/seckill.conf"), "uninstall removed an edited config");
}

/* make install into a system image's root (a DESTDIR with etc/passwd, as
 * an image build has): the user and group are made in it, never on this
 * machine, and the state directory and the config get their owners. */
SK_TEST_T(install_into_an_image_makes_the_seckill_user_dirs_and_modes, 120)
{
    char img[400], cmd[2000];
    static char out[1 << 16], host_before[1 << 16], host_after[1 << 16];
    snprintf(img, sizeof img, "%s/image", sk_th_tmpdir());
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/etc && cp /etc/passwd /etc/group /etc/shadow /etc/gshadow %s/etc/ && "
             "! grep -q '^seckill:' %s/etc/passwd",
             img, img, img);
    CHECK_MSG(sk_th_sh(cmd, out, sizeof out) == 0, "cannot make the image (or it has seckill)");
    sk_th_sh("cat /etc/passwd /etc/group", host_before, sizeof host_before);
    snprintf(cmd, sizeof cmd,
             "make -s -C %s install-only DESTDIR=%s PREFIX=/usr INSTALL_BIN=%s 2>&1",
             sk_th_source_root(), img, sk_th_seckill_bin());
    CHECK_MSG(sk_th_sh(cmd, out, sizeof out) == 0, "%s\n%s", cmd, out);
    sk_th_sh("cat /etc/passwd /etc/group", host_after, sizeof host_after);
    CHECK_MSG(!strcmp(host_before, host_after), "make install changed this machine's users");
    /* a system user with no login, its home the state directory */
    char line[400], path[600];
    snprintf(cmd, sizeof cmd, "grep '^seckill:' %s/etc/passwd", img);
    CHECK_EQ(sk_th_sh(cmd, line, sizeof line), 0);
    unsigned uid, gid;
    char rest[300];
    CHECK_MSG(sscanf(line, "seckill:x:%u:%u:%299[^\n]", &uid, &gid, rest) == 3, "%s", line);
    CHECK_MSG(uid > 0 && uid < 1000, "uid %u is not a system user's", uid);
    CHECK_MSG(strstr(rest, ":/var/lib/seckill:/usr/sbin/nologin") != NULL, "%s", line);
    snprintf(cmd, sizeof cmd, "grep '^seckill:x:%u:' %s/etc/group", gid, img);
    CHECK_MSG(sk_th_sh(cmd, line, sizeof line) == 0, "no group seckill with gid %u", gid);
    struct stat st;
    snprintf(path, sizeof path, "%s/var/lib/seckill", img);
    CHECK_EQ(stat(path, &st), 0);
    CHECK(S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0750 && st.st_uid == uid &&
          st.st_gid == gid);
    snprintf(path, sizeof path, "%s/etc/seckill/seckill.conf", img);
    CHECK_EQ(stat(path, &st), 0);
    CHECK_MSG((st.st_mode & 07777) == 0640 && st.st_uid == 0 && st.st_gid == gid,
              "seckill.conf: mode %o, owner %u:%u", (unsigned)(st.st_mode & 07777),
              (unsigned)st.st_uid, (unsigned)st.st_gid);
    snprintf(path, sizeof path, "%s/etc/seckill", img);
    CHECK_EQ(stat(path, &st), 0);
    CHECK((st.st_mode & 07777) == 0750 && st.st_uid == 0 && st.st_gid == gid);
    /* a second install makes no second user */
    snprintf(cmd, sizeof cmd,
             "make -s -C %s install-only DESTDIR=%s PREFIX=/usr INSTALL_BIN=%s >/dev/null 2>&1 && "
             "grep -c '^seckill:' %s/etc/passwd",
             sk_th_source_root(), img, sk_th_seckill_bin(), img);
    CHECK_EQ(sk_th_sh(cmd, out, sizeof out), 0);
    CHECK_STR(out, "1\n");
}

/* Not root and no DESTDIR: nothing is made outside what make install
 * wrote; the modes of its files are set and the commands to run printed. */
SK_TEST(install_not_as_root_prints_what_to_run)
{
    char dir[400], cmd[4800];
    static char out[8192];
    snprintf(dir, sizeof dir, "%s", sk_th_tmpdir());
    /* `id -u` says 1000: the script runs as a user would */
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/bin %s/etc/seckill && printf '#!/bin/sh\\necho 1000\\n' > %s/bin/id && "
             "chmod 755 %s/bin/id && echo 'db = sqlite:x' > %s/etc/seckill/seckill.conf && "
             "chmod 644 %s/etc/seckill/seckill.conf && "
             "PATH=%s/bin:$PATH sh %s/scripts/install-user.sh '' %s/etc %s/state auto 2>&1",
             dir, dir, dir, dir, dir, dir, dir, sk_th_source_root(), dir, dir);
    CHECK_MSG(sk_th_sh(cmd, out, sizeof out) == 0, "%s", out);
    CHECK_MSG(strstr(out, "install: not root; run as root:\n") != NULL, "%s", out);
    char want[600];
    snprintf(want, sizeof want, "  install -d -o seckill -g seckill -m 0750 %s/state\n", dir);
    CHECK_MSG(strstr(out, want) != NULL, "%s", out);
    snprintf(want, sizeof want, "  chmod 0640 %s/etc/seckill/seckill.conf\n", dir);
    CHECK_MSG(strstr(out, want) != NULL, "%s", out);
    snprintf(want, sizeof want, "%s/state", dir);
    CHECK_MSG(!exists("", want), "the state directory was made by a non-root install");
    mode_is(dir, "/etc/seckill/seckill.conf", 0640, 0);
    /* INSTALL_USER=no (the Debian package's postinst does it): nothing */
    snprintf(cmd, sizeof cmd, "sh %s/scripts/install-user.sh '' %s/etc %s/state no 2>&1",
             sk_th_source_root(), dir, dir);
    CHECK_EQ(sk_th_sh(cmd, out, sizeof out), 0);
    CHECK_STR(out, "");
}

/* The license, and the package's copyright file saying the same. */
SK_TEST(install_license_is_bsd_2_clause_in_the_tree_and_the_package)
{
    char cmd[800];
    static char out[8192];
    snprintf(cmd, sizeof cmd, "cat %s/LICENSE", sk_th_source_root());
    CHECK_EQ(sk_th_sh(cmd, out, sizeof out), 0);
    CHECK(strstr(out, "BSD 2-Clause License") && strstr(out, "the seckill authors") &&
          strstr(out, "Redistributions in binary form must reproduce"));
    snprintf(cmd, sizeof cmd, "cat %s/debian/copyright", sk_th_source_root());
    CHECK_EQ(sk_th_sh(cmd, out, sizeof out), 0);
    CHECK(strstr(out, "License: BSD-2-Clause") && strstr(out, "the seckill authors") &&
          !strstr(out, "No license"));
}
