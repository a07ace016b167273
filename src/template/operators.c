/* Python operators on values: arithmetic, ~, comparisons, `in`, slicing
 * (CPython semantics: floor division and modulo round toward -inf, `/` is
 * always float, bool is an int, str/list concatenation and repetition). */
#include "template/eval.h"

#include <math.h>
#include <string.h>

static lmc_status checked_int(tpl_ctx *c, const node *at, bool overflow, int64_t r, tv *out) {
    if (overflow) return tpl_fail(c, at, LMC_ERR_UNSUPPORTED, "integer overflow");
    *out = tv_int(r);
    return LMC_OK;
}

static int64_t as_int(tv v) {
    return v.type == TV_BOOL ? v.u.b : v.u.i;
}

static lmc_status repeat_seq(tpl_ctx *c, tv seq, int64_t times, tv *out) {
    if (times < 0) times = 0;
    if (seq.type == TV_STRING) {
        size_t len = seq.u.s->len;
        if (len && (uint64_t)times > c->opts.max_output / len)
            return lmc_error(LMC_ERR_LIMIT, "string repetition exceeds the output limit");
        tpl_buf b;
        tpl_buf_init(&b, c->arena, c->opts.max_output);
        lmc_status st = tpl_buf_append(&b, "", 0);
        for (int64_t i = 0; i < times && st == LMC_OK; i++)
            st = tpl_buf_append(&b, seq.u.s->data, len);
        if (st != LMC_OK) return st;
        return tpl_str(c, b.data, b.len, out);
    }
    size_t len = seq.u.l->len;
    if (len && (uint64_t)times > c->opts.max_steps / len)
        return lmc_error(LMC_ERR_LIMIT, "list repetition exceeds the step limit");
    if (!tv_make_list(c->arena, len * (size_t)times, seq.u.l->is_tuple, out)) return tpl_nomem(c);
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < len; k++) out->u.l->items[out->u.l->len++] = seq.u.l->items[k];
    return LMC_OK;
}

lmc_status tpl_binary(tpl_ctx *c, const node *at, bin_op op, tv a, tv b, tv *out) {
    static const char *const names[] = {"+", "-", "*", "/", "//", "%", "**", "~"};
    if (op == OP_CONCAT) {
        tpl_buf buf;
        tpl_buf_init(&buf, c->arena, c->opts.max_output);
        lmc_status st = tv_to_str(a, &buf);
        if (st == LMC_OK) st = tv_to_str(b, &buf);
        if (st == LMC_OK) st = tpl_buf_append(&buf, "", 0);
        if (st != LMC_OK) return st;
        return tpl_str(c, buf.data, buf.len, out);
    }
    if (a.type == TV_UNDEFINED) return tpl_undefined_error(a);
    if (b.type == TV_UNDEFINED) return tpl_undefined_error(b);
    bool nums = tv_is_number(a) && tv_is_number(b);
    bool ints = nums && a.type != TV_FLOAT && b.type != TV_FLOAT;
    int64_t r = 0;
    switch (op) {
    case OP_ADD:
        if (ints) {
            bool ovf = __builtin_add_overflow(as_int(a), as_int(b), &r);
            return checked_int(c, at, ovf, r, out);
        }
        if (nums) {
            *out = tv_float(tv_as_double(a) + tv_as_double(b));
            return LMC_OK;
        }
        if (a.type == TV_STRING && b.type == TV_STRING) {
            size_t n = a.u.s->len + b.u.s->len;
            if (n > c->opts.max_output)
                return lmc_error(LMC_ERR_LIMIT, "string exceeds the output limit");
            if (!tv_make_str(c->arena, NULL, n, out)) return tpl_nomem(c);
            memcpy(out->u.s->data, a.u.s->data, a.u.s->len);
            memcpy(out->u.s->data + a.u.s->len, b.u.s->data, b.u.s->len);
            return LMC_OK;
        }
        if (a.type == TV_LIST && b.type == TV_LIST && a.u.l->is_tuple == b.u.l->is_tuple) {
            size_t n = a.u.l->len + b.u.l->len;
            if (!tv_make_list(c->arena, n, a.u.l->is_tuple, out)) return tpl_nomem(c);
            if (a.u.l->len) memcpy(out->u.l->items, a.u.l->items, a.u.l->len * sizeof(tv));
            if (b.u.l->len)
                memcpy(out->u.l->items + a.u.l->len, b.u.l->items, b.u.l->len * sizeof(tv));
            out->u.l->len = n;
            return LMC_OK;
        }
        break;
    case OP_SUB:
        if (ints) {
            bool ovf = __builtin_sub_overflow(as_int(a), as_int(b), &r);
            return checked_int(c, at, ovf, r, out);
        }
        if (nums) {
            *out = tv_float(tv_as_double(a) - tv_as_double(b));
            return LMC_OK;
        }
        break;
    case OP_MUL:
        if (ints) {
            bool ovf = __builtin_mul_overflow(as_int(a), as_int(b), &r);
            return checked_int(c, at, ovf, r, out);
        }
        if (nums) {
            *out = tv_float(tv_as_double(a) * tv_as_double(b));
            return LMC_OK;
        }
        if ((a.type == TV_STRING || a.type == TV_LIST) && (b.type == TV_INT || b.type == TV_BOOL))
            return repeat_seq(c, a, as_int(b), out);
        if ((b.type == TV_STRING || b.type == TV_LIST) && (a.type == TV_INT || a.type == TV_BOOL))
            return repeat_seq(c, b, as_int(a), out);
        break;
    case OP_DIV:
        if (nums) {
            if (tv_as_double(b) == 0.0) return tpl_fail(c, at, LMC_ERR_FORMAT, "division by zero");
            *out = tv_float(tv_as_double(a) / tv_as_double(b));
            return LMC_OK;
        }
        break;
    case OP_FLOORDIV:
    case OP_MOD:
        if (ints) {
            int64_t x = as_int(a), y = as_int(b);
            if (y == 0)
                return tpl_fail(c, at, LMC_ERR_FORMAT, "integer division or modulo by zero");
            if (x == INT64_MIN && y == -1)
                return tpl_fail(c, at, LMC_ERR_UNSUPPORTED, "integer overflow");
            int64_t q = x / y, m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) { /* Python floors toward -inf */
                q--;
                m += y;
            }
            *out = tv_int(op == OP_MOD ? m : q);
            return LMC_OK;
        }
        if (nums) {
            double x = tv_as_double(a), y = tv_as_double(b);
            if (y == 0.0) return tpl_fail(c, at, LMC_ERR_FORMAT, "float division by zero");
            double m = fmod(x, y);
            if (m != 0.0 && ((m < 0) != (y < 0))) m += y;
            *out = tv_float(op == OP_MOD ? m : floor(x / y));
            return LMC_OK;
        }
        if (op == OP_MOD && a.type == TV_STRING)
            return tpl_fail(c, at, LMC_ERR_UNSUPPORTED,
                            "printf-style '%%' formatting is not supported");
        break;
    case OP_POW:
        if (ints && as_int(b) >= 0) {
            int64_t base = as_int(a), e = as_int(b), acc = 1;
            bool ovf = false;
            while (e-- > 0 && !ovf) ovf = __builtin_mul_overflow(acc, base, &acc);
            return checked_int(c, at, ovf, acc, out);
        }
        if (nums) {
            *out = tv_float(pow(tv_as_double(a), tv_as_double(b)));
            return LMC_OK;
        }
        break;
    default:
        break;
    }
    return tpl_fail(c, at, LMC_ERR_FORMAT, "unsupported operand type(s) for %s: '%s' and '%s'",
                    names[op], tv_type_name(a), tv_type_name(b));
}

lmc_status tpl_contains(tv container, tv item, bool *out) {
    switch (container.type) {
    case TV_UNDEFINED:
        *out = false;
        return LMC_OK;
    case TV_STRING:
        if (item.type != TV_STRING)
            return lmc_error(LMC_ERR_FORMAT,
                             "'in <string>' requires string as left operand, not %s",
                             tv_type_name(item));
        *out = tpl_str_contains(container, item);
        return LMC_OK;
    case TV_LIST:
        *out = false;
        for (size_t i = 0; i < container.u.l->len && !*out; i++)
            *out = tv_equal(container.u.l->items[i], item);
        return LMC_OK;
    case TV_DICT:
    case TV_NAMESPACE:
        *out = tv_dict_get(container.u.d, item) != NULL;
        return LMC_OK;
    default:
        return lmc_error(LMC_ERR_FORMAT, "argument of type '%s' is not iterable",
                         tv_type_name(container));
    }
}

lmc_status tpl_compare_op(cmp_op op, tv a, tv b, bool *out) {
    int cmp = 0;
    lmc_status st;
    switch (op) {
    case CMP_EQ:
        *out = tv_equal(a, b);
        return LMC_OK;
    case CMP_NE:
        *out = !tv_equal(a, b);
        return LMC_OK;
    case CMP_IN:
    case CMP_NOTIN:
        st = tpl_contains(b, a, out);
        if (op == CMP_NOTIN) *out = !*out;
        return st;
    default:
        if ((st = tv_compare(a, b, &cmp)) != LMC_OK) return st;
        *out = op == CMP_LT ? cmp < 0 : op == CMP_LE ? cmp <= 0 : op == CMP_GT ? cmp > 0 : cmp >= 0;
        return LMC_OK;
    }
}

/* Python's slice.indices(). */
static void slice_indices(int64_t len, tv start, tv stop, int64_t step, int64_t *s, int64_t *e) {
    int64_t lo = step < 0 ? -1 : 0, hi = step < 0 ? len - 1 : len;
    if (start.type == TV_NONE)
        *s = step < 0 ? hi : lo;
    else {
        *s = as_int(start);
        if (*s < 0)
            *s = *s + len < lo ? lo : *s + len;
        else if (*s > hi)
            *s = hi;
    }
    if (stop.type == TV_NONE)
        *e = step < 0 ? lo : hi;
    else {
        *e = as_int(stop);
        if (*e < 0)
            *e = *e + len < lo ? lo : *e + len;
        else if (*e > hi)
            *e = hi;
    }
}

lmc_status tpl_slice(tpl_ctx *c, const node *at, tv obj, const tv parts[3], tv *out) {
    for (int k = 0; k < 3; k++)
        if (parts[k].type != TV_NONE && parts[k].type != TV_INT && parts[k].type != TV_BOOL)
            return tpl_fail(c, at, LMC_ERR_FORMAT, "slice indices must be integers or None");
    int64_t step = parts[2].type == TV_NONE ? 1 : as_int(parts[2]);
    if (step == 0) return tpl_fail(c, at, LMC_ERR_FORMAT, "slice step cannot be zero");
    if (obj.type == TV_UNDEFINED) return tpl_undefined_error(obj);
    if (obj.type != TV_LIST && obj.type != TV_STRING) {
        *out = tv_undefined("object is not subscriptable");
        return LMC_OK;
    }
    tv seq = obj;
    lmc_status st;
    if (obj.type == TV_STRING && (st = tpl_iterate(c, obj, &seq)) != LMC_OK) return st;
    int64_t len = (int64_t)seq.u.l->len, s, e;
    slice_indices(len, parts[0], parts[1], step, &s, &e);
    tv res;
    if (!tv_make_list(c->arena, 0, seq.u.l->is_tuple, &res)) return tpl_nomem(c);
    for (int64_t i = s; step > 0 ? i < e : i > e; i += step)
        if (!tv_list_push(c->arena, res.u.l, seq.u.l->items[i])) return tpl_nomem(c);
    if (obj.type != TV_STRING) {
        *out = res;
        return LMC_OK;
    }
    tpl_buf b;
    tpl_buf_init(&b, c->arena, 0);
    if ((st = tpl_buf_append(&b, "", 0)) != LMC_OK) return st;
    for (size_t i = 0; i < res.u.l->len; i++)
        if ((st = tpl_buf_append(&b, res.u.l->items[i].u.s->data, res.u.l->items[i].u.s->len)) !=
            LMC_OK)
            return st;
    return tpl_str(c, b.data, b.len, out);
}
