/* message.c: the allocator's two ways to speak: a formatted message on
 * stderr, and a fatal report followed by abort (a bad pointer given to
 * free, a broken invariant). Both write through the OS table, never
 * through stdio, and allocate nothing, so any layer may use them. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include "internal.h"

void _hpm_message(const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    _hpm_os->write_err(buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

void _hpm_fatal(const char *fn, const void *p, const char *what) {
    char buf[256];
    int n = snprintf(buf, sizeof buf, "hpmalloc: %s(%p): %s\n", fn, p, what);
    _hpm_os->write_err(buf, n > 0 && (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
    abort();
}
