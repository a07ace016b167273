/* libFuzzer: encoding arbitrary bytes (and decoding arbitrary ids) with a
 * small tokenizer that uses every pipeline stage: added tokens with
 * lstrip/rstrip/single_word, normalizers, Split/ByteLevel/Metaspace/Digits/
 * Punctuation pre-tokenizers, byte fallback, and a decoder chain. The first
 * input byte picks the configuration. */
#include "tokenizer/tok_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const configs[] = {
    /* byte-level BPE, Llama 3 style */
    "{\"added_tokens\": [{\"id\": 7, \"content\": \"<|eot|>\", \"special\": true, \"normalized\": "
    "false},"
    " {\"id\": 8, \"content\": \"ab\", \"single_word\": true, \"lstrip\": true, \"rstrip\": true,"
    " \"normalized\": true}],"
    " \"normalizer\": {\"type\": \"NFC\"},"
    " \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", "
    "\"pattern\":"
    " {\"Regex\": \"(?i:'s|'t)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| "
    "?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},"
    " \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", "
    "\"add_prefix_space\": true,"
    " \"use_regex\": false}]},"
    " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": "
    "{\"id\": \"<|eot|>\"}},"
    " {\"Sequence\": {\"id\": \"A\"}}], \"special_tokens\": {\"<|eot|>\": {\"id\": \"<|eot|>\", "
    "\"ids\": [7]}}},"
    " \"decoder\": {\"type\": \"ByteLevel\"},"
    " \"model\": {\"type\": \"BPE\", \"ignore_merges\": true, \"vocab\": {BYTES, \"\\u0120a\": 300,"
    " \"\\u0120ab\": 301, \"<|eot|>\": 7}, \"merges\": [\"\\u0120 a\", [\"\\u0120a\", \"b\"]]}}",
    /* SentencePiece style with byte fallback */
    "{\"added_tokens\": [{\"id\": 0, \"content\": \"<unk>\", \"special\": true, \"normalized\": "
    "false}],"
    " \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", "
    "\"prepend\": \"\\u2581\"},"
    " {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\\u2581\"}, "
    "{\"type\": \"NFKD\"},"
    " {\"type\": \"Lowercase\"}, {\"type\": \"Strip\", \"strip_left\": true, \"strip_right\": "
    "false}]},"
    " \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\", "
    "\"individual_digits\": true},"
    " {\"type\": \"Punctuation\", \"behavior\": \"MergedWithNext\"}, {\"type\": \"Split\", "
    "\"pattern\": {\"String\": \"\\u2581\"},"
    " \"behavior\": \"MergedWithPrevious\", \"invert\": false}]},"
    " \"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": "
    "{\"String\": \"\\u2581\"},"
    " \"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}, {\"type\": "
    "\"Strip\", \"content\": \" \","
    " \"start\": 1, \"stop\": 1}]},"
    " \"model\": {\"type\": \"BPE\", \"byte_fallback\": true, \"unk_token\": \"<unk>\", "
    "\"fuse_unk\": true,"
    " \"vocab\": {FALLBACK, \"<unk>\": 0, \"\\u2581\": 300, \"a\": 301, \"\\u2581a\": 302}, "
    "\"merges\": [\"\\u2581 a\"]}}",
    /* Metaspace + WordPiece-style decoding, no normalizer */
    "{\"added_tokens\": [{\"id\": 3, \"content\": \"[X]\", \"special\": false, \"normalized\": "
    "false,"
    " \"lstrip\": true, \"rstrip\": true}],"
    " \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": "
    "\"WhitespaceSplit\"},"
    " {\"type\": \"Metaspace\", \"replacement\": \"\\u2581\", \"prepend_scheme\": \"first\", "
    "\"split\": true},"
    " {\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\s*\"}, \"behavior\": \"Contiguous\", "
    "\"invert\": true},"
    " {\"type\": \"Whitespace\"}]},"
    " \"post_processor\": {\"type\": \"RobertaProcessing\", \"sep\": [\"b\", 2], \"cls\": [\"a\", "
    "1]},"
    " \"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Metaspace\", "
    "\"replacement\": \"\\u2581\"},"
    " {\"type\": \"WordPiece\", \"prefix\": \"##\"}]},"
    " \"model\": {\"type\": \"BPE\", \"continuing_subword_prefix\": \"##\", "
    "\"end_of_word_suffix\": \"</w>\","
    " \"vocab\": {\"a\": 1, \"b\": 2, \"[X]\": 3, \"##a\": 4, \"aa\": 5, \"\\u2581\": 6, "
    "\"b</w>\": 7,"
    " \"##b</w>\": 8}, \"merges\": [\"a ##a\"]}}",
};

static lmc_tokenizer *toks[3];

static char *expand(const char *cfg) {
    /* BYTES: the 256 byte-level chars; FALLBACK: the 256 <0xHH> tokens. */
    static char buf[65536];
    const char *p = strstr(cfg, "BYTES"), *q = strstr(cfg, "FALLBACK");
    const char *at = p ? p : q;
    size_t o = (size_t)(at - cfg);
    memcpy(buf, cfg, o);
    if (p) {
        const tok_byte_char_t *bc = tok_byte_chars();
        for (int b = 0; b < 256; b++) {
            char tmp[3] = {bc[b].s[0], bc[b].n == 2 ? bc[b].s[1] : 0, 0};
            if (tmp[0] == '"' || tmp[0] == '\\')
                o += (size_t)snprintf(buf + o, sizeof buf - o, "%s\"\\%s\": %d", b ? ", " : "", tmp,
                                      b);
            else
                o += (size_t)snprintf(buf + o, sizeof buf - o, "%s\"%s\": %d", b ? ", " : "", tmp,
                                      b);
        }
    } else {
        for (int b = 0; b < 256; b++)
            o += (size_t)snprintf(buf + o, sizeof buf - o, "%s\"<0x%02X>\": %d", b ? ", " : "", b,
                                  1000 + b);
    }
    snprintf(buf + o, sizeof buf - o, "%s", at + (p ? 5 : 8));
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int which = data[0] % 3;
    if (!toks[which]) {
        const char *cfg = configs[which];
        char *text = strstr(cfg, "BYTES") || strstr(cfg, "FALLBACK") ? expand(cfg) : (char *)cfg;
        if (tok_load_json_text(text, strlen(text), "fuzz config", &toks[which]) != LMC_OK) {
            fprintf(stderr, "config %d: %s\n", which, lmc_last_error());
            abort();
        }
    }
    const lmc_tokenizer *tok = toks[which];
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    unsigned flags = (data[0] >> 2) & 3;
    int32_t *ids = NULL;
    size_t n = 0;
    if (lmc_tokenizer_encode(tok, text, len, flags, &ids, &n) == LMC_OK) {
        char *out = NULL;
        size_t out_len = 0;
        if (lmc_tokenizer_decode(tok, ids, n, 0, &out, &out_len) != LMC_OK) abort();
        lmc_free(out);
    }
    lmc_free(ids);
    /* Arbitrary ids (in and out of range) through the streaming decoder,
     * whose concatenation must equal the full decode. */
    size_t m = len / 2;
    int32_t *raw = malloc((m ? m : 1) * sizeof *raw);
    for (size_t i = 0; i < m; i++)
        raw[i] = (int32_t)(((uint8_t)text[2 * i] | ((uint8_t)text[2 * i + 1] << 8)) % 1400) - 20;
    int skip = data[0] >> 7;
    char *full = NULL;
    size_t full_len = 0;
    if (lmc_tokenizer_decode(tok, raw, m, skip, &full, &full_len) != LMC_OK) abort();
    lmc_detokenizer *d = NULL;
    if (lmc_detokenizer_create(tok, skip, &d) != LMC_OK) abort();
    char *cat = malloc(full_len * 4 + 64);
    size_t cat_len = 0, cat_cap = full_len * 4 + 64;
    for (size_t i = 0; i <= m; i++) {
        const char *t;
        size_t tl;
        lmc_status st =
            i < m ? lmc_detokenizer_push(d, raw[i], &t, &tl) : lmc_detokenizer_flush(d, &t, &tl);
        if (st != LMC_OK) abort();
        if (cat_len + tl > cat_cap) {
            cat_cap = (cat_len + tl) * 2;
            cat = realloc(cat, cat_cap);
        }
        memcpy(cat + cat_len, t, tl);
        cat_len += tl;
    }
    if (getenv("FUZZ_CHECK_STREAM") && (cat_len != full_len || memcmp(cat, full, full_len))) {
        fprintf(stderr, "config %d skip %d ids:", which, skip);
        for (size_t i = 0; i < m; i++) fprintf(stderr, " %d", (int)raw[i]);
        fprintf(stderr, "\nfull: [%.*s]\nstream: [%.*s]\n", (int)full_len, full, (int)cat_len, cat);
        abort();
    }
    free(cat);
    lmc_detokenizer_free(d);
    lmc_free(full);
    free(raw);
    return 0;
}
