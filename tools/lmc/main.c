/* lmc command-line tool: dispatches to one file per subcommand. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} commands[] = {
#define LMC_COMMAND(name, fn, help) {name, fn, help},
#include "commands.def"
#undef LMC_COMMAND
};

static void usage(FILE *f) {
    fprintf(f, "usage: lmc COMMAND [options]\n       lmc --version\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\nRun 'lmc COMMAND --help' for a command's options. Without --model, commands\n"
               "use the model shipped with lmc (" CLI_SHIPPED_NAME ").\n"
               "Exit status: 0 ok, 1 error, 2 usage error, 130 interrupted.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V") || !strcmp(argv[1], "version")) {
        printf("lmc %s\n", LMC_CLI_VERSION);
        return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_ERROR;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "lmc: unknown command '%s' (try 'lmc --help')\n", argv[1]);
    return CLI_EXIT_USAGE;
}
