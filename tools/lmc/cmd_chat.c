/* lmc chat: an interactive conversation with a model (llm-tool's chat). Each
 * line is a user turn; the whole conversation goes through the chat template
 * every turn and the container's KV cache is its prompt cache, so a turn
 * computes only its new tokens. On a terminal (stdin and stdout) lines are
 * read with libedit (prompt, editing, history); otherwise with getline, no
 * prompt. Lines starting with / are commands (/help). Replies go to stdout,
 * everything else (errors, /stats, /help, confirmations) to stderr. */
#include "chat_file.h"
#include "cli.h"

#include <editline/readline.h>
#include <errno.h>
#include <jansson.h>
#include <langinfo.h>
#include <locale.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <unistd.h>

static volatile sig_atomic_t g_interrupted, g_resized;
static pthread_t g_main_thread; /* the one that reads the input */

static void on_signal(int sig) {
    /* The kernel gives a process-directed signal to any thread that does
     * not block it (one of OpenBLAS's, say): pass it on, so that the read
     * it has to interrupt (pselect, getline) is interrupted. */
    if (!pthread_equal(pthread_self(), g_main_thread)) pthread_kill(g_main_thread, sig);
    if (sig == SIGINT)
        g_interrupted = 1;
    else
        g_resized = 1;
}

/* While waiting for input, SIGINT (and SIGWINCH on a terminal) interrupt
 * the blocked read (EINTR); otherwise the calls they interrupt restart, so
 * a Ctrl-C during a reply never fails a write to stdout. */
static bool g_tty; /* stdin and stdout are terminals */
static void catch_signals(bool reading) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = reading ? 0 : SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    if (g_tty) sigaction(SIGWINCH, &sa, NULL);
}

typedef struct totals {
    long turns;
    long long prompt, cached, prefill, generated;
} totals;

typedef struct chat {
    lmc_container *container;
    lmc_generate_params params;
    char *system; /* NULL: none */
    chat_msg *msgs;
    int n_msgs, cap_msgs;
    /* the reply being streamed */
    char *reply;
    size_t reply_len, reply_cap;
    bool write_failed, out_of_memory;
    /* the last turn's stats and the totals since the last /reset or /load */
    bool have_last;
    lmc_generate_stats last;
    lmc_stop_reason last_stop;
    totals total;
} chat;

/* ---- the conversation ------------------------------------------------------- */

static bool push_msg(chat *ch, const char *role, const char *content, size_t len) {
    if (ch->n_msgs == ch->cap_msgs) {
        int cap = ch->cap_msgs ? 2 * ch->cap_msgs : 16;
        chat_msg *m = realloc(ch->msgs, (size_t)cap * sizeof *m);
        if (!m) return false;
        ch->msgs = m;
        ch->cap_msgs = cap;
    }
    char *r = strdup(role), *c = malloc(len + 1);
    if (!r || !c) {
        free(r);
        free(c);
        return false;
    }
    memcpy(c, content, len);
    c[len] = '\0';
    ch->msgs[ch->n_msgs++] = (chat_msg){r, c};
    return true;
}

static void pop_msg(chat *ch) {
    ch->n_msgs--;
    free(ch->msgs[ch->n_msgs].role);
    free(ch->msgs[ch->n_msgs].content);
}

static void clear_conversation(chat *ch) {
    chat_msgs_free(ch->msgs, ch->n_msgs);
    ch->msgs = NULL;
    ch->n_msgs = ch->cap_msgs = 0;
    ch->have_last = false;
    memset(&ch->total, 0, sizeof ch->total);
}

/* ---- operations on the container (each one perform) ---------------------- */

typedef struct turn_job {
    chat *ch;
    lmc_message *messages;
    int32_t n_messages;
    lmc_generate_result result;
} turn_job;

static int on_token(int32_t token, const char *text, size_t len, void *ud) {
    (void)token;
    chat *ch = ud;
    if (len) {
        if (fwrite(text, 1, len, stdout) != len) ch->write_failed = true;
        if (ch->reply_len + len + 1 > ch->reply_cap) {
            size_t cap = ch->reply_cap ? ch->reply_cap : 256;
            while (cap < ch->reply_len + len + 1) cap *= 2;
            char *r = realloc(ch->reply, cap);
            if (!r) {
                ch->out_of_memory = true;
                return 1;
            }
            ch->reply = r;
            ch->reply_cap = cap;
        }
        memcpy(ch->reply + ch->reply_len, text, len);
        ch->reply_len += len;
        ch->reply[ch->reply_len] = '\0';
    }
    if (fflush(stdout) != 0) ch->write_failed = true;
    return g_interrupted || ch->write_failed;
}

static lmc_status run_turn(lmc_context *ctx, void *ud) {
    turn_job *t = ud;
    lmc_user_input in = {.messages = t->messages, .n_messages = t->n_messages};
    return lmc_context_generate(ctx, &in, &t->ch->params, on_token, t->ch, &t->result);
}

typedef struct session_job {
    enum { OP_RESET, OP_SAVE, OP_LOAD, OP_POSITION } op;
    const char *path;
    int32_t position;
} session_job;

static lmc_status run_session(lmc_context *ctx, void *ud) {
    session_job *j = ud;
    lmc_session *s = lmc_context_session(ctx);
    switch (j->op) {
    case OP_RESET:
        lmc_session_reset(s);
        return LMC_OK;
    case OP_SAVE:
        return lmc_session_save(s, j->path);
    case OP_LOAD:
        return lmc_session_load(s, j->path);
    case OP_POSITION:
        j->position = lmc_session_position(s);
        return LMC_OK;
    }
    return LMC_OK;
}

/* Before the first turn: the model can render and encode a conversation
 * (it has a tokenizer, a chat template, and the template takes a system
 * message when one is set). */
typedef struct check_job {
    const chat *ch;
    bool no_tokenizer;
} check_job;

static lmc_status run_check(lmc_context *ctx, void *ud) {
    check_job *j = ud;
    const chat *ch = j->ch;
    if (!lmc_context_tokenizer(ctx)) {
        j->no_tokenizer = true;
        return LMC_ERR_UNSUPPORTED;
    }
    lmc_message m[2] = {{.role = "system", .content = ch->system},
                        {.role = "user", .content = "Hi"}};
    lmc_user_input in = {.messages = ch->system ? m : m + 1, .n_messages = ch->system ? 2 : 1};
    lmc_model_input mi;
    lmc_status st = lmc_context_prepare(ctx, &in, &mi);
    if (st == LMC_OK) lmc_model_input_clear(&mi);
    return st;
}

static lmc_status session_op(chat *ch, session_job *j) {
    return lmc_container_perform(ch->container, run_session, j);
}

static void chat_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void chat_error(const char *fmt, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    /* one line, whatever the message holds */
    for (char *p = buf; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    fprintf(stderr, "lmc chat: %s\n", buf);
}

static const char *last_error(lmc_status st) {
    const char *m = lmc_last_error();
    return m && *m ? m : lmc_status_string(st);
}

/* ---- a turn ------------------------------------------------------------------- */

/* Returns false when the output cannot be written (the REPL ends). */
static bool turn(chat *ch, const char *line) {
    if (!push_msg(ch, "user", line, strlen(line))) {
        chat_error("out of memory");
        return true;
    }
    int32_t n = ch->n_msgs + (ch->system ? 1 : 0);
    lmc_message *m = calloc((size_t)n, sizeof *m);
    if (!m) {
        pop_msg(ch);
        chat_error("out of memory");
        return true;
    }
    int32_t k = 0;
    if (ch->system) m[k++] = (lmc_message){.role = "system", .content = ch->system};
    for (int i = 0; i < ch->n_msgs; i++)
        m[k++] = (lmc_message){.role = ch->msgs[i].role, .content = ch->msgs[i].content};
    turn_job t = {.ch = ch, .messages = m, .n_messages = n};
    ch->reply_len = 0;
    ch->out_of_memory = false;
    lmc_status st = lmc_container_perform(ch->container, run_turn, &t);
    free(m);
    bool printed = t.result.n_tokens > 0 || ch->reply_len > 0;
    if (st != LMC_OK && !printed) {
        if (st == LMC_ERR_RANGE)
            chat_error("%s (/reset starts a new conversation)", last_error(st));
        else
            chat_error("%s", last_error(st));
        pop_msg(ch);
    } else {
        fputc('\n', stdout);
        if (fflush(stdout) != 0) ch->write_failed = true;
        if (st != LMC_OK || ch->out_of_memory) {
            chat_error("%s", st != LMC_OK ? last_error(st) : "out of memory");
            pop_msg(ch); /* the reply is incomplete: the turn is dropped */
        } else {
            if (g_interrupted) {
                fprintf(stderr, "[interrupted]\n");
                g_interrupted = 0;
            }
            if (!push_msg(ch, "assistant", ch->reply ? ch->reply : "", ch->reply_len)) {
                chat_error("out of memory");
                pop_msg(ch);
            } else {
                ch->have_last = true;
                ch->last = t.result.stats;
                ch->last_stop = t.result.stop_reason;
                ch->total.turns++;
                ch->total.prompt += t.result.stats.prompt_tokens;
                ch->total.cached += t.result.stats.cached_tokens;
                ch->total.prefill += t.result.stats.prefill_tokens;
                ch->total.generated += t.result.stats.generated_tokens;
            }
        }
    }
    g_interrupted = 0; /* a Ctrl-C during the reply is spent on it */
    lmc_generate_result_clear(&t.result);
    return !ch->write_failed;
}

/* ---- /save and /load ------------------------------------------------------------ */

static char *path_with(const char *path, const char *suffix, long pid) {
    size_t n = strlen(path) + strlen(suffix) + 32;
    char *p = malloc(n);
    if (!p) return NULL;
    if (pid)
        snprintf(p, n, "%s%s-%ld", path, suffix, pid);
    else
        snprintf(p, n, "%s%s", path, suffix);
    return p;
}

/* FILE (the conversation) and FILE.kv (the prompt cache), each written to a
 * temporary file first; both are renamed into place only once both are
 * complete. */
static void save(chat *ch, const char *path) {
    long pid = (long)getpid();
    char *json_tmp = path_with(path, ".tmp", pid), *kv = path_with(path, ".kv", 0),
         *kv_tmp = path_with(path, ".kv.tmp", pid);
    char *text = NULL;
    json_t *root = NULL;
    FILE *f = NULL;
    bool json_tmp_exists = false, kv_tmp_exists = false;
    if (!json_tmp || !kv || !kv_tmp || !(root = chat_file_json(ch->system, ch->msgs, ch->n_msgs)) ||
        !(text = json_dumps(root, JSON_INDENT(2)))) {
        chat_error("/save: out of memory");
        goto done;
    }
    if (!(f = fopen(json_tmp, "wb"))) {
        chat_error("/save: cannot create %s: %s", json_tmp, strerror(errno));
        goto done;
    }
    json_tmp_exists = true;
    size_t len = strlen(text);
    bool ok = fwrite(text, 1, len, f) == len && fputc('\n', f) != EOF && fflush(f) == 0 &&
              fsync(fileno(f)) == 0;
    int e = errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        e = errno;
    }
    if (!ok) {
        chat_error("/save: cannot write %s: %s", json_tmp, strerror(e));
        goto done;
    }
    session_job j = {.op = OP_SAVE, .path = kv_tmp};
    lmc_status st = session_op(ch, &j);
    if (st != LMC_OK) {
        chat_error("/save: %s", last_error(st));
        goto done;
    }
    kv_tmp_exists = true;
    if (rename(kv_tmp, kv) != 0) {
        chat_error("/save: cannot rename %s to %s: %s", kv_tmp, kv, strerror(errno));
        goto done;
    }
    kv_tmp_exists = false;
    if (rename(json_tmp, path) != 0) {
        chat_error("/save: cannot rename %s to %s: %s", json_tmp, path, strerror(errno));
        goto done;
    }
    json_tmp_exists = false;
    fprintf(stderr, "[saved %d messages to %s and %s]\n", ch->n_msgs, path, kv);
done:
    if (json_tmp_exists) unlink(json_tmp);
    if (kv_tmp_exists) unlink(kv_tmp);
    free(text);
    json_decref(root);
    free(json_tmp);
    free(kv);
    free(kv_tmp);
}

static void load(chat *ch, const char *path) {
    char *kv = path_with(path, ".kv", 0), *system = NULL;
    chat_msg *msgs = NULL;
    int n = 0;
    struct stat sb;
    if (!kv) {
        chat_error("/load: out of memory");
        return;
    }
    char why[512];
    if (!chat_file_read(path, &system, &msgs, &n, why, sizeof why)) {
        chat_error("/load: %s", why);
        goto done;
    }
    if (stat(kv, &sb) != 0) {
        chat_error("/load: cannot read the prompt cache %s: %s", kv, strerror(errno));
        goto done;
    }
    session_job j = {.op = OP_LOAD, .path = kv};
    lmc_status st = session_op(ch, &j);
    if (st != LMC_OK) {
        /* the library empties the cache on failure; the conversation stays */
        chat_error("/load: %s (the conversation is unchanged; its prompt cache was emptied)",
                   last_error(st));
        goto done;
    }
    clear_conversation(ch);
    free(ch->system);
    ch->system = system;
    ch->msgs = msgs;
    ch->n_msgs = ch->cap_msgs = n;
    system = NULL;
    msgs = NULL;
    n = 0;
    session_job p = {.op = OP_POSITION};
    session_op(ch, &p);
    fprintf(stderr, "[loaded %d messages from %s, %d tokens in the prompt cache]\n", ch->n_msgs,
            path, p.position);
done:
    chat_msgs_free(msgs, n);
    free(system);
    free(kv);
}

/* ---- commands ------------------------------------------------------------------- */

static void print_repl_help(void) {
    fprintf(stderr, "commands:\n"
                    "  /reset          forget the conversation and empty the prompt cache\n"
                    "  /system TEXT    set the system message (none without TEXT) and reset\n"
                    "  /stats          the last turn's stats and the conversation's totals\n"
                    "  /save FILE      write the conversation to FILE and its prompt cache to "
                    "FILE.kv\n"
                    "  /load FILE      read them back\n"
                    "  /help           this list\n"
                    "  /quit, /exit    leave (so does Ctrl-D)\n"
                    "A line starting with // sends the rest of it after one '/'. Ctrl-C stops a "
                    "reply.\n");
}

static void print_stats(chat *ch) {
    static const char *const why[] = {
        [LMC_STOP_LENGTH] = "--max-tokens or the context's end",
        [LMC_STOP_EOS] = "end of sequence",
        [LMC_STOP_STRING] = "a stop string",
        [LMC_STOP_CALLBACK] = "Ctrl-C",
    };
    if (ch->have_last) {
        cli_print_stats(&ch->last);
        fprintf(stderr, "last reply: %d tokens, ended by %s\n", ch->last.generated_tokens,
                (unsigned)ch->last_stop < sizeof why / sizeof why[0] ? why[ch->last_stop] : "?");
    } else
        fprintf(stderr, "no turn yet\n");
    session_job p = {.op = OP_POSITION};
    session_op(ch, &p);
    fprintf(stderr,
            "conversation: %d messages%s, %d tokens in the prompt cache; since the last reset "
            "or load: %ld turn%s, %lld prompt tokens (%lld cached, %lld computed), %lld "
            "generated\n",
            ch->n_msgs, ch->system ? " and a system message" : "", p.position, ch->total.turns,
            ch->total.turns == 1 ? "" : "s", ch->total.prompt, ch->total.cached, ch->total.prefill,
            ch->total.generated);
}

static void reset(chat *ch) {
    clear_conversation(ch);
    session_job j = {.op = OP_RESET};
    session_op(ch, &j);
}

enum { GO_ON, QUIT, FAILED };

/* Runs a line starting with '/'. */
static int command(chat *ch, const char *line) {
    const char *name = line + 1, *arg = name;
    while (*arg && *arg != ' ' && *arg != '\t') arg++;
    size_t name_len = (size_t)(arg - name);
    while (*arg == ' ' || *arg == '\t') arg++;
    char *a = strdup(arg);
    if (!a) {
        chat_error("out of memory");
        return GO_ON;
    }
    size_t al = strlen(a);
    while (al && (a[al - 1] == ' ' || a[al - 1] == '\t')) a[--al] = '\0';
#define IS(s) (name_len == strlen(s) && !strncmp(name, s, name_len))
    int r = GO_ON;
    if (IS("quit") || IS("exit")) {
        r = QUIT;
    } else if (IS("help")) {
        print_repl_help();
    } else if (IS("reset")) {
        reset(ch);
        fprintf(stderr, "[conversation reset]\n");
    } else if (IS("system")) {
        char *s = NULL;
        if (*a && !(s = strdup(a))) {
            chat_error("out of memory");
        } else {
            free(ch->system);
            ch->system = s;
            reset(ch);
            fprintf(stderr, s ? "[system message set; conversation reset]\n"
                              : "[system message removed; conversation reset]\n");
        }
    } else if (IS("stats")) {
        print_stats(ch);
    } else if (IS("save") || IS("load")) {
        if (!*a)
            chat_error("/%.*s needs a FILE", (int)name_len, name);
        else if (IS("save"))
            save(ch, a);
        else
            load(ch, a);
    } else {
        chat_error("unknown command '/%.*s' (try /help)", (int)name_len, name);
    }
#undef IS
    free(a);
    return r;
}

/* One line of input: a command, a turn, or nothing. */
static int handle_line(chat *ch, char *line) {
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
    const char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    if (!*p) return GO_ON;
    if (line[0] == '/' && line[1] != '/') return command(ch, line);
    if (!turn(ch, line[0] == '/' ? line + 1 : line)) return FAILED;
    return GO_ON;
}

/* ---- input ---------------------------------------------------------------------- */

static bool g_discard; /* the line readline returns was cut by Ctrl-C */

/* Reads one byte of fd. SIGINT and SIGWINCH stay blocked but while pselect
 * waits, so one that comes just before the wait is not lost: -2 after a
 * Ctrl-C, -1 at the end of the input or on an error. */
static int read_byte(int fd) {
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGWINCH);
    sigprocmask(SIG_BLOCK, &block, &old);
    int r = -1;
    for (;;) {
        if (g_resized) {
            g_resized = 0;
            rl_resize_terminal();
        }
        if (g_interrupted) {
            g_interrupted = 0;
            r = -2;
            break;
        }
        fd_set in;
        FD_ZERO(&in);
        FD_SET(fd, &in);
        int n = pselect(fd + 1, &in, NULL, NULL, NULL, &old);
        if (n < 0 && errno == EINTR) continue;
        unsigned char b;
        if (n > 0 && read(fd, &b, 1) == 1) r = b;
        break;
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    return r;
}

/* libedit's getc hook: one UTF-8 character of the terminal as a code point
 * (libedit keeps what it returns as one wide character; U+FFFD for a
 * malformed sequence). A Ctrl-C ends the line being typed, which the REPL
 * then discards. */
static int chat_getc(FILE *f) {
    static int pending = -1; /* a byte that broke the previous sequence */
    int c = pending >= 0 ? pending : read_byte(fileno(f));
    pending = -1;
    if (c == -2) {
        g_discard = true;
        return '\n';
    }
    if (c < 0x80) return c < 0 ? EOF : c;
    int need = c >= 0xc2 && c <= 0xdf   ? 1
               : c >= 0xe0 && c <= 0xef ? 2
               : c >= 0xf0 && c <= 0xf4 ? 3
                                        : 0;
    if (!need) return 0xfffd;
    int cp = c & (0x3f >> need);
    for (int i = 0; i < need; i++) {
        int b = read_byte(fileno(f));
        if (b < 0 || (b & 0xc0) != 0x80) {
            pending = b == -1 ? -1 : b; /* a Ctrl-C or the next character: read next time */
            return 0xfffd;
        }
        cp = cp << 6 | (b & 0x3f);
    }
    return cp;
}

static int repl_tty(chat *ch) {
    /* libedit turns the characters chat_getc decodes back into UTF-8 with
     * the locale's encoding */
    setlocale(LC_CTYPE, "");
    if (strcmp(nl_langinfo(CODESET), "UTF-8")) setlocale(LC_CTYPE, "C.UTF-8");
    rl_readline_name = "lmc";
    rl_catch_signals = 0; /* ours: Ctrl-C cuts the line (chat_getc) or stops the reply */
    rl_getc_function = chat_getc;
    using_history();
    for (;;) {
        g_discard = false;
        catch_signals(true);
        char *line = readline("> ");
        catch_signals(false);
        if (!line) {
            fputc('\n', stdout);
            return CLI_EXIT_OK;
        }
        if (g_discard) {
            free(line);
            continue;
        }
        const char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (*p) add_history(line);
        int r = handle_line(ch, line);
        free(line);
        if (r == QUIT) return CLI_EXIT_OK;
        if (r == FAILED) return cli_fail("chat", "cannot write the output");
    }
}

static int repl_pipe(chat *ch) {
    char *line = NULL;
    size_t cap = 0;
    int rc = CLI_EXIT_OK;
    for (;;) {
        if (g_interrupted) {
            rc = CLI_EXIT_INTERRUPTED;
            break;
        }
        errno = 0;
        catch_signals(true);
        ssize_t n = getline(&line, &cap, stdin);
        catch_signals(false);
        if (n < 0) {
            if (g_interrupted)
                rc = CLI_EXIT_INTERRUPTED;
            else if (ferror(stdin))
                rc = cli_fail("chat", "cannot read the input: %s", strerror(errno));
            break;
        }
        if (g_interrupted) { /* a Ctrl-C while the line came in */
            rc = CLI_EXIT_INTERRUPTED;
            break;
        }
        int r = handle_line(ch, line);
        if (r == QUIT) break;
        if (r == FAILED) {
            rc = cli_fail("chat", "cannot write the output");
            break;
        }
    }
    free(line);
    return rc;
}

/* ---- the command ------------------------------------------------------------------ */

int cmd_chat(int argc, char **argv) {
    const char *spec = NULL, *system_arg = NULL;
    cli_sampling smp;
    cli_sampling_init(&smp);
    const cli_option own[] = {
        {"model", 'm', CLI_STR, &spec, "M",
         "a folder, registry name or cached hub id (default: the shipped model)", 0, 0, NULL},
        {"system", 0, CLI_STR, &system_arg, "TEXT", "a system message first (@FILE reads FILE)", 0,
         0, NULL},
    };
    enum { N_OWN = sizeof own / sizeof own[0] };
    cli_option opts[N_OWN + CLI_SAMPLING_N];
    memcpy(opts, own, sizeof own);
    cli_sampling_options(&smp, opts + N_OWN);
    const cli_command cmd = {
        .name = "chat",
        .synopsis = "[--model M] [--system TEXT] [options]",
        .about =
            "A conversation with a model: each line is a user turn, the reply streams to stdout.\n"
            "The model's KV cache is the prompt cache of the conversation, so a turn computes\n"
            "only its new tokens. Without --model it runs the model shipped with lmc\n"
            "(models/" CLI_SHIPPED_DIR "). On a terminal lines are edited with libedit (history\n"
            "included); from a pipe or file each line is read as it is, with no prompt.\n"
            "Commands: /reset, /system TEXT, /stats, /save FILE, /load FILE, /help, /quit\n"
            "(or /exit). Ctrl-C stops a reply (kept in the conversation) or discards the line\n"
            "being typed; Ctrl-D leaves.",
        .options = opts,
        .n_options = N_OWN + CLI_SAMPLING_N,
        .flags = CLI_MODEL_OPTIONS,
        .examples = "  lmc chat --system \"Answer in the words of the King James Bible.\"\n"
                    "  lmc chat --model qwen3:4b --temp 0.6 --max-tokens 1024\n"
                    "  printf 'Who was Moses?\\n/stats\\n' | lmc chat --temp 0\n"};
    int r = cli_parse(&cmd, argc, argv);
    if (r >= 0) {
        cli_strs_free(&smp.stops);
        return r;
    }
    int rc = CLI_EXIT_ERROR;
    chat ch;
    memset(&ch, 0, sizeof ch);
    if (system_arg) {
        if (!(ch.system = cli_text_arg("chat", system_arg))) goto done;
        if (!*ch.system) {
            free(ch.system);
            ch.system = NULL;
        }
    }
    lmc_generate_params_default(&ch.params);
    cli_sampling_apply(&smp, &ch.params);
    if (!cli_load("chat", spec, LMC_MODEL_LLM, 0, &ch.container)) goto done;
    check_job cj = {.ch = &ch};
    lmc_status st = lmc_container_perform(ch.container, run_check, &cj);
    if (cj.no_tokenizer) {
        rc = cli_fail("chat", "the model has no tokenizer (tokenizer.json): it cannot chat");
        goto done;
    }
    if (st != LMC_OK) {
        rc = cli_fail("chat", "the model cannot render a conversation: %s", last_error(st));
        goto done;
    }
    struct sigaction old_int, old_winch;
    sigaction(SIGINT, NULL, &old_int);
    sigaction(SIGWINCH, NULL, &old_winch);
    g_interrupted = 0;
    g_main_thread = pthread_self();
    g_tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
    rc = g_tty ? repl_tty(&ch) : repl_pipe(&ch);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGWINCH, &old_winch, NULL);
    if (fflush(stdout) != 0 && rc == CLI_EXIT_OK) rc = cli_fail("chat", "cannot write the output");
done:
    lmc_container_free(ch.container);
    clear_conversation(&ch);
    free(ch.system);
    free(ch.reply);
    cli_strs_free(&smp.stops);
    return rc;
}
