/* debug.h: the debug tier, chosen at compile time with -DHPM_DEBUG=N
 * (make debug builds level 3; the release build is level 0).
 *
 *   0  release: no asserts. The checks every free makes (DESIGN.md rule 7)
 *      are not asserts and stay on at every level.
 *   1  hpm_assert: cheap O(1) checks of arguments and states, on slow paths.
 *   2  + hpm_assert_internal: consistency of the structures an operation
 *      touches (O(1) to O(512) per call), and the lock order (lockorder.h).
 *   3  + hpm_assert_expensive and hpm_check_expensive: whole-structure
 *      checkers (check.c) after pageheap operations: O(heap size) per call.
 *
 * A failed assert prints one line, "hpmalloc: assertion failed: WHAT
 * (file:line, function)", through the OS table (no stdio, no malloc) and
 * aborts. An assert of a level that is off does not evaluate its argument,
 * but the compiler still sees it, so disabled asserts cannot rot.
 *
 * The checkers of check.c are compiled at every level (tests call them
 * directly); each returns true when the structure is sound and otherwise
 * writes the first broken invariant into why (HPM_WHY_BYTES). */
#ifndef HPM_DEBUG_H
#define HPM_DEBUG_H
#include <stdbool.h>
#include <stddef.h>

#ifndef HPM_DEBUG
#define HPM_DEBUG 0
#endif
#if HPM_DEBUG < 0 || HPM_DEBUG > 3
#error "HPM_DEBUG must be 0 (release) to 3 (expensive checks)"
#endif

#define HPM_WHY_BYTES 200

/* Prints the failure and aborts (check.c). */
__attribute__((visibility("hidden"), noreturn, cold))
void _hpm_assert_fail(const char *file, int line, const char *func, const char *what);

#define HPM_ASSERT_AT_(level, expr) \
    ((HPM_DEBUG >= (level) && __builtin_expect(!(expr), 0)) ? _hpm_assert_fail(__FILE__, __LINE__, __func__, #expr) : (void)0)

#define hpm_assert(expr) HPM_ASSERT_AT_(1, expr)
#define hpm_assert_internal(expr) HPM_ASSERT_AT_(2, expr)
#define hpm_assert_expensive(expr) HPM_ASSERT_AT_(3, expr)

/* hpm_check_*(checker, args...): calls bool checker(args..., why) and, when
 * it reports a broken invariant, fails with the checker's message. */
#define HPM_CHECK_AT_(level, checker, ...) do { \
    if (HPM_DEBUG >= (level)) { \
        char hpm_why_[HPM_WHY_BYTES]; \
        if (!checker(__VA_ARGS__, hpm_why_)) _hpm_assert_fail(__FILE__, __LINE__, __func__, hpm_why_); \
    } \
} while (0)

#define hpm_check_internal(checker, ...) HPM_CHECK_AT_(2, checker, __VA_ARGS__)
#define hpm_check_expensive(checker, ...) HPM_CHECK_AT_(3, checker, __VA_ARGS__)
#endif
