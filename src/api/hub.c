/* The local Hugging Face hub cache (huggingface_hub constants.py for the
 * folder, file_download.py for the layout): a model ORG/NAME lives in
 * CACHE/models--ORG--NAME with blobs/ (the files, named by their hash),
 * snapshots/REV/ (one folder per commit, its files relative symlinks to
 * ../../blobs/...) and refs/main (the commit of the main branch). */
#include "api/hub.h"

#include <dirent.h>
#include <errno.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
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
 * leave the cache), at most 96 characters, no ".git" ending. */
static lmc_status check_hub_id(const char *id, const char **slash) {
    if (!id || !*id) return lmc_error(LMC_ERR_INVALID_ARG, "hub id is empty");
    size_t n = strlen(id);
    for (size_t i = 0; i < n; i++)
        if (!is_name_char(id[i]) && id[i] != '/')
            return lmc_error(LMC_ERR_INVALID_ARG,
                             "hub id: character %zu is not one of A-Z a-z 0-9 . _ - /", i + 1);
    *slash = strchr(id, '/');
    if (*slash && strchr(*slash + 1, '/'))
        return lmc_error(LMC_ERR_INVALID_ARG, "hub id '%s': more than one '/' (want ORG/NAME)", id);
    if (n > 96) return lmc_error(LMC_ERR_INVALID_ARG, "hub id '%s': over 96 characters", id);
    const char *name = *slash ? *slash + 1 : id;
    size_t org_len = *slash ? (size_t)(*slash - id) : 0, name_len = strlen(name);
    if (*slash && (org_len == 0 || !is_word_char(id[0]) || !is_word_char(id[org_len - 1])))
        return lmc_error(LMC_ERR_INVALID_ARG,
                         "hub id '%s': ORG must start and end with a letter, digit or _", id);
    if (name_len == 0 || !is_word_char(name[0]) || !is_word_char(name[name_len - 1]))
        return lmc_error(LMC_ERR_INVALID_ARG,
                         "hub id '%s': NAME must start and end with a letter, digit or _", id);
    if (strstr(id, "--") || strstr(id, ".."))
        return lmc_error(LMC_ERR_INVALID_ARG, "hub id '%s': cannot hold '--' or '..'", id);
    if (n >= 4 && !strcmp(id + n - 4, ".git"))
        return lmc_error(LMC_ERR_INVALID_ARG, "hub id '%s': cannot end with .git", id);
    return LMC_OK;
}

/* ---- the search ------------------------------------------------------------ */

/* "PATH (WHAT), PATH (WHAT), ...": where lmc_hub_find looked. */
typedef struct looked_list {
    char *text;
    bool oom;
} looked_list;

static void note(looked_list *l, const char *path, const char *what) {
    if (l->oom) return;
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

lmc_status lmc_hub_find(const char *hub_id, char **dir, char **looked) {
    if (dir) *dir = NULL;
    if (looked) *looked = NULL;
    if (!dir) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_hub_find: dir is NULL");
    const char *slash = NULL;
    lmc_status st = check_hub_id(hub_id, &slash);
    if (st != LMC_OK) return st;
    looked_list l = {NULL, false};
    char *cache = lmc_hub_cache_dir(), *folder = NULL, *repo = NULL, *refs = NULL, *snaps = NULL;
    if (cache)
        folder = slash ? lmc_sprintf("models--%.*s--%s", (int)(slash - hub_id), hub_id, slash + 1)
                       : lmc_sprintf("models--%s", hub_id);
    if (folder) repo = lmc_path_join(cache, folder);
    if (repo) refs = lmc_path_join(repo, "refs/main");
    if (repo) snaps = lmc_path_join(repo, "snapshots");
    if (!refs || !snaps) {
        st = lmc_error(LMC_ERR_NOMEM, "out of memory");
        goto done;
    }
    st = from_ref(refs, snaps, &l, dir);
    if (st == LMC_OK && !*dir) st = newest_snapshot(snaps, &l, dir);
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
    free(refs);
    free(snaps);
    return st;
}
