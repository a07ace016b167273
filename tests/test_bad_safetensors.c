/* Malformed safetensors files: every case is a clear error naming the file
 * and the tensor or field at fault, never a crash or a view past the end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "helpers/bad_input.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct scratch {
    char *dir;
    char *file; /* dir/x.safetensors */
} scratch;

static int setup(void **state) {
    scratch *s = calloc(1, sizeof *s);
    s->dir = bi_tmpdir();
    s->file = s->dir ? bi_path(s->dir, "x.safetensors") : NULL;
    *state = s;
    return s->file ? 0 : -1;
}

static int teardown(void **state) {
    scratch *s = *state;
    bi_rmtree(s->dir);
    free(s->dir);
    free(s->file);
    free(s);
    return 0;
}

/* Writes header + data_len zero bytes to x.safetensors, opens it, and
 * checks the status and message; the struct must come back empty. */
static void expect_header(scratch *s, const char *header, size_t data_len, lmc_status want,
                          const char *sub1, const char *sub2) {
    uint8_t *data = calloc(1, data_len + 1);
    assert_true(bi_write_st(s->dir, "x.safetensors", header, 0, data, data_len));
    free(data);
    lmc_safetensors st;
    BI_EXPECT(lmc_safetensors_open(s->file, &st), want, s->file, sub1, sub2);
    assert_null(st.tensors);
    assert_int_equal(st.n_tensors, 0);
    assert_null(st.file.data);
    lmc_safetensors_close(&st); /* safe on the emptied struct */
}

static void test_good_file_opens(void **state) {
    scratch *s = *state;
    float v[3] = {1, 2, 3};
    assert_true(bi_write_st(s->dir, "x.safetensors",
                            "{\"__metadata__\":{\"format\":\"pt\"},"
                            "\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}",
                            0, v, sizeof v));
    lmc_safetensors st;
    assert_int_equal(lmc_safetensors_open(s->file, &st), LMC_OK);
    assert_int_equal(st.n_tensors, 1);
    const lmc_tensor *t = lmc_safetensors_find(&st, "a");
    assert_non_null(t);
    assert_memory_equal(t->data, v, sizeof v);
    lmc_safetensors_close(&st);
}

static void test_truncated_before_length(void **state) {
    scratch *s = *state;
    lmc_safetensors st;
    assert_true(bi_write(s->dir, "x.safetensors", "", 0));
    BI_EXPECT(lmc_safetensors_open(s->file, &st), LMC_ERR_FORMAT, s->file, "truncated", "0 bytes");
    assert_true(bi_write(s->dir, "x.safetensors", "\x10\0\0\0\0", 5));
    BI_EXPECT(lmc_safetensors_open(s->file, &st), LMC_ERR_FORMAT, s->file, "truncated", "5 bytes");
}

static void test_header_cut(void **state) {
    scratch *s = *state;
    const char *h = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    /* The length field promises the whole header; the file holds half. */
    assert_true(
        bi_write_st(s->dir, "x.safetensors", "{\"a\":{\"dtype\":\"F32\"", strlen(h), NULL, 0));
    lmc_safetensors st;
    BI_EXPECT(lmc_safetensors_open(s->file, &st), LMC_ERR_FORMAT, s->file, "header length",
              "runs past the end of the file");
}

static void test_header_length_absurd(void **state) {
    scratch *s = *state;
    lmc_safetensors st;
    assert_true(bi_write_st(s->dir, "x.safetensors", "{}", UINT64_MAX, NULL, 0));
    BI_EXPECT(lmc_safetensors_open(s->file, &st), LMC_ERR_FORMAT, s->file, "18446744073709551615",
              "limit");
    assert_true(bi_write_st(s->dir, "x.safetensors", "{}", (uint64_t)1 << 40, NULL, 0));
    BI_EXPECT(lmc_safetensors_open(s->file, &st), LMC_ERR_FORMAT, s->file, "header length",
              "limit");
    /* Within the limit but past the end. */
    assert_true(bi_write_st(s->dir, "x.safetensors", "{}", 4096, NULL, 0));
    BI_EXPECT(lmc_safetensors_open(s->file, &st), LMC_ERR_FORMAT, s->file, "4096", "past the end");
}

static void test_header_not_json(void **state) {
    scratch *s = *state;
    expect_header(s, "{\"a\": {\"dtype\": ", 0, LMC_ERR_FORMAT, "not valid JSON", "column");
    expect_header(s, "hello", 0, LMC_ERR_FORMAT, "not valid JSON", NULL);
    expect_header(s, "", 0, LMC_ERR_FORMAT, "not valid JSON", NULL);
    /* A NUL inside the header is not JSON either. */
    assert_true(bi_write_st(s->dir, "x.safetensors", "{}", 4, "\0\0", 2));
    lmc_safetensors st;
    BI_EXPECT(lmc_safetensors_open(s->file, &st), LMC_ERR_FORMAT, s->file, "not valid JSON");
}

static void test_header_not_object(void **state) {
    scratch *s = *state;
    expect_header(s, "[1, 2, 3]", 0, LMC_ERR_FORMAT, "not a JSON object", NULL);
    expect_header(s, "{\"a\": 3}", 0, LMC_ERR_FORMAT, "'a'", "not an object");
    expect_header(s, "{\"a\": {\"dtype\": \"F32\", \"shape\": [1]}}", 4, LMC_ERR_FORMAT, "'a'",
                  "data_offsets");
    expect_header(s, "{\"a\": {\"dtype\": 7, \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
                  LMC_ERR_FORMAT, "'a'", "dtype");
    expect_header(s, "{\"a\": {\"dtype\": \"F32\", \"shape\": 1, \"data_offsets\": [0, 4]}}", 4,
                  LMC_ERR_FORMAT, "'a'", "shape");
}

static void test_data_offsets_bad(void **state) {
    scratch *s = *state;
    /* Past the end of the data. */
    expect_header(s, "{\"w\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}}", 8,
                  LMC_ERR_FORMAT, "'w'", "past the end of the data (8 bytes)");
    expect_header(s,
                  "{\"w\": {\"dtype\": \"U8\", \"shape\": [0], "
                  "\"data_offsets\": [9223372036854775807, 9223372036854775807]}}",
                  8, LMC_ERR_FORMAT, "'w'", "past the end");
    /* Reversed and negative. */
    expect_header(s, "{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 0]}}", 8,
                  LMC_ERR_FORMAT, "'w'", "bad data_offsets [8, 0]");
    expect_header(s, "{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [-8, 0]}}", 8,
                  LMC_ERR_FORMAT, "'w'", "bad data_offsets");
    /* Not [begin, end] of integers. */
    expect_header(s, "{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 4, 8]}}",
                  8, LMC_ERR_FORMAT, "'w'", "[begin, end]");
    expect_header(s, "{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8.0]}}", 8,
                  LMC_ERR_FORMAT, "'w'", "[begin, end]");
    /* Span does not match dtype * shape. */
    expect_header(s, "{\"w\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 8]}}", 16,
                  LMC_ERR_FORMAT, "'w'", "F32 [3] needs 12 bytes but data_offsets span 8");
    expect_header(s, "{\"w\": {\"dtype\": \"BF16\", \"shape\": [2, 2], \"data_offsets\": [0, 16]}}",
                  16, LMC_ERR_FORMAT, "'w'", "needs 8 bytes");
}

static void test_tensors_overlap(void **state) {
    scratch *s = *state;
    expect_header(s,
                  "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
                  " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}",
                  12, LMC_ERR_FORMAT, "tensors 'a' and 'b' overlap", NULL);
    expect_header(s,
                  "{\"big\": {\"dtype\": \"U8\", \"shape\": [16], \"data_offsets\": [0, 16]},"
                  " \"x\": {\"dtype\": \"U8\", \"shape\": [2], \"data_offsets\": [16, 18]},"
                  " \"in\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [4, 8]}}",
                  18, LMC_ERR_FORMAT, "'big' and 'in' overlap", NULL);
}

static void test_unknown_dtype(void **state) {
    scratch *s = *state;
    expect_header(s, "{\"w\": {\"dtype\": \"F8_E4M3\", \"shape\": [4], \"data_offsets\": [0, 4]}}",
                  4, LMC_ERR_UNSUPPORTED, "'w'", "unknown dtype 'F8_E4M3'");
    expect_header(s, "{\"w\": {\"dtype\": \"Q4\", \"shape\": [4], \"data_offsets\": [0, 2]}}", 2,
                  LMC_ERR_UNSUPPORTED, "'w'", "unknown dtype 'Q4' (supported: F32");
    expect_header(s, "{\"w\": {\"dtype\": \"f32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
                  LMC_ERR_UNSUPPORTED, "'w'", "'f32'");
}

static void test_bad_shape(void **state) {
    scratch *s = *state;
    expect_header(s, "{\"w\": {\"dtype\": \"F32\", \"shape\": [2, -2], \"data_offsets\": [0, 16]}}",
                  16, LMC_ERR_FORMAT, "'w'", "shape[1] is not a size");
    expect_header(s, "{\"w\": {\"dtype\": \"F32\", \"shape\": [\"2\"], \"data_offsets\": [0, 8]}}",
                  8, LMC_ERR_FORMAT, "'w'", "shape[0] is not a size");
    /* Element count overflows uint64; then the byte count does. */
    expect_header(s,
                  "{\"w\": {\"dtype\": \"U8\", \"shape\": [4294967296, 4294967296, 16], "
                  "\"data_offsets\": [0, 0]}}",
                  0, LMC_ERR_FORMAT, "'w'", "shape overflows");
    expect_header(s,
                  "{\"w\": {\"dtype\": \"I64\", \"shape\": [4611686018427387904], "
                  "\"data_offsets\": [0, 0]}}",
                  0, LMC_ERR_FORMAT, "'w'", "size overflows");
    expect_header(s,
                  "{\"w\": {\"dtype\": \"U8\", \"shape\": [1,1,1,1,1,1,1,1,1], "
                  "\"data_offsets\": [0, 1]}}",
                  1, LMC_ERR_UNSUPPORTED, "'w'", "9 dimensions");
}

static void test_bad_metadata(void **state) {
    scratch *s = *state;
    expect_header(s, "{\"__metadata__\": [\"pt\"]}", 0, LMC_ERR_FORMAT,
                  "__metadata__ is not an object", NULL);
    expect_header(s, "{\"__metadata__\": \"pt\"}", 0, LMC_ERR_FORMAT,
                  "__metadata__ is not an object", NULL);
    expect_header(s, "{\"__metadata__\": {\"format\": \"pt\", \"step\": 3}}", 0, LMC_ERR_FORMAT,
                  "__metadata__['step'] is not a string", NULL);
    /* A metadata error after a good tensor frees everything (ASan checks). */
    expect_header(s,
                  "{\"a\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0, 1]},"
                  " \"__metadata__\": {\"x\": null}}",
                  1, LMC_ERR_FORMAT, "__metadata__['x']", NULL);
}

static void test_error_after_metadata_frees_it(void **state) {
    scratch *s = *state;
    expect_header(s,
                  "{\"__metadata__\": {\"format\": \"pt\"},"
                  " \"a\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0, 9]}}",
                  1, LMC_ERR_FORMAT, "'a'", "past the end");
}

static void test_parse_in_memory(void **state) {
    (void)state;
    /* lmc_safetensors_parse names `what` in its errors. */
    lmc_safetensors st;
    BI_EXPECT(lmc_safetensors_parse((const uint8_t *)"abc", 3, "mem.safetensors", &st),
              LMC_ERR_FORMAT, "mem.safetensors", "truncated");
}

/* The writer refuses what the reader would reject, and its files read back. */
static void test_writer_checks(void **state) {
    scratch *s = *state;
    lmc_safetensors_writer *w;
    assert_int_equal(lmc_safetensors_writer_create(&w), LMC_OK);
    uint8_t data[64] = {0};
    int64_t neg[2] = {2, -1}, ok[2] = {4, 4};
    BI_EXPECT(lmc_safetensors_writer_add(w, "neg", LMC_DTYPE_F32, 2, neg, data),
              LMC_ERR_INVALID_ARG, "'neg'");
    BI_EXPECT(lmc_safetensors_writer_add(w, "dims", LMC_DTYPE_F32, LMC_MAX_DIMS + 1, ok, data),
              LMC_ERR_INVALID_ARG, "'dims'");
    assert_int_equal(lmc_safetensors_writer_add(w, "a", LMC_DTYPE_F32, 2, ok, data), LMC_OK);
    BI_EXPECT(lmc_safetensors_writer_add(w, "a", LMC_DTYPE_U8, 1, ok, data), LMC_ERR_INVALID_ARG,
              "duplicate tensor 'a'");
    assert_int_equal(lmc_safetensors_writer_set_metadata(w, "format", "pt"), LMC_OK);
    BI_EXPECT(lmc_safetensors_writer_write(w, "/nonexistent-dir/x.safetensors"), LMC_ERR_IO,
              "/nonexistent-dir/x.safetensors");
    assert_int_equal(lmc_safetensors_writer_write(w, s->file), LMC_OK);
    lmc_safetensors_writer_free(w);
    lmc_safetensors st;
    assert_int_equal(lmc_safetensors_open(s->file, &st), LMC_OK);
    assert_int_equal(st.n_tensors, 1);
    assert_non_null(st.metadata);
    lmc_safetensors_close(&st);
}

static void test_open_not_a_file(void **state) {
    scratch *s = *state;
    lmc_safetensors st;
    BI_EXPECT(lmc_safetensors_open(s->dir, &st), LMC_ERR_IO, s->dir, "not a regular file");
    BI_EXPECT(lmc_safetensors_open("/nonexistent/x.safetensors", &st), LMC_ERR_IO,
              "/nonexistent/x.safetensors", "cannot open");
}

int main(void) {
    const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
        T(test_good_file_opens),  T(test_truncated_before_length),
        T(test_header_cut),       T(test_header_length_absurd),
        T(test_header_not_json),  T(test_header_not_object),
        T(test_data_offsets_bad), T(test_tensors_overlap),
        T(test_unknown_dtype),    T(test_bad_shape),
        T(test_bad_metadata),     T(test_error_after_metadata_frees_it),
        T(test_parse_in_memory),  T(test_writer_checks),
        T(test_open_not_a_file),
#undef T
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
