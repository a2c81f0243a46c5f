/* gen_scripts.c - build-time generator: embeds lua/NAME.lua into the binary.
 *
 * Usage: gen_scripts OUT.c OUT.h LUA_DIR script.lua...
 * Every `RC.NAME` in a script is replaced by that code's number from
 * src/core/codes.def (the single source of result codes), and a line
 * `--#include "lib/x.lua"` is replaced by that file (once per script,
 * however many of its libraries include it), so shared Lua code is
 * written once. The same texts are also emitted as one Redis Functions
 * library (`#!lua name=seckill_<hash>`, each script the body of a function
 * `sk_<name>_<hash>(KEYS, ARGV)`), for FUNCTION LOAD and FCALL. A script
 * with a line `-- flags: no-writes` (it only reads) is registered with
 * that flag, so Redis runs it while out of memory (maxmemory) as it runs
 * any read; every other function is refused then, before it runs. Runs on
 * the build host only; never linked into seckill. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/gen_emit.h"

/* Value of result code `name` (n bytes) from codes.def, or -1. */
static int rc_value(const char *name, size_t n)
{
#define SK_RC(nm, val, wire, http, msg)                                                            \
    if (strlen(#nm) == n && memcmp(#nm, name, n) == 0) return val;
#include "../src/core/codes.def"
#undef SK_RC
    return -1;
}

/* Replaces every RC.NAME token by its number from codes.def: a literal
 * costs nothing at run time, where a table built on every call would. */
static void substitute_codes(const char *path, char *line, size_t cap)
{
    char out[8192];
    size_t o = 0;
    for (const char *p = line; *p && o + 16 < sizeof out;) {
        if (strncmp(p, "RC.", 3) == 0 &&
            (p == line || !(isalnum((unsigned char)p[-1]) || p[-1] == '_'))) {
            const char *q = p + 3;
            while (isalnum((unsigned char)*q) || *q == '_')
                q++;
            int v = rc_value(p + 3, (size_t)(q - p - 3));
            if (v < 0) {
                fprintf(stderr, "gen_scripts: %s: unknown result code %.*s\n", path, (int)(q - p),
                        p);
                exit(1);
            }
            o += (size_t)snprintf(out + o, sizeof out - o, "%d", v);
            p = q;
            continue;
        }
        out[o++] = *p++;
    }
    out[o] = 0;
    if (o >= cap) gen_die("gen_scripts", "line too long", path);
    memcpy(line, out, o + 1);
}

/* The libraries already inlined into the script being expanded: a library
 * that includes another (lib/fence.lua includes lib/time.lua) and a script
 * that includes both get it once. */
#define MAX_LIBS 32
static char included[MAX_LIBS][1024];
static int n_included;

/* 1 the first time name is included into the current script. */
static int first_include(const char *path, const char *name)
{
    for (int i = 0; i < n_included; i++)
        if (strcmp(included[i], name) == 0) return 0;
    if (n_included == MAX_LIBS || strlen(name) >= sizeof included[0])
        gen_die("gen_scripts", "too many or too long includes", path);
    strcpy(included[n_included++], name);
    return 1;
}

/* Writes the script at path into out as plain text: includes inlined (each
 * library once), result codes substituted. */
static void expand_file(FILE *out, const char *dir, const char *path, int depth)
{
    if (depth > 4) gen_die("gen_scripts", "include nesting too deep", path);
    FILE *in = fopen(path, "r");
    if (!in) gen_die("gen_scripts", "cannot open", path);
    char line[4096];
    while (fgets(line, sizeof line, in)) {
        const char *inc = "--#include \"";
        if (strncmp(line, inc, strlen(inc)) == 0) {
            char *name = line + strlen(inc);
            char *q = strchr(name, '"');
            if (!q) gen_die("gen_scripts", "bad include line", path);
            *q = 0;
            if (!first_include(path, name)) continue;
            char sub[1024];
            snprintf(sub, sizeof sub, "%s/%s", dir, name);
            expand_file(out, dir, sub, depth + 1);
            continue;
        }
        substitute_codes(path, line, sizeof line);
        fputs(line, out);
    }
    fclose(in);
}

/* text as C string literal lines, one per line of the text. */
static void emit_c_text(FILE *out, const char *text)
{
    while (*text) {
        const char *nl = strchr(text, '\n');
        size_t n = nl ? (size_t)(nl - text + 1) : strlen(text);
        gen_emit_literal(out, text, n, 0);
        text += n;
    }
}

/* FNV-1a, 64 bits: names the library's version (no crypto on the build host). */
static unsigned long long fnv1a(unsigned long long h, const char *s)
{
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

static void script_name(const char *path, char *name, size_t cap)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strcspn(base, ".");
    if (n >= cap) n = cap - 1;
    memcpy(name, base, n);
    name[n] = 0;
}

/* 1 when the file at path holds exactly buf (len bytes). */
static int same_content(const char *path, const char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int same = 1;
    size_t i = 0;
    for (int ch; (ch = fgetc(f)) != EOF; i++)
        if (i >= len || (char)ch != buf[i]) {
            same = 0;
            break;
        }
    fclose(f);
    return same && i == len;
}

int main(int argc, char **argv)
{
    if (argc < 5) gen_die("gen_scripts", "usage", "gen_scripts OUT.c OUT.h LUA_DIR script.lua...");
    /* The header is built in memory and written only when it changed: it
     * names the scripts, not their text, so a .lua edit leaves it (and
     * every object that includes it) untouched and rebuilds only the
     * generated .c. */
    char *hbuf = NULL;
    size_t hlen = 0;
    FILE *c = fopen(argv[1], "w"), *h = open_memstream(&hbuf, &hlen);
    if (!c || !h) gen_die("gen_scripts", "cannot write", argv[1]);
    const char *dir = argv[3];
    int n = argc - 4;

    fputs("/* generated by tools/gen_scripts.c from lua/ and src/core/codes.def: do not edit */\n"
          "#ifndef SK_SCRIPTS_GEN_H\n#define SK_SCRIPTS_GEN_H\nenum sk_script_id {\n",
          h);
    for (int i = 0; i < n; i++) {
        char name[256];
        script_name(argv[4 + i], name, sizeof name);
        fputs("    SK_SCRIPT_", h);
        for (char *p = name; *p; p++)
            fputc(toupper((unsigned char)*p), h);
        fputs(",\n", h);
    }
    fprintf(h, "    SK_SCRIPT_COUNT\n};\n"
               "struct sk_script_src { const char *name; const char *text; };\n"
               "extern const struct sk_script_src sk_script_sources[SK_SCRIPT_COUNT];\n"
               "/* the same scripts as one Redis Functions library (FUNCTION LOAD), and\n"
               " * each script's function name in it (FCALL) */\n"
               "extern const char sk_script_library[];\n"
               "extern const char sk_script_library_name[];\n"
               "extern const char *const sk_script_fnames[SK_SCRIPT_COUNT];\n"
               "#endif\n");

    /* Each script expanded once, then emitted twice: as its own text (EVAL,
     * EVALSHA) and wrapped as a function of one library (FUNCTION LOAD,
     * FCALL) named after a hash of every text, so two builds with
     * different scripts never call each other's functions. */
    char **texts = calloc((size_t)n, sizeof *texts);
    if (!texts) gen_die("gen_scripts", "out of memory", argv[1]);
    unsigned long long hash = 14695981039346656037ULL;
    for (int i = 0; i < n; i++) {
        size_t tl = 0;
        FILE *m = open_memstream(&texts[i], &tl);
        if (!m) gen_die("gen_scripts", "out of memory", argv[4 + i]);
        n_included = 0;
        expand_file(m, dir, argv[4 + i], 0);
        if (fclose(m)) gen_die("gen_scripts", "out of memory", argv[4 + i]);
        hash = fnv1a(hash, texts[i]);
    }
    char tag[16];
    snprintf(tag, sizeof tag, "%012llx", hash & 0xffffffffffffULL);

    fputs("/* generated by tools/gen_scripts.c from lua/ and src/core/codes.def: do not edit */\n"
          "#include \"scripts_gen.h\"\n"
          "const struct sk_script_src sk_script_sources[SK_SCRIPT_COUNT] = {\n",
          c);
    for (int i = 0; i < n; i++) {
        char name[256];
        script_name(argv[4 + i], name, sizeof name);
        fprintf(c, "  {\"%s\",\n", name);
        emit_c_text(c, texts[i]);
        fputs("  },\n", c);
    }
    fputs("};\n", c);
    fprintf(c, "const char *const sk_script_fnames[SK_SCRIPT_COUNT] = {\n");
    for (int i = 0; i < n; i++) {
        char name[256];
        script_name(argv[4 + i], name, sizeof name);
        fprintf(c, "  \"sk_%s_%s\",\n", name, tag);
    }
    fprintf(c, "};\nconst char sk_script_library_name[] = \"seckill_%s\";\n", tag);
    fprintf(c, "const char sk_script_library[] =\n    \"#!lua name=seckill_%s\\n\"\n", tag);
    for (int i = 0; i < n; i++) {
        char name[256], head[400];
        script_name(argv[4 + i], name, sizeof name);
        int ro = strstr(texts[i], "\n-- flags: no-writes\n") != NULL ||
                 !strncmp(texts[i], "-- flags: no-writes\n", 20);
        if (ro)
            snprintf(head, sizeof head,
                     "redis.register_function{function_name='sk_%s_%s', "
                     "callback=function(KEYS, ARGV)\n",
                     name, tag);
        else
            snprintf(head, sizeof head,
                     "redis.register_function('sk_%s_%s', function(KEYS, ARGV)\n", name, tag);
        gen_emit_literal(c, head, strlen(head), 0);
        emit_c_text(c, texts[i]);
        size_t tl = strlen(texts[i]);
        const char *nl = tl && texts[i][tl - 1] == '\n' ? "" : "\n";
        char tail[64];
        snprintf(tail, sizeof tail, "%s%s", nl, ro ? "end, flags={'no-writes'}}\n" : "end)\n");
        gen_emit_literal(c, tail, strlen(tail), 0);
        free(texts[i]);
    }
    fputs(";\n", c);
    free(texts);
    if (fclose(c) || fclose(h)) gen_die("gen_scripts", "write failed", argv[1]);
    if (!same_content(argv[2], hbuf, hlen)) {
        FILE *hf = fopen(argv[2], "w");
        if (!hf || fwrite(hbuf, 1, hlen, hf) != hlen || fclose(hf))
            gen_die("gen_scripts", "cannot write", argv[2]);
    }
    free(hbuf);
    return 0;
}
