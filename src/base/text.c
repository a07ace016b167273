/* One UTF-8 codec and one Python float repr for the whole library. */
#include "base/text.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t lmc_utf8_sequence(const char *str, size_t n, size_t *bad) {
    const uint8_t *s = (const uint8_t *)str;
    uint8_t c = s[0], lo = 0x80, hi = 0xBF;
    size_t need, dummy;
    if (!bad) bad = &dummy;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF)
        need = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        *bad = 1;
        return 0;
    }
    for (size_t k = 1; k < need; k++) {
        if (k >= n || s[k] < lo || s[k] > hi) {
            *bad = k;
            return 0;
        }
        lo = 0x80;
        hi = 0xBF;
    }
    return need;
}

size_t lmc_utf8_decode(const char *str, size_t n, int32_t *cp) {
    const uint8_t *s = (const uint8_t *)str;
    switch (lmc_utf8_sequence(str, n, NULL)) {
    case 1:
        *cp = s[0];
        return 1;
    case 2:
        *cp = ((s[0] & 0x1F) << 6) | (s[1] & 0x3F);
        return 2;
    case 3:
        *cp = ((s[0] & 0x0F) << 12) | ((s[1] & 0x3F) << 6) | (s[2] & 0x3F);
        return 3;
    case 4:
        *cp = ((s[0] & 0x07) << 18) | ((s[1] & 0x3F) << 12) | ((s[2] & 0x3F) << 6) | (s[3] & 0x3F);
        return 4;
    default:
        *cp = 0xFFFD;
        return 1;
    }
}

size_t lmc_utf8_encode(int32_t cp, char out[4]) {
    uint8_t *o = (uint8_t *)out;
    if (cp < 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (uint8_t)(0xC0 | (cp >> 6));
        o[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (cp >> 12));
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | (cp >> 18));
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

size_t lmc_utf8_valid_prefix(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if ((uint8_t)s[i] < 0x80) {
            i++;
            continue;
        }
        size_t len = lmc_utf8_sequence(s + i, n - i, NULL);
        if (!len) return i;
        i += len;
    }
    return n;
}

size_t lmc_utf8_length(const char *s, size_t n) {
    size_t count = 0;
    for (size_t i = 0; i < n; count++) {
        size_t len = (uint8_t)s[i] < 0x80 ? 1 : lmc_utf8_sequence(s + i, n - i, NULL);
        i += len ? len : 1;
    }
    return count;
}

void lmc_float_repr(double x, char out[LMC_FLOAT_REPR_MAX]) {
    if (isnan(x)) {
        strcpy(out, "nan");
        return;
    }
    if (isinf(x)) {
        strcpy(out, x < 0 ? "-inf" : "inf");
        return;
    }
    /* the shortest %e form that reads back exactly: [-]d[.ddd]e[+-]XX */
    char t[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(t, sizeof t, "%.*e", prec - 1, x);
        if (strtod(t, NULL) == x) break;
    }
    const char *p = t;
    bool neg = *p == '-';
    if (neg) p++;
    char digits[24];
    int nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9' && nd < (int)sizeof digits - 1) digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    int exp10 = atoi(p + 1);
    int decpt = exp10 + 1; /* the digits are 0.d1d2... * 10^decpt */
    char *o = out;
    if (neg) *o++ = '-';
    if (decpt <= -4 || decpt > 16) {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            memcpy(o, digits + 1, (size_t)nd - 1);
            o += nd - 1;
        }
        snprintf(o, 8, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
        return;
    }
    if (decpt <= 0) {
        *o++ = '0';
        *o++ = '.';
        for (int i = 0; i < -decpt; i++) *o++ = '0';
        memcpy(o, digits, (size_t)nd);
        o += nd;
    } else if (decpt >= nd) {
        memcpy(o, digits, (size_t)nd);
        o += nd;
        for (int i = nd; i < decpt; i++) *o++ = '0';
        *o++ = '.';
        *o++ = '0';
    } else {
        memcpy(o, digits, (size_t)decpt);
        o += decpt;
        *o++ = '.';
        memcpy(o, digits + decpt, (size_t)(nd - decpt));
        o += nd - decpt;
    }
    *o = '\0';
}
