/* args.h: the command-line conventions every hpm subcommand follows, in
 * one parser. Options and operands may come in any order; "--" ends the
 * options (what follows is operands, even if it starts with '-'); a long
 * option's value is the next argument or follows '=' (--rounds 3,
 * --rounds=3); --help/-h and --version are understood by every command.
 * A usage error prints one line naming the command and a pointer to
 * --help, and gives exit status 2 (runtime errors are the commands' own:
 * status 1). */
#ifndef HPM_ARGS_H
#define HPM_ARGS_H
#include <stdio.h>

typedef struct {
    const char *name;    /* "--json" */
    char short_name;     /* 'j' for -j, or 0 */
    int has_value;       /* 1 when it takes a value */
} hpm_opt_t;

/* Called once per option, in command-line order: id is the option's index
 * in the table, value its value (NULL when it takes none). Returns 0, or
 * -1 when the value is bad (the parser then reports it as a usage error). */
typedef int (*hpm_opt_fn)(void *ctx, int id, const char *value);

typedef struct {
    char **operands;     /* every operand in order (malloc'd, NULL-terminated) */
    int n;               /* how many */
    int before_dashdash; /* how many came before "--" (n when there was none) */
    int dashdash;        /* 1 when "--" was given */
} hpm_operands_t;

/* Parses argv[1..argc) of command cmd ("hpm stat"). stop_at_operand: the
 * first operand ends the options (for commands that run a program, like
 * `hpm run PROG ARGS`, whose ARGS are the program's). Returns -1 to go on,
 * or the exit status the command should return now: 0 after --help or
 * --version (printed), 2 after a usage error (reported). */
int hpm_args_parse(const char *cmd, int argc, char **argv, const hpm_opt_t *opts, int n_opts, hpm_opt_fn fn,
                   void *ctx, void (*usage)(FILE *), int stop_at_operand, hpm_operands_t *out);
void hpm_args_free(hpm_operands_t *out);

/* A usage error outside the parser (a bad operand): prints "cmd: message"
 * and "Try 'cmd --help'" on stderr, and returns 2. */
int hpm_usage_error(const char *cmd, void (*usage)(FILE *), const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Parses a number in [lo, hi]; 0, or -1 when it is not one. */
int hpm_parse_num(const char *s, double lo, double hi, double *out);
/* The same for a whole number in [lo, hi] (1.5 is not one). */
int hpm_parse_int(const char *s, int lo, int hi, int *out);
#endif
