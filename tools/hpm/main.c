/* main.c: the hpm command. Dispatches to one subcommand per file:
 * run (run.c), stat (stat*.c), bench (bench*.c), sim (the simulator in
 * sim/). A subcommand whose file is not built is reported as missing. */
#include <stdio.h>
#include <string.h>
#include "hpm.h"

typedef struct { const char *name; int (*fn)(int, char **); const char *what; } command_t;

static void usage(FILE *f, const command_t *cmds, int n) {
    fprintf(f, "usage: hpm COMMAND [ARGS...]\n\ncommands:\n");
    for (int i = 0; i < n; i++) fprintf(f, "  %-6s %s\n", cmds[i].name, cmds[i].what);
    fprintf(f, "\n'hpm COMMAND --help' describes each one; 'hpm --version' prints the version.\n"
               "Exit status: the command's; 2 for a usage error, 1 for a runtime error.\n");
}

int main(int argc, char **argv) {
    const command_t cmds[] = {
        {"run", hpm_cmd_run, "run a program on hpmalloc (LD_PRELOAD), optionally printing its counters"},
        {"stat", hpm_cmd_stat, "huge-page coverage, region states, hot/cold memory and colour probe of a process"},
        {"bench", hpm_cmd_bench, "the evaluation: benchmarks under every allocator, with a report and plots"},
        {"sim", hpm_cmd_sim, "physical-memory fragmentation simulator: Linux vs Illuminator"},
    };
    const int n = (int)(sizeof cmds / sizeof cmds[0]);
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout, cmds, n);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) { printf("hpm %s\n", HPM_VERSION); return 0; }
    if (argv[1][0] == '-') {
        fprintf(stderr, "hpm: unknown option '%s'\nTry 'hpm --help' for more information.\n", argv[1]);
        return 2;
    }
    for (int i = 0; i < n; i++) {
        if (strcmp(argv[1], cmds[i].name)) continue;
        if (!cmds[i].fn) { fprintf(stderr, "hpm: '%s' is not built into this hpm\n", argv[1]); return 2; }
        if (argc == 3 && !strcmp(argv[2], "--version")) { printf("hpm %s %s\n", argv[1], HPM_VERSION); return 0; }
        return cmds[i].fn(argc - 1, argv + 1);
    }
    fprintf(stderr, "hpm: unknown command '%s'\n", argv[1]);
    usage(stderr, cmds, n);
    return 2;
}
