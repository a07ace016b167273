/* Thread-local last-error text and the log sink. */
#include "base.h"

#include <stdio.h>
#include <string.h>

#define LMC_ERROR_MAX 1024

static _Thread_local char g_error[LMC_ERROR_MAX];

static lmc_log_fn g_log_fn;
static void *g_log_ud;

const char *lmc_last_error(void) {
    return g_error;
}

void lmc_clear_error(void) {
    g_error[0] = '\0';
}

lmc_status lmc_error(lmc_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_error, sizeof g_error, fmt, ap);
    va_end(ap);
    return status;
}

lmc_status lmc_error_prefix(lmc_status status, const char *fmt, ...) {
    char old[LMC_ERROR_MAX];
    memcpy(old, g_error, sizeof old);
    char prefix[LMC_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    if (snprintf(g_error, sizeof g_error, "%s: %s", prefix, old) < 0) g_error[0] = '\0';
    return status;
}

const char *lmc_status_string(lmc_status status) {
    switch (status) {
    case LMC_OK:
        return "ok";
    case LMC_ERR_INVALID_ARG:
        return "invalid argument";
    case LMC_ERR_IO:
        return "i/o error";
    case LMC_ERR_FORMAT:
        return "format error";
    case LMC_ERR_UNSUPPORTED:
        return "unsupported";
    case LMC_ERR_NOMEM:
        return "out of memory";
    case LMC_ERR_NOT_FOUND:
        return "not found";
    case LMC_ERR_SHAPE:
        return "shape mismatch";
    case LMC_ERR_RANGE:
        return "out of range";
    case LMC_ERR_LIMIT:
        return "limit reached";
    case LMC_ERR_STOPPED:
        return "stopped";
    }
    return "unknown status";
}

void lmc_set_log_callback(lmc_log_fn fn, void *user_data) {
    g_log_fn = fn;
    g_log_ud = user_data;
}

void lmc_log(lmc_log_level level, const char *fmt, ...) {
    if (!g_log_fn) return;
    char msg[LMC_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    g_log_fn(level, msg, g_log_ud);
}
