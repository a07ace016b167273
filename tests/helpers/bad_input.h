/* Helpers for the bad-input tests: scratch copies of fixture model folders
 * under /tmp that a test corrupts, hand-made safetensors files, and running
 * the CLI with stderr captured. Functions return false / NULL on failure
 * (the test then fails); returned strings are malloc'd. */
#ifndef LMC_TEST_BAD_INPUT_H
#define LMC_TEST_BAD_INPUT_H

#include "tensor/safetensors.h"

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* A fresh empty directory /tmp/lmc-bad-XXXXXX. */
char *bi_tmpdir(void);
/* Removes dir and the files in it (one level of subfolders too). */
void bi_rmtree(const char *dir);
/* A scratch directory holding a copy of tests/fixtures/models/<name>. */
char *bi_copy_fixture(const char *name);
char *bi_path(const char *dir, const char *name);

bool bi_write(const char *dir, const char *name, const void *data, size_t len);
bool bi_write_str(const char *dir, const char *name, const char *text);
bool bi_truncate(const char *dir, const char *name, long size);
bool bi_remove(const char *dir, const char *name);
long bi_file_size(const char *dir, const char *name);

/* A safetensors file from raw parts: the 8-byte length of `header` (or
 * header_len_override when non-zero), the header text, then data. */
bool bi_write_st(const char *dir, const char *name, const char *header,
                 uint64_t header_len_override, const void *data, size_t data_len);

/* Rewrites dir/file with the writer: tensor `name` dropped (drop) or given
 * a new shape and/or dtype (dtype < 0 keeps it), its data reused. The new
 * shape must not need more bytes than the tensor has. */
typedef struct bi_tensor_edit {
    const char *name;
    bool drop;
    int ndim; /* 0 keeps the shape */
    int64_t shape[4];
    int dtype;
} bi_tensor_edit;
bool bi_edit_tensor(const char *dir, const char *file, const bi_tensor_edit *edit);

/* Sets (value, stolen) or deletes (value NULL) a top-level key of the JSON
 * object in dir/file; key may be "a.b" for a key of a nested object. */
bool bi_edit_json(const char *dir, const char *file, const char *key, json_t *value);

/* Runs `$LMC_CLI args` with stdout to /dev/null and stderr captured.
 * Returns the exit status (-1 when killed by a signal); *err gets stderr. */
int bi_run_cli(const char *args, char **err);
/* Number of '\n'-terminated lines (an unterminated tail counts too). */
int bi_count_lines(const char *text);

/* Asserts a status and that lmc_last_error() holds every given substring. */
#define BI_EXPECT(call, status, ...)                                                               \
    do {                                                                                           \
        lmc_status bi_st_ = (call);                                                                \
        const char *bi_subs_[] = {__VA_ARGS__, NULL};                                              \
        if (bi_st_ != (status))                                                                    \
            fail_msg("%s: status %s, want %s (message: %s)", #call, lmc_status_string(bi_st_),     \
                     lmc_status_string(status), lmc_last_error());                                 \
        for (int bi_i_ = 0; bi_subs_[bi_i_]; bi_i_++)                                              \
            if (!strstr(lmc_last_error(), bi_subs_[bi_i_]))                                        \
                fail_msg("%s: message \"%s\" lacks \"%s\"", #call, lmc_last_error(),               \
                         bi_subs_[bi_i_]);                                                         \
    } while (0)

#endif
