/* UTF-8 and Unicode property helpers matching the Rust std / regex-crate
 * semantics that HF tokenizers relies on; categories come from utf8proc. */
#include "tok_internal.h"

#include <pthread.h>
#include <string.h>
#include <utf8proc.h>

lmc_status tok_utf8_lossy_append(tok_buf *out, const char *str, size_t n) {
    /* Rust's Utf8Chunks: each maximal invalid subpart becomes one U+FFFD. */
    const uint8_t *s = (const uint8_t *)str;
    size_t i = 0, run = 0;
    lmc_status st;
    while (i < n) {
        size_t bad = 0, len = s[i] < 0x80 ? 1 : lmc_utf8_sequence(str + i, n - i, &bad);
        if (len) {
            i += len;
            continue;
        }
        if ((st = tok_buf_append(out, str + run, i - run)) != LMC_OK) return st;
        if ((st = tok_buf_append(out, "\xEF\xBF\xBD", 3)) != LMC_OK) return st;
        i += bad;
        run = i;
    }
    return tok_buf_append(out, str + run, n - run);
}

bool tok_is_whitespace(int32_t c) {
    /* Unicode White_Space (PropList.txt), as Rust's char::is_whitespace. */
    if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
    if (c < 0x85) return false;
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
           c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool tok_is_word_char(int32_t c) {
    if (c < 0x80)
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               c == '_';
    if (c == 0x200C || c == 0x200D) return true; /* Join_Control */
    switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC:
        return true;
    default:
        return false;
    }
}

bool tok_is_numeric(int32_t c) {
    if (c < 0x80) return c >= '0' && c <= '9';
    utf8proc_category_t k = utf8proc_category(c);
    return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

bool tok_is_punctuation(int32_t c) {
    if (c < 0x80)
        return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
               (c >= 0x7B && c <= 0x7E);
    switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
        return true;
    default:
        return false;
    }
}

/* ---- GPT-2 byte <-> char table (pre_tokenizers/byte_level.rs) ---------- */

static tok_byte_char_t byte_chars[256];
static int16_t char_bytes[512]; /* code point (< 512) -> byte, -1 */
static pthread_once_t byte_once = PTHREAD_ONCE_INIT;

static void init_byte_tables(void) {
    /* bytes_char(): printable Latin-1 bytes map to themselves, the others
     * to 256 + n in byte order. */
    int extra = 0;
    for (int i = 0; i < 512; i++) char_bytes[i] = -1;
    for (int b = 0; b < 256; b++) {
        bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
        int cp = keep ? b : 256 + extra++;
        char u[4];
        byte_chars[b].n = (uint8_t)lmc_utf8_encode(cp, u);
        memcpy(byte_chars[b].s, u, byte_chars[b].n);
        char_bytes[cp] = (int16_t)b;
    }
}

const tok_byte_char_t *tok_byte_chars(void) {
    pthread_once(&byte_once, init_byte_tables);
    return byte_chars;
}

int tok_char_byte(int32_t cp) {
    pthread_once(&byte_once, init_byte_tables);
    return cp >= 0 && cp < 512 ? char_bytes[cp] : -1;
}
