/* hpm_names.h: for the sanitizer builds (make asan/ubsan/tsan), where the
 * library is built with -DHPM_NO_OVERRIDE and the sanitizer's allocator
 * keeps the libc names. The Makefile force-includes this header (-include)
 * into the unit tests and the linked test programs, so that their calls
 * of malloc, free, ... reach hpmalloc's hpm_* API instead. The system
 * headers come first, so their declarations keep the libc names; only the
 * test's own calls are renamed. valloc, pvalloc and malloc_trim have no
 * hpm_ names: they map to hpm_memalign and hpm_trim. Memory that libc
 * itself allocates (strdup, getline) must not be given to free here. */
#ifndef HPM_NAMES_H
#define HPM_NAMES_H
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include "hpmalloc.h"

#define malloc hpm_malloc
#define calloc hpm_calloc
#define realloc hpm_realloc
#define reallocarray hpm_reallocarray
#define free hpm_free
#define cfree hpm_free
#define free_sized hpm_free_sized
#define free_aligned_sized hpm_free_aligned_sized
#define aligned_alloc hpm_aligned_alloc
#define memalign hpm_memalign
#define posix_memalign hpm_posix_memalign
#define malloc_usable_size hpm_usable_size
#define valloc(size) hpm_memalign(4096, (size))
#define pvalloc(size) hpm_memalign(4096, ((size) + 4095) & ~(size_t)4095)
#define malloc_trim(pad) ((void)(pad), hpm_trim() > 0)
#endif
