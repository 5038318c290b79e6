/* The JSON Lines reader (see jsonl.h): a recursive-descent parser over one
 * line, keeping the top-level members. */
#include "jsonl.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64

typedef struct {
    const char *start, *p;
    char *why;
    size_t why_len;
    bool failed;
} parser;

static bool fail(parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(parser *ps, const char *fmt, ...)
{
    if (ps->failed) return false;
    ps->failed = true;
    size_t rest = strspn(ps->p, " \t\r\n");
    int n = snprintf(ps->why, ps->why_len, "column %d: %s", (int)(ps->p - ps->start) + 1,
                     ps->p[rest] ? "" : "the line ends early: ");
    if (n >= 0 && (size_t)n < ps->why_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ps->why + n, ps->why_len - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return false;
}

static void skip_space(parser *ps)
{
    while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\r' || *ps->p == '\n') ps->p++;
}

static int hex4(const char *s)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static void put_utf8(char *out, size_t *n, uint32_t c)
{
    if (c < 0x80) out[(*n)++] = (char)c;
    else if (c < 0x800) out[(*n)++] = (char)(0xC0 | c >> 6), out[(*n)++] = (char)(0x80 | (c & 0x3F));
    else if (c < 0x10000)
        out[(*n)++] = (char)(0xE0 | c >> 12), out[(*n)++] = (char)(0x80 | (c >> 6 & 0x3F)),
        out[(*n)++] = (char)(0x80 | (c & 0x3F));
    else
        out[(*n)++] = (char)(0xF0 | c >> 18), out[(*n)++] = (char)(0x80 | (c >> 12 & 0x3F)),
        out[(*n)++] = (char)(0x80 | (c >> 6 & 0x3F)), out[(*n)++] = (char)(0x80 | (c & 0x3F));
}

/* A string at ps->p (the opening quote); *out (may be NULL to skip) is
 * allocated. Escapes decode to UTF-8; \u0000 is refused (C strings). */
static bool parse_string(parser *ps, char **out)
{
    const char *q = ++ps->p;
    size_t len = 0;
    while (*q && *q != '"') q += *q == '\\' && q[1] ? 2 : 1, len++;
    if (*q != '"') return fail(ps, "a string is not closed");
    char *s = out ? malloc(4 * len + 1) : NULL;   /* \uXXXX makes at most 4 bytes of one character */
    if (out && !s) return fail(ps, "out of memory");
    size_t n = 0;
    while (*ps->p != '"') {
        unsigned char c = (unsigned char)*ps->p;
        if (c < 0x20) {
            free(s);
            return fail(ps, "a control character inside a string (write it as \\u%04x)", c);
        }
        if (c != '\\') {
            if (s) s[n++] = (char)c;
            ps->p++;
            continue;
        }
        char e = ps->p[1];
        uint32_t cp = 0;
        switch (e) {
        case '"': cp = '"'; break;
        case '\\': cp = '\\'; break;
        case '/': cp = '/'; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u': {
            int h = hex4(ps->p + 2);
            if (h < 0) {
                free(s);
                return fail(ps, "\\u needs four hex digits");
            }
            cp = (uint32_t)h;
            ps->p += 4;
            if (cp >= 0xD800 && cp < 0xDC00) {   /* a surrogate pair */
                int lo = ps->p[2] == '\\' && ps->p[3] == 'u' ? hex4(ps->p + 4) : -1;
                if (lo < 0xDC00 || lo > 0xDFFF) {
                    free(s);
                    return fail(ps, "a lone surrogate \\u%04X", (unsigned)cp);
                }
                cp = 0x10000 + ((cp - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
                ps->p += 6;
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                free(s);
                return fail(ps, "a lone surrogate \\u%04X", (unsigned)cp);
            }
            if (cp == 0) {
                free(s);
                return fail(ps, "\\u0000 inside a string");
            }
            break;
        }
        default:
            free(s);
            if (e > 0x20 && e < 0x7f) return fail(ps, "unknown escape '\\%c'", e);
            return fail(ps, "unknown escape: a backslash before byte 0x%02x", (unsigned char)e);
        }
        if (s) put_utf8(s, &n, cp);
        ps->p += 2;
    }
    ps->p++;
    if (out) s[n] = '\0', *out = s;
    return true;
}

/* A number by JSON's grammar (no leading '+', no leading zeros, no bare '.'). */
static bool parse_number(parser *ps, double *out)
{
    const char *q = ps->p;
    if (*q == '-') q++;
    if (*q == '0') q++;
    else if (*q >= '1' && *q <= '9') while (*q >= '0' && *q <= '9') q++;
    else return fail(ps, "expected a value");
    if (*q == '.') {
        q++;
        if (!(*q >= '0' && *q <= '9')) return fail(ps, "a digit must follow '.'");
        while (*q >= '0' && *q <= '9') q++;
    }
    if (*q == 'e' || *q == 'E') {
        q++;
        if (*q == '+' || *q == '-') q++;
        if (!(*q >= '0' && *q <= '9')) return fail(ps, "a digit must follow the exponent");
        while (*q >= '0' && *q <= '9') q++;
    }
    *out = strtod(ps->p, NULL);   /* overflow gives +-HUGE_VAL: read as infinite */
    ps->p = q;
    return true;
}

static bool parse_value(parser *ps, jsonl_member *m, int depth);

/* An object or array at ps->p, read past. */
static bool skip_nested(parser *ps, int depth)
{
    if (depth >= MAX_DEPTH) return fail(ps, "nested deeper than %d", MAX_DEPTH);
    char close = *ps->p == '{' ? '}' : ']';
    bool object = close == '}';
    ps->p++;
    skip_space(ps);
    if (*ps->p == close) {
        ps->p++;
        return true;
    }
    for (;;) {
        skip_space(ps);
        if (object) {
            if (*ps->p != '"') return fail(ps, "expected a key in quotes");
            if (!parse_string(ps, NULL)) return false;
            skip_space(ps);
            if (*ps->p != ':') return fail(ps, "expected ':' after a key");
            ps->p++;
        }
        jsonl_member ignored = {0};
        if (!parse_value(ps, &ignored, depth + 1)) return false;
        free(ignored.string);
        skip_space(ps);
        if (*ps->p == ',') {
            ps->p++;
            continue;
        }
        if (*ps->p == close) {
            ps->p++;
            return true;
        }
        return fail(ps, "expected ',' or '%c'", close);
    }
}

static bool parse_value(parser *ps, jsonl_member *m, int depth)
{
    skip_space(ps);
    const char *p = ps->p;
    if (*p == '"') {
        m->kind = JSONL_STRING;
        return parse_string(ps, &m->string);
    }
    if (*p == '{' || *p == '[') {
        m->kind = JSONL_NESTED;
        return skip_nested(ps, depth);
    }
    static const struct {
        const char *word;
        jsonl_kind kind;
        double value;
    } words[] = {{"true", JSONL_BOOL, 1}, {"false", JSONL_BOOL, 0}, {"null", JSONL_NULL, 0}};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        size_t n = strlen(words[i].word);
        if (strncmp(p, words[i].word, n) == 0) {
            m->kind = words[i].kind;
            m->number = words[i].value;
            ps->p += n;
            return true;
        }
    }
    m->kind = JSONL_NUMBER;
    return parse_number(ps, &m->number);
}

const jsonl_member *jsonl_get(const jsonl_object *o, const char *key)
{
    for (int i = 0; i < o->count; i++)
        if (strcmp(o->members[i].key, key) == 0) return &o->members[i];
    return NULL;
}

void jsonl_free(jsonl_object *o)
{
    for (int i = 0; i < o->count; i++) {
        free(o->members[i].key);
        free(o->members[i].string);
    }
    free(o->members);
    *o = (jsonl_object){0};
}

bool jsonl_parse(const char *line, jsonl_object *o, char *why, size_t why_len)
{
    parser ps = {line, line, why, why_len, false};
    *o = (jsonl_object){0};
    skip_space(&ps);
    if (*ps.p != '{') return fail(&ps, "a line must hold one JSON object ('{' ... '}')");
    ps.p++;
    skip_space(&ps);
    bool ok = true;
    if (*ps.p == '}') ps.p++;
    else
        for (;;) {
            skip_space(&ps);
            jsonl_member m = {0};
            if (*ps.p != '"') {
                ok = fail(&ps, "expected a key in quotes");
                break;
            }
            const char *key_at = ps.p;
            if (!(ok = parse_string(&ps, &m.key))) break;
            skip_space(&ps);
            if (*ps.p != ':') {
                free(m.key);
                ok = fail(&ps, "expected ':' after a key");
                break;
            }
            ps.p++;
            if (!(ok = parse_value(&ps, &m, 1))) {
                free(m.key);
                free(m.string);
                break;
            }
            if (jsonl_get(o, m.key)) {
                ps.p = key_at;
                ok = fail(&ps, "\"%s\" given twice", m.key);
                free(m.key);
                free(m.string);
                break;
            }
            if (o->count == o->cap) {
                int cap = o->cap ? 2 * o->cap : 16;
                jsonl_member *grown = realloc(o->members, (size_t)cap * sizeof *grown);
                if (!grown) {
                    free(m.key);
                    free(m.string);
                    ok = fail(&ps, "out of memory");
                    break;
                }
                o->members = grown;
                o->cap = cap;
            }
            o->members[o->count++] = m;
            skip_space(&ps);
            if (*ps.p == ',') {
                ps.p++;
                continue;
            }
            if (*ps.p == '}') {
                ps.p++;
                break;
            }
            ok = fail(&ps, "expected ',' or '}'");
            break;
        }
    if (ok) {
        skip_space(&ps);
        if (*ps.p) ok = fail(&ps, "text after the object");
    }
    if (!ok) jsonl_free(o);
    return ok;
}
