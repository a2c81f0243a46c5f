/* gen_emit.h - what the build's generators (gen_scripts, gen_web) share:
 * bytes written as C string literals, and dying with a reason. */
#ifndef SK_GEN_EMIT_H
#define SK_GEN_EMIT_H
#include <stddef.h>
#include <stdio.h>

/* Prints "<prog>: <what>: <arg>" on stderr and exits 1. */
_Noreturn void gen_die(const char *prog, const char *what, const char *arg);

/* s[0..n) as one or more indented C string literal lines: quotes,
 * backslashes, '?' (no trigraphs) and bytes outside printable ASCII
 * escaped. split_lines: a newline ends the literal line (the text stays
 * readable in the generated file); else it is written as \n inline. */
void gen_emit_literal(FILE *out, const char *s, size_t n, int split_lines);

#endif
