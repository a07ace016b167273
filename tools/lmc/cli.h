/* Shared helpers of the lmc subcommands. The CLI uses only lmc.h. */
#ifndef LMC_CLI_H
#define LMC_CLI_H

#include "lmc.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LMC_COMMAND(name, fn, help) int fn(int argc, char **argv);
#include "commands.def"
#undef LMC_COMMAND

/* Prints "lmc CMD: message" on stderr and returns 1. */
int cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints the library's last error for a failed status and returns 1. */
int cli_fail_status(const char *cmd, lmc_status st);

/* Parses "1,2,3" (commas or spaces) into a malloc'd array. */
bool cli_parse_ids(const char *s, int32_t **ids, size_t *n);
/* Parses an integer/float argument strictly. */
bool cli_parse_int(const char *s, long *out);
bool cli_parse_float(const char *s, double *out);

/* Looks up "--name VALUE" style options: returns true when argv[*i] is
 * `name` and a value follows (stored in *value, *i advanced). */
bool cli_opt(int argc, char **argv, int *i, const char *name, const char **value);

#endif
