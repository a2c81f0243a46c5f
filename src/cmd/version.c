/* version.c - the release this binary is: the VERSION file's, passed by
 * the Makefile (one object, so only it is rebuilt when VERSION changes). */
#include "cmd/commands.h"

#ifndef SK_VERSION
#define SK_VERSION "unknown"
#endif

const char *sk_version(void)
{
    return SK_VERSION;
}
