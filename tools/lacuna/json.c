/* The tool's JSON writer (json.h). */
#include "json.h"

#include <math.h>
#include <string.h>

/* A string's bytes as JSON text: escapes, and U+FFFD for every byte that does
 * not start a well-formed UTF-8 sequence (RFC 3629: no overlongs, no
 * surrogates, nothing past U+10FFFF). */
static void put_string(FILE *out, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    fputc('"', out);
    while (*p) {
        unsigned c = *p;
        if (c == '"' || c == '\\') {
            fputc('\\', out);
            fputc((int)c, out);
            p++;
        } else if (c < 0x20 || c == 0x7f) {
            const char *named = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : NULL;
            if (named) fputs(named, out);
            else fprintf(out, "\\u00%c%c", hex[c >> 4], hex[c & 15]);
            p++;
        } else if (c < 0x80) {
            fputc((int)c, out);
            p++;
        } else {
            int len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
            /* the second byte's range rules out overlongs, surrogates and > U+10FFFF */
            unsigned lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
            unsigned hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
            bool ok = len > 0 && p[1] >= lo && p[1] <= hi;
            for (int k = 2; ok && k < len; k++) ok = (p[k] & 0xc0) == 0x80;
            if (ok) {
                fwrite(p, 1, (size_t)len, out);
                p += len;
            } else {
                fputs("\\ufffd", out);
                p++;
            }
        }
    }
    fputc('"', out);
}

/* The separator and the key of the next member. */
static void member(cli_json *j, const char *key)
{
    if (!j->empty[j->depth - 1]) fputc(',', j->out);
    j->empty[j->depth - 1] = false;
    if (key) {
        put_string(j->out, key);
        fputc(':', j->out);
    }
}

static void open_nested(cli_json *j, char opener, char closer)
{
    fputc(opener, j->out);
    if (j->depth < CLI_JSON_DEPTH) {
        j->closer[j->depth] = closer;
        j->empty[j->depth] = true;
        j->depth++;
    }
}

void cli_json_begin(cli_json *j, FILE *out)
{
    memset(j, 0, sizeof *j);
    j->out = out;
    open_nested(j, '{', '}');
}

void cli_json_end(cli_json *j)
{
    while (j->depth > 0) cli_json_close(j);
    fputc('\n', j->out);
}

void cli_json_object(cli_json *j, const char *key)
{
    member(j, key);
    open_nested(j, '{', '}');
}

void cli_json_array(cli_json *j, const char *key)
{
    member(j, key);
    open_nested(j, '[', ']');
}

void cli_json_close(cli_json *j)
{
    if (j->depth > 0) fputc(j->closer[--j->depth], j->out);
}

void cli_json_int(cli_json *j, const char *key, long long v)
{
    member(j, key);
    fprintf(j->out, "%lld", v);
}

void cli_json_real(cli_json *j, const char *key, double v, const char *format)
{
    member(j, key);
    if (isfinite(v)) fprintf(j->out, format, v);
    else fputs("null", j->out);
}

void cli_json_string(cli_json *j, const char *key, const char *s)
{
    member(j, key);
    put_string(j->out, s);
}

void cli_json_bool(cli_json *j, const char *key, bool v)
{
    member(j, key);
    fputs(v ? "true" : "false", j->out);
}
