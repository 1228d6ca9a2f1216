/* hpm.h: the subcommands of the hpm command and the helpers they share.
 * Each subcommand takes (argc, argv) with argv[0] = its own name and
 * returns the process exit status. They are weak so that the command
 * still builds while a subcommand's file is absent. */
#ifndef HPM_TOOL_H
#define HPM_TOOL_H
#include "hpmalloc.h"

int hpm_cmd_run(int argc, char **argv) __attribute__((weak));
int hpm_cmd_stat(int argc, char **argv) __attribute__((weak));
int hpm_cmd_bench(int argc, char **argv) __attribute__((weak));
int hpm_cmd_sim(int argc, char **argv) __attribute__((weak));

/* Path of the library hpm runs programs on: $HPM_LIB, else libhpmalloc.so
 * beside the running hpm (build tree), else the one installed with it
 * (../lib). NULL when none is found. Returns a static buffer. */
const char *hpm_find_library(void);
#endif
