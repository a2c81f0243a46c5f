/* gen_scripts.c - build-time generator: embeds lua/NAME.lua into the binary.
 *
 * Usage: gen_scripts OUT.c OUT.h LUA_DIR script.lua...
 * Every `RC.NAME` in a script is replaced by that code's number from
 * src/core/codes.def (the single source of result codes), every
 * `LIST.name` by its position from src/engine/script_pos.def (which the
 * header gives C as SK_<LIST>_<NAME>: ARGV, KEYS and meta positions are
 * written once for both; an A_, K_ or M_ name of no list stops the
 * build), every `NAME.X` by the quoted text of src/engine/script_names.def
 * (SK_NAME_X in the header), and a line
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
#include <strings.h>

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

/* The names in Redis scripts and C share (src/engine/script_names.def). */
static const struct name_row {
    const char *name, *text;
} name_rows[] = {
#define SK_NAME(nm, text) {#nm, text},
#include "../src/engine/script_names.def"
#undef SK_NAME
};
#define N_NAMES (sizeof name_rows / sizeof name_rows[0])

/* The text of name `name` (n bytes), or NULL. */
static const char *name_text(const char *name, size_t n)
{
    for (size_t i = 0; i < N_NAMES; i++)
        if (strlen(name_rows[i].name) == n && memcmp(name_rows[i].name, name, n) == 0)
            return name_rows[i].text;
    return NULL;
}

/* The positions scripts and C share (src/engine/script_pos.def): each
 * list's rows, in order. */
enum { ROW_LIST, ROW_POS, ROW_SPAN };
static const struct pos_row {
    int kind;
    const char *name;
    int base;        /* ROW_LIST: 1 (ARGV, KEYS, an HMGET reply) or 0 (offsets) */
    const char *sub; /* ROW_SPAN: the list whose positions it takes */
} pos_rows[] = {
#define SK_LIST(list, base) {ROW_LIST, #list, base, NULL},
#define SK_POS(name) {ROW_POS, #name, 0, NULL},
#define SK_SPAN(name, sub) {ROW_SPAN, #name, 0, #sub},
#include "../src/engine/script_pos.def"
#undef SK_LIST
#undef SK_POS
#undef SK_SPAN
};
#define N_ROWS (sizeof pos_rows / sizeof pos_rows[0])

/* Each row's offset in its list (from 0), and each list's length (on its
 * ROW_LIST row), computed once. */
static int row_off[N_ROWS], list_len[N_ROWS];

/* The ROW_LIST row of list `name` (n bytes), or -1. */
static int list_row(const char *name, size_t n)
{
    for (size_t i = 0; i < N_ROWS; i++)
        if (pos_rows[i].kind == ROW_LIST && strlen(pos_rows[i].name) == n &&
            memcmp(pos_rows[i].name, name, n) == 0)
            return (int)i;
    return -1;
}

static void layout_positions(void)
{
    int list = -1;
    for (size_t i = 0; i < N_ROWS; i++) {
        const struct pos_row *r = &pos_rows[i];
        if (r->kind == ROW_LIST) {
            if (list_row(r->name, strlen(r->name)) != (int)i || (r->base != 0 && r->base != 1))
                gen_die("gen_scripts", "script_pos.def: list defined twice or bad base", r->name);
            list = (int)i;
            continue;
        }
        if (list < 0) gen_die("gen_scripts", "script_pos.def: a position before any list", r->name);
        for (size_t j = (size_t)list + 1; j < i; j++)
            if (strcmp(pos_rows[j].name, r->name) == 0)
                gen_die("gen_scripts", "script_pos.def: a name twice in one list", r->name);
        /* what the list itself is called by (LIST.N, SK_<LIST>_N, ...) */
        if (!strcasecmp(r->name, "n") || !strcasecmp(r->name, "fields") ||
            !strcasecmp(r->name, "each"))
            gen_die("gen_scripts", "script_pos.def: a position named as the list's own", r->name);
        int width = 1;
        if (r->kind == ROW_SPAN) {
            int sub = list_row(r->sub, strlen(r->sub));
            if (sub < 0 || sub >= list) gen_die("gen_scripts", "script_pos.def: span of", r->sub);
            width = list_len[sub];
        }
        row_off[i] = list_len[list];
        list_len[list] += width;
    }
}

/* Writes what token LIST.field stands for into out (cap bytes): the
 * position, the length (N) or the field names quoted (FIELDS). */
static void position_text(const char *path, int list, const char *f, size_t n, char *out,
                          size_t cap)
{
    const struct pos_row *l = &pos_rows[list];
    if (n == 1 && f[0] == 'N') {
        snprintf(out, cap, "%d", list_len[list]);
        return;
    }
    size_t o = 0;
    int fields = n == 6 && memcmp(f, "FIELDS", 6) == 0;
    for (size_t i = (size_t)list + 1; i < N_ROWS && pos_rows[i].kind != ROW_LIST; i++) {
        const struct pos_row *r = &pos_rows[i];
        if (fields) {
            if (r->kind != ROW_POS) gen_die("gen_scripts", "FIELDS of a list with a span", l->name);
            o += (size_t)snprintf(out + o, cap > o ? cap - o : 0, "%s'%s'", o ? ", " : "", r->name);
        } else if (strlen(r->name) == n && memcmp(r->name, f, n) == 0) {
            snprintf(out, cap, "%d", row_off[i] + l->base);
            return;
        }
    }
    if (fields && o > 0 && o < cap) return;
    fprintf(stderr, "gen_scripts: %s: %s has no position %.*s (src/engine/script_pos.def)\n", path,
            l->name, (int)n, f);
    exit(1);
}

/* Replaces every RC.NAME token by its number from codes.def, every
 * LIST.name token of script_pos.def by the position and every NAME.X by
 * its quoted text from script_names.def: a literal costs
 * nothing at run time, where a table built on every call would. */
static void substitute_codes(const char *path, char *line, size_t cap)
{
    char out[8192];
    size_t o = 0;
    for (const char *p = line; *p && o + 600 < sizeof out;) {
        if (isupper((unsigned char)*p) &&
            (p == line || !(isalnum((unsigned char)p[-1]) || p[-1] == '_' || p[-1] == '.'))) {
            const char *q = p;
            while (isupper((unsigned char)*q) || isdigit((unsigned char)*q) || *q == '_')
                q++;
            const char *f = q + 1, *e = f;
            while (*q == '.' && (isalnum((unsigned char)*e) || *e == '_'))
                e++;
            int list = e > f ? list_row(p, (size_t)(q - p)) : -1;
            if (e > f && q - p == 2 && memcmp(p, "RC", 2) == 0) {
                int v = rc_value(f, (size_t)(e - f));
                if (v < 0) {
                    fprintf(stderr, "gen_scripts: %s: unknown result code %.*s\n", path,
                            (int)(e - p), p);
                    exit(1);
                }
                o += (size_t)snprintf(out + o, sizeof out - o, "%d", v);
                p = e;
                continue;
            }
            if (e > f && q - p == 4 && memcmp(p, "NAME", 4) == 0) {
                const char *t = name_text(f, (size_t)(e - f));
                if (!t) {
                    fprintf(stderr, "gen_scripts: %s: no %.*s in src/engine/script_names.def\n",
                            path, (int)(e - p), p);
                    exit(1);
                }
                o += (size_t)snprintf(out + o, sizeof out - o, "'%s'", t);
                p = e;
                continue;
            }
            if (list >= 0) {
                position_text(path, list, f, (size_t)(e - f), out + o, sizeof out - o);
                o += strlen(out + o);
                p = e;
                continue;
            }
            /* a list's kind of name (ARGV, KEYS, meta) that no list has: a
             * typo would reach Redis as a nil global */
            if (e > f && q - p > 2 && strchr("AKM", p[0]) && p[1] == '_') {
                fprintf(stderr, "gen_scripts: %s: no list %.*s in src/engine/script_pos.def\n",
                        path, (int)(q - p), p);
                exit(1);
            }
            while (p < q)
                out[o++] = *p++;
            continue;
        }
        out[o++] = *p++;
    }
    out[o] = 0;
    if (o >= cap) gen_die("gen_scripts", "line too long", path);
    memcpy(line, out, o + 1);
}

/* 1 when list (its ROW_LIST row) has a span: no names of its own for
 * those positions. */
static int has_span(size_t list)
{
    for (size_t i = list + 1; i < N_ROWS && pos_rows[i].kind != ROW_LIST; i++)
        if (pos_rows[i].kind != ROW_POS) return 1;
    return 0;
}

/* The list's names in order, each as fmt gives it, sep between. */
static void emit_names(FILE *h, size_t list, const char *fmt, const char *sep)
{
    for (size_t i = list + 1; i < N_ROWS && pos_rows[i].kind != ROW_LIST; i++) {
        if (i > list + 1) fputs(sep, h);
        fprintf(h, fmt, pos_rows[i].name);
    }
}

/* The positions as C names in the header: SK_<LIST>_<NAME>, an index
 * from 0 into the script's args (or offset into its group), SK_<LIST>_N;
 * for a list without a span, SK_<LIST>_FIELDS its names quoted (an HMGET's
 * fields) and SK_<LIST>_EACH(X, a) X(a, name) for each (a script's KEYS
 * from a key set: engine/keys.h, SK_KEY_OF). */
static void emit_positions(FILE *h)
{
    fputs("/* positions of src/engine/script_pos.def: indexes from 0 */\n", h);
    const char *list = "";
    for (size_t i = 0; i < N_ROWS; i++) {
        const struct pos_row *r = &pos_rows[i];
        if (r->kind == ROW_LIST) {
            list = r->name;
            fprintf(h, "#define SK_%s_N %d\n", list, list_len[i]);
            if (has_span(i)) continue;
            fprintf(h, "#define SK_%s_FIELDS ", list);
            emit_names(h, i, "\"%s\"", ", ");
            fprintf(h, "\n#define SK_%s_EACH(X, a) ", list);
            emit_names(h, i, "X(a, %s)", " ");
            fputc('\n', h);
            continue;
        }
        fprintf(h, "#define SK_%s_", list);
        for (const char *c = r->name; *c; c++)
            fputc(toupper((unsigned char)*c), h);
        fprintf(h, " %d\n", row_off[i]);
    }
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
    layout_positions();

    fputs("/* generated by tools/gen_scripts.c from lua/, src/core/codes.def and\n"
          " * src/engine/script_pos.def: do not edit */\n"
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
               "extern const char *const sk_script_fnames[SK_SCRIPT_COUNT];\n");
    emit_positions(h);
    fputs("/* names of src/engine/script_names.def */\n", h);
    for (size_t i = 0; i < N_NAMES; i++)
        fprintf(h, "#define SK_NAME_%s \"%s\"\n", name_rows[i].name, name_rows[i].text);
    fputs("#endif\n", h);

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

    fputs("/* generated by tools/gen_scripts.c from lua/, src/core/codes.def and\n"
          " * src/engine/script_pos.def: do not edit */\n"
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
