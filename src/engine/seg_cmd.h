/* seg_cmd.h - one command of a segment protocol step (seg_settle.h,
 * seg_preheat.h), as the protocol builds it and either Redis client sends
 * it: a plain command (argv) or an embedded script (keys, then args). */
#ifndef SK_SEG_CMD_H
#define SK_SEG_CMD_H

#include "engine/keys.h"
#include "scripts_gen.h"

#define SK_SEG_CMD_PLAIN (-1)
/* the base HSET: 11 pairs and the command, key; the preheat script's
 * SK_PREHEAT_NKEYS keys and SK_PREHEAT_ARGC args (seg_preheat.c checks) */
#define SK_SEG_CMD_MAXARG 25

struct sk_seg_cmd {
    int script;       /* SK_SEG_CMD_PLAIN, or an enum sk_script_id */
    int argc;         /* plain: argv[0..argc) is the command */
    int nkeys, nargs; /* script: argv[0..nkeys) keys, argv[nkeys..nkeys+nargs) args */
    const char *argv[SK_SEG_CMD_MAXARG];
    char num[SK_SEG_CMD_MAXARG][24]; /* numbers the argv points at */
    struct sk_keys k;                /* keys the argv points at */
};

#endif
