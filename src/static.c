/* static.c: the one-file build. Compile this single file into a program
 * (cc -O2 -pthread -Iinclude -Isrc src/static.c app.c) to get hpmalloc
 * without building the library, as the research allocator was used
 * ("imported as a header"). It only includes the other sources, in layer
 * order; it is not part of the normal build. tests/scripts/onefile.sh
 * checks that it builds and works. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "prim/linux.c"
#include "message.c"
#include "lockorder.c"
#include "options.c"
#include "arena.c"
#include "meta.c"
#include "stats.c"
#include "sizeclass.c"
#include "filler.c"
#include "hugepage.c"
#include "collapse.c"
#include "release.c"
#include "slab.c"
#include "spancache.c"
#include "remote.c"
#include "transfer.c"
#include "check.c"
#include "heap.c"
#include "alloc.c"
#include "control.c"
#include "init.c"
#include "publish.c"
#include "color/colored_map.c"
#include "ccow/ccow.c"
#include "ccow/ccow_copy.c"
#include "ccow/ccow_os.c"
#include "ccow/ccow_policy.c"
#include "ccow/ccow_scan.c"
