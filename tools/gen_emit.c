/* gen_emit.c - see gen_emit.h. */
#include "tools/gen_emit.h"

#include <stdlib.h>

_Noreturn void gen_die(const char *prog, const char *what, const char *arg)
{
    fprintf(stderr, "%s: %s: %s\n", prog, what, arg);
    exit(1);
}

void gen_emit_literal(FILE *out, const char *s, size_t n, int split_lines)
{
    fputs("    \"", out);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\\' || c == '"')
            fprintf(out, "\\%c", c);
        else if (c == '\n')
            fputs(split_lines ? "\\n\"\n    \"" : "\\n", out);
        else if (c == '\t')
            fputs("\\t", out);
        else if (c == '?')
            fputs("\\?", out);
        else if (c < 32 || c > 126)
            fprintf(out, "\\%03o", c);
        else
            fputc(c, out);
    }
    fputs("\"\n", out);
}
