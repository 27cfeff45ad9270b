/* check.h: CHECK(cond, fmt, ...) prints "FAIL file:line: ..." when cond
 * is false and remembers the failure in failed, the test program's exit
 * status. */
#ifndef CHECK_H
#define CHECK_H

#include <stdio.h>

static int failed;

#define CHECK(cond, ...)                          \
    do {                                          \
        if (!(cond)) {                            \
            printf("FAIL %s:%d: ", __FILE__, __LINE__); \
            printf(__VA_ARGS__);                  \
            printf("\n");                         \
            failed = 1;                           \
        }                                         \
    } while (0)

#endif
