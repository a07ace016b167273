/* The local Hugging Face hub cache (huggingface_hub constants.py for the
 * folder, file_download.py for the layout): a model ORG/NAME lives in
 * CACHE/models--ORG--NAME with blobs/ (the files, named by their hash),
 * snapshots/REV/ (one folder per commit, its files relative symlinks to
 * ../../blobs/...) and refs/main (the commit of the main branch). */
#include "api/hub.h"

#include <dirent.h>
#include <errno.h>
#include <pwd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* An environment variable, NULL when unset or empty. */
static const char *env_value(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* The user's home: $HOME, else the password database, else "" (the cache
 * folder is then relative). NULL on allocation failure. */
static char *home_dir(void) {
    const char *home = env_value("HOME");
    if (home) return lmc_strdup(home);
    long max = sysconf(_SC_GETPW_R_SIZE_MAX);
    size_t size = max > 0 ? (size_t)max : 16384;
    char *buf = malloc(size);
    if (!buf) return NULL;
    struct passwd pw, *found = NULL;
    char *out = NULL;
    if (getpwuid_r(getuid(), &pw, buf, size, &found) == 0 && found && found->pw_dir)
        out = lmc_strdup(found->pw_dir);
    else
        out = lmc_strdup("");
    free(buf);
    return out;
}

/* os.path.expanduser for a leading "~" or "~/" (huggingface_hub expands
 * HF_HOME and HF_HUB_CACHE so). */
static char *expand_user(const char *path) {
    if (path[0] != '~' || (path[1] && path[1] != '/')) return lmc_strdup(path);
    char *home = home_dir();
    if (!home) return NULL;
    char *out = path[1] ? lmc_path_join(home, path + 2) : lmc_strdup(home);
    free(home);
    return out;
}

char *lmc_hub_cache_dir(void) {
    const char *v = env_value("HF_HUB_CACHE");
    if (v) return expand_user(v);
    char *base = NULL, *out = NULL;
    if ((v = env_value("HF_HOME"))) {
        base = expand_user(v);
        out = base ? lmc_path_join(base, "hub") : NULL;
    } else {
        base = home_dir();
        out = base ? lmc_path_join(base, ".cache/huggingface/hub") : NULL;
    }
    free(base);
    return out;
}

/* ---- hub ids --------------------------------------------------------------- */

static bool is_word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static bool is_name_char(char c) {
    return is_word_char(c) || c == '.' || c == '-';
}

/* huggingface_hub's validate_repo_id: ^(\b[\w\-.]+\b/)?\b[\w\-.]+\b$ (ASCII
 * here), no "--" or ".." (they would make models--ORG--NAME ambiguous or
 * leave the cache), at most 96 characters, no ".git" ending. With report,
 * a failure sets the error message; without, it only returns the status
 * (for ids read off folder names, where a bad one is skipped). */
#define BAD_ID(...) (report ? lmc_error(LMC_ERR_INVALID_ARG, __VA_ARGS__) : LMC_ERR_INVALID_ARG)
static lmc_status check_hub_id(const char *id, const char **slash, bool report) {
    if (!id || !*id) return BAD_ID("hub id is empty");
    size_t n = strlen(id);
    for (size_t i = 0; i < n; i++)
        if (!is_name_char(id[i]) && id[i] != '/')
            return BAD_ID("hub id: character %zu is not one of A-Z a-z 0-9 . _ - /", i + 1);
    *slash = strchr(id, '/');
    if (*slash && strchr(*slash + 1, '/'))
        return BAD_ID("hub id '%s': more than one '/' (want ORG/NAME)", id);
    if (n > 96) return BAD_ID("hub id '%s': over 96 characters", id);
    const char *name = *slash ? *slash + 1 : id;
    size_t org_len = *slash ? (size_t)(*slash - id) : 0, name_len = strlen(name);
    if (*slash && (org_len == 0 || !is_word_char(id[0]) || !is_word_char(id[org_len - 1])))
        return BAD_ID("hub id '%s': ORG must start and end with a letter, digit or _", id);
    if (name_len == 0 || !is_word_char(name[0]) || !is_word_char(name[name_len - 1]))
        return BAD_ID("hub id '%s': NAME must start and end with a letter, digit or _", id);
    if (strstr(id, "--") || strstr(id, ".."))
        return BAD_ID("hub id '%s': cannot hold '--' or '..'", id);
    if (n >= 4 && !strcmp(id + n - 4, ".git"))
        return BAD_ID("hub id '%s': cannot end with .git", id);
    return LMC_OK;
}
#undef BAD_ID

/* The hub id of a repository folder models--ORG--NAME from what follows
 * "models--" (huggingface_hub's repo_folder_name, reversed: the first "--"
 * is the '/'); *id NULL when that is no valid hub id. */
static lmc_status repo_folder_hub_id(const char *tail, size_t len, char **id) {
    *id = NULL;
    const char *sep = NULL;
    for (size_t i = 0; i + 1 < len && !sep; i++)
        if (tail[i] == '-' && tail[i + 1] == '-') sep = tail + i;
    char *s = sep ? lmc_sprintf("%.*s/%.*s", (int)(sep - tail), tail,
                                (int)(len - (size_t)(sep - tail) - 2), sep + 2)
                  : lmc_sprintf("%.*s", (int)len, tail);
    if (!s) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    const char *slash;
    if (check_hub_id(s, &slash, false) != LMC_OK) {
        free(s);
        return LMC_OK;
    }
    *id = s;
    return LMC_OK;
}

lmc_status lmc_hub_id_of_snapshot(const char *dir, char **id) {
    *id = NULL;
    /* the last three components, trailing slashes ignored: models--X, snapshots, REV */
    size_t end = strlen(dir);
    while (end > 1 && dir[end - 1] == '/') end--;
    size_t start[3], stop[3];
    for (int k = 2; k >= 0; k--) {
        stop[k] = end;
        while (end > 0 && dir[end - 1] != '/') end--;
        start[k] = end;
        if (start[k] == stop[k]) return LMC_OK;
        while (end > 0 && dir[end - 1] == '/') end--;
        if (k > 0 && end == 0) return LMC_OK;
    }
    size_t rev_len = stop[2] - start[2];
    if ((rev_len == 1 && dir[start[2]] == '.') ||
        (rev_len == 2 && !strncmp(dir + start[2], "..", 2)))
        return LMC_OK;
    if (stop[1] - start[1] != 9 || strncmp(dir + start[1], "snapshots", 9)) return LMC_OK;
    if (stop[0] - start[0] <= 8 || strncmp(dir + start[0], "models--", 8)) return LMC_OK;
    return repo_folder_hub_id(dir + start[0] + 8, stop[0] - start[0] - 8, id);
}

/* ---- the search ------------------------------------------------------------ */

/* "PATH (WHAT), PATH (WHAT), ...": where lmc_hub_find looked. */
typedef struct looked_list {
    char *text;
    bool oom;
} looked_list;

static void note(looked_list *l, const char *path, const char *what) {
    if (!l || l->oom) return;
    char *t = l->text ? lmc_sprintf("%s, %s (%s)", l->text, path, what)
                      : lmc_sprintf("%s (%s)", path, what);
    free(l->text);
    l->text = t;
    l->oom = !t;
}

static bool has_config(const char *snapshot) {
    char *p = lmc_path_join(snapshot, "config.json");
    bool ok = p && lmc_file_exists(p); /* stat follows the link to the blob */
    free(p);
    return ok;
}

/* A commit hash as refs/main holds it: a plain folder name of printable
 * characters (refs are written by the hub client; anything else is not a
 * revision to look up). */
static bool is_revision(const char *rev) {
    if (!*rev || !strcmp(rev, ".") || !strcmp(rev, "..")) return false;
    for (const char *c = rev; *c; c++)
        if (*c == '/' || (unsigned char)*c <= ' ' || (unsigned char)*c >= 0x7f) return false;
    return true;
}

/* The snapshot that refs/main names, when it exists and has config.json;
 * otherwise *found stays NULL and a note says why. */
static lmc_status from_ref(const char *refs, const char *snaps, looked_list *l, char **found) {
    *found = NULL;
    if (!lmc_file_exists(refs)) {
        note(l, refs, "missing");
        return LMC_OK;
    }
    char *rev = NULL;
    if (lmc_read_file(refs, &rev, NULL) != LMC_OK) {
        note(l, refs, "unreadable");
        return LMC_OK;
    }
    size_t n = strlen(rev);
    while (n > 0 && (rev[n - 1] == '\n' || rev[n - 1] == '\r' || rev[n - 1] == ' ' ||
                     rev[n - 1] == '\t' || rev[n - 1] == '\v' || rev[n - 1] == '\f'))
        rev[--n] = '\0';
    lmc_status st = LMC_OK;
    char *what = NULL, *snap = NULL;
    if (!is_revision(rev)) {
        note(l, refs, "holds no commit hash");
    } else if (!(snap = lmc_path_join(snaps, rev))) {
        st = lmc_error(LMC_ERR_NOMEM, "out of memory");
    } else if (!lmc_dir_exists(snap)) {
        what = lmc_sprintf("names %s: no such snapshot", rev);
        note(l, refs, what ? what : "names no snapshot");
    } else if (!has_config(snap)) {
        what = lmc_sprintf("names %s: no config.json in %s", rev, snap);
        note(l, refs, what ? what : "its snapshot has no config.json");
    } else {
        *found = snap;
        snap = NULL;
    }
    free(what);
    free(snap);
    free(rev);
    return st;
}

/* The most recently modified snapshot folder holding config.json (ties: the
 * greater name, so that the choice does not depend on readdir's order). */
static lmc_status newest_snapshot(const char *snaps, looked_list *l, char **found) {
    *found = NULL;
    if (!lmc_dir_exists(snaps)) {
        note(l, snaps, "missing");
        return LMC_OK;
    }
    DIR *d = opendir(snaps);
    if (!d) {
        note(l, snaps, strerror(errno));
        return LMC_OK;
    }
    char *best = NULL;
    const char *best_name = NULL;
    struct timespec best_time = {0, 0};
    lmc_status st = LMC_OK;
    struct dirent *e;
    while (st == LMC_OK && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char *p = lmc_path_join(snaps, e->d_name);
        if (!p) {
            st = lmc_error(LMC_ERR_NOMEM, "out of memory");
            break;
        }
        struct stat sb; /* stat, not d_type: a snapshot may be a link too */
        bool ok = stat(p, &sb) == 0 && S_ISDIR(sb.st_mode) && has_config(p);
        bool newer =
            ok &&
            (!best || sb.st_mtim.tv_sec > best_time.tv_sec ||
             (sb.st_mtim.tv_sec == best_time.tv_sec &&
              (sb.st_mtim.tv_nsec > best_time.tv_nsec ||
               (sb.st_mtim.tv_nsec == best_time.tv_nsec && strcmp(e->d_name, best_name) > 0))));
        if (newer) {
            free(best);
            best = p;
            best_name = strrchr(best, '/') + 1;
            best_time = sb.st_mtim;
        } else {
            free(p);
        }
    }
    closedir(d);
    if (st != LMC_OK) {
        free(best);
        return st;
    }
    if (!best) note(l, snaps, "no snapshot with config.json");
    *found = best;
    return LMC_OK;
}

/* The snapshot of the repository folder repo (CACHE/models--ORG--NAME):
 * the one refs/main names, else the newest; *found NULL when none has
 * config.json (the notes in l, which may be NULL, say why). */
static lmc_status find_snapshot(const char *repo, looked_list *l, char **found) {
    *found = NULL;
    char *refs = lmc_path_join(repo, "refs/main"), *snaps = lmc_path_join(repo, "snapshots");
    lmc_status st =
        refs && snaps ? from_ref(refs, snaps, l, found) : lmc_error(LMC_ERR_NOMEM, "out of memory");
    if (st == LMC_OK && !*found) st = newest_snapshot(snaps, l, found);
    free(refs);
    free(snaps);
    return st;
}

lmc_status lmc_hub_find(const char *hub_id, char **dir, char **looked) {
    if (dir) *dir = NULL;
    if (looked) *looked = NULL;
    if (!dir) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_hub_find: dir is NULL");
    const char *slash = NULL;
    lmc_status st = check_hub_id(hub_id, &slash, true);
    if (st != LMC_OK) return st;
    looked_list l = {NULL, false};
    char *cache = lmc_hub_cache_dir(), *folder = NULL, *repo = NULL;
    if (cache)
        folder = slash ? lmc_sprintf("models--%.*s--%s", (int)(slash - hub_id), hub_id, slash + 1)
                       : lmc_sprintf("models--%s", hub_id);
    if (folder) repo = lmc_path_join(cache, folder);
    if (!repo) {
        st = lmc_error(LMC_ERR_NOMEM, "out of memory");
        goto done;
    }
    st = find_snapshot(repo, &l, dir);
    if (st == LMC_OK && !*dir)
        st = lmc_error(LMC_ERR_NOT_FOUND, "%s is not in the hub cache: looked at %s", hub_id,
                       l.text && !l.oom ? l.text : cache);
done:
    if (st == LMC_ERR_NOT_FOUND && looked && !l.oom) {
        *looked = l.text;
        l.text = NULL;
    }
    free(l.text);
    free(cache);
    free(folder);
    free(repo);
    return st;
}

/* ---- the listing ------------------------------------------------------------ */

lmc_status lmc_hub_cache_path(char **dir) {
    if (!dir) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_hub_cache_path: dir is NULL");
    *dir = lmc_hub_cache_dir();
    return *dir ? LMC_OK : lmc_error(LMC_ERR_NOMEM, "out of memory");
}

static int by_hub_id(const void *a, const void *b) {
    const lmc_model_summary *x = a, *y = b;
    int c = strcasecmp(x->hub_id, y->hub_id);
    return c ? c : strcmp(x->hub_id, y->hub_id);
}

/* Appends the summary of the repository folder CACHE/name (models--...) to
 * the list when it has a snapshot with config.json. */
static lmc_status list_repo(const char *cache, const char *name, lmc_model_summary **list,
                            int32_t *n, int32_t *cap) {
    char *id = NULL, *repo = NULL, *snap = NULL;
    lmc_status st = repo_folder_hub_id(name + 8, strlen(name + 8), &id);
    if (st != LMC_OK || !id) return st; /* not a folder the hub client names so */
    if (!(repo = lmc_path_join(cache, name))) {
        st = lmc_error(LMC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (!lmc_dir_exists(repo)) goto done;
    if ((st = find_snapshot(repo, NULL, &snap)) != LMC_OK || !snap) goto done;
    if (*n == *cap) {
        int32_t c = *cap ? (*cap <= INT32_MAX / 2 ? 2 * *cap : 0) : 16;
        lmc_model_summary *a = c ? realloc(*list, (size_t)c * sizeof *a) : NULL;
        if (!a) {
            st = lmc_error(LMC_ERR_NOMEM, "out of memory");
            goto done;
        }
        *list = a;
        *cap = c;
    }
    lmc_model_summary *s = &(*list)[*n];
    st = lmc_model_summary_read(snap, s);
    if (st == LMC_ERR_NOMEM) {
        lmc_model_summary_clear(s);
        goto done;
    }
    st = LMC_OK; /* a broken snapshot is listed with what could be read */
    free(s->hub_id);
    s->hub_id = id;
    id = NULL;
    (*n)++;
done:
    free(id);
    free(repo);
    free(snap);
    return st;
}

lmc_status lmc_hub_list(lmc_model_summary **out, int32_t *n) {
    if (out) *out = NULL;
    if (n) *n = 0;
    if (!out || !n)
        return lmc_error(LMC_ERR_INVALID_ARG, "lmc_hub_list: %s is NULL", out ? "n" : "out");
    char *cache = lmc_hub_cache_dir();
    if (!cache) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    DIR *d = opendir(cache);
    if (!d) {
        int e = errno;
        lmc_status st =
            e == ENOENT || e == ENOTDIR
                ? LMC_OK /* no cache yet: nothing downloaded */
                : lmc_error(LMC_ERR_IO, "%s: cannot list the hub cache: %s", cache, strerror(e));
        free(cache);
        return st;
    }
    lmc_model_summary *list = NULL;
    int32_t count = 0, cap = 0;
    lmc_status st = LMC_OK;
    struct dirent *e;
    while (st == LMC_OK && (errno = 0, e = readdir(d)) != NULL)
        if (!strncmp(e->d_name, "models--", 8) && e->d_name[8])
            st = list_repo(cache, e->d_name, &list, &count, &cap);
    if (st == LMC_OK && !e && errno)
        st = lmc_error(LMC_ERR_IO, "%s: cannot list the hub cache: %s", cache, strerror(errno));
    closedir(d);
    free(cache);
    if (st != LMC_OK) {
        lmc_model_summaries_free(list, count);
        return st;
    }
    if (count > 1) qsort(list, (size_t)count, sizeof *list, by_hub_id);
    *out = list;
    *n = count;
    return LMC_OK;
}
