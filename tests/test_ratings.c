/* Rating readers and writers: every format on hand-written files (the
 * expectations are the files' own contents), broken files with the line
 * named, --skip-bad counting, round trips through every writer. */
#include "harness.h"
#include "lacuna/lacuna.h"

static lac_ctx_t ctx;

static void write_text(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    fputs(text, fp);
    fclose(fp);
}

/* Expected entries as id text and value, in file order. */
typedef struct {
    const char *user, *item;
    float value;
} entry;

static void check_entries(lac_ratings_t r, const entry *want, int n)
{
    CHECK_INT(lac_ratings_count(r), n);
    for (int i = 0; i < n && i < lac_ratings_count(r); i++) {
        int64_t u, it;
        float v;
        CHECK_OK(NULL, lac_ratings_get(r, i, &u, &it, &v));
        const char *uid = lac_ratings_user_id(r, u), *iid = lac_ratings_item_id(r, it);
        if (!uid || strcmp(uid, want[i].user) || !iid || strcmp(iid, want[i].item) || v != want[i].value)
            HARNESS_FAIL("entry %d: got (%s, %s, %g), want (%s, %s, %g)", i, uid ? uid : "?", iid ? iid : "?", v,
                         want[i].user, want[i].item, want[i].value);
    }
}

static lac_ratings_t read_text(const char *name, const char *text, lac_ratings_format format, int skip_bad,
                               lac_status expect)
{
    char path[512];
    harness_temp_path(path, sizeof path, name);
    write_text(path, text);
    lac_ratings_read_params p = lac_ratings_read_params_default();
    p.format = format;
    p.skip_bad = skip_bad;
    lac_ratings_t r = NULL;
    CHECK_STATUS(ctx, lac_ratings_read(ctx, path, &p, &r), expect);
    if (expect != LAC_SUCCESS) CHECK(r == NULL);
    remove(path);
    return r;
}

/* Reads text that must be refused as malformed, the message saying `says`. */
static void refused(const char *name, const char *text, lac_ratings_format format, const char *says)
{
    read_text(name, text, format, 0, LAC_ERR_FORMAT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), says);
}

static const entry three[] = {{"u1", "i9", 4.5f}, {"42", "i9", 1.0f}, {"u1", "007", 3.0f}};

TEST(reads_whitespace_triples)
{
    lac_ratings_t r = read_text("t.txt", "# comment\nu1 i9 4.5\n\n42\ti9  1\nu1 007 3\n", LAC_RATINGS_AUTO, 0, 0);
    check_entries(r, three, 3);
    CHECK_INT(lac_ratings_num_users(r), 2);
    CHECK_INT(lac_ratings_num_items(r), 2);
    lac_ratings_destroy(&r);
    CHECK(r == NULL);
}

TEST(reads_movielens_udata_and_csv)
{
    lac_ratings_t r = read_text("ml.dat", "u1::i9::4.5::978300760\n42::i9::1::978302109\nu1::007::3::0\n",
                                LAC_RATINGS_AUTO, 0, 0);
    check_entries(r, three, 3);
    lac_ratings_destroy(&r);
    r = read_text("u.data", "u1\ti9\t4.5\t881250949\n42\ti9\t1\t891717742\nu1\t007\t3\t1\n", LAC_RATINGS_AUTO, 0, 0);
    check_entries(r, three, 3);
    lac_ratings_destroy(&r);
    r = read_text("r.csv", "userId,movieId,rating,timestamp\nu1,i9,4.5,964982703\n42, i9 ,1,1\r\nu1,007,3,2\n",
                  LAC_RATINGS_AUTO, 0, 0);
    check_entries(r, three, 3);
    lac_ratings_destroy(&r);
}

TEST(reads_matrix_market)
{
    static const entry want[] = {{"1", "3", 2.5f}, {"2", "3", 5.0f}, {"1", "1", 1.0f}};
    lac_ratings_t r = read_text("m.mtx",
                                "%%MatrixMarket matrix coordinate real general\n% a comment\n2 3 3\n1 3 2.5\n2 3 5\n1 1 1\n",
                                LAC_RATINGS_AUTO, 0, 0);
    check_entries(r, want, 3);
    lac_ratings_destroy(&r);
}

TEST(malformed_lines_name_file_and_line)
{
    read_text("bad1.txt", "u1 i1 4\nu2 i2 4\nu3 i3 four\n", LAC_RATINGS_TRIPLES, 0, LAC_ERR_FORMAT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "bad1.txt:3:");
    read_text("bad2.txt", "u1 i1 4\nu2 i2 nan\n", LAC_RATINGS_TRIPLES, 0, LAC_ERR_FORMAT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), ":2:");
    read_text("bad3.txt", "u1 i1 4\nu2 i2 inf\n", LAC_RATINGS_AUTO, 0, LAC_ERR_FORMAT);
    read_text("bad4.txt", "u1 i1\n", LAC_RATINGS_AUTO, 0, LAC_ERR_FORMAT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), ":1:");
    read_text("bad5.dat", "1::2::3::4\n1::2\n", LAC_RATINGS_AUTO, 0, LAC_ERR_FORMAT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), ":2:");
    read_text("bad6.csv", "userId,movieId,rating\n1,2,x\n", LAC_RATINGS_AUTO, 0, LAC_ERR_FORMAT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), ":2:");
    read_text("bad7.txt", "u1 i1 1e999\n", LAC_RATINGS_AUTO, 0, LAC_ERR_FORMAT);
}

TEST(csv_quoting_by_rfc_4180)
{
    /* quoted ids keep their commas, doubled quotes and line breaks; an error
     * names the line its record starts on */
    refused("q.csv", "user,item,rating\n\"a,b\",1,5\n \"say \"\"hi\"\"\" , x ,2\n\"two\nlines\",\"\",3\n",
            LAC_RATINGS_AUTO, ":4: empty user or item id");
    lac_ratings_t r = read_text("q.csv", "user,item,rating\n\"a,b\",1,5\n \"say \"\"hi\"\"\" , x ,2\n\"two\nlines\",\"i\",3\nc,1,4\n",
                  LAC_RATINGS_AUTO, 0, 0);
    static const entry want[] = {{"a,b", "1", 5}, {"say \"hi\"", "x", 2}, {"two\nlines", "i", 3}, {"c", "1", 4}};
    check_entries(r, want, 4);
    lac_ratings_destroy(&r);
    /* a quoted first field makes the guess CSV even with '::' inside */
    r = read_text("q2.csv", "\"a::b\",1,5\n", LAC_RATINGS_AUTO, 0, 0);
    static const entry colons[] = {{"a::b", "1", 5}};
    check_entries(r, colons, 1);
    lac_ratings_destroy(&r);
    /* what RFC 4180 does not allow is an error naming the line */
    refused("q3.csv", "u,i,r\na\"b,1,5\n", LAC_RATINGS_CSV, ":2: a quote inside an unquoted field");
    refused("q4.csv", "u,i,r\n\"a\"b,1,5\n", LAC_RATINGS_CSV, ":2: text after a quoted field");
    refused("q5.csv", "u,i,r\n1,2,3\n\"open,1,5\n4,5,6\n", LAC_RATINGS_CSV, ":3: a quoted field has no closing quote");
}

TEST(csv_first_line_is_a_header_only_by_the_rule)
{
    /* headerless: the first line is data */
    lac_ratings_t r = read_text("h1.csv", "u1,i9,4.5\n42,i9,1\nu1,007,3\n", LAC_RATINGS_AUTO, 0, 0);
    check_entries(r, three, 3);
    lac_ratings_destroy(&r);
    /* a malformed first line is neither a header nor data: refused, not dropped */
    refused("h2.csv", "1,1,x\n2,2,3\n", LAC_RATINGS_AUTO, ":1: the first line is neither a header");
    refused("h3.csv", "user,item\n2,2,3\n", LAC_RATINGS_CSV, ":1:");
    read_text("h4.csv", "user,,rating\n2,2,3\n", LAC_RATINGS_CSV, 0, LAC_ERR_FORMAT);
    /* with skip_bad it is counted, as every malformed line */
    r = read_text("h5.csv", "1,1,x\n2,2,3\n", LAC_RATINGS_CSV, 1, 0);
    CHECK_INT(lac_ratings_count(r), 1);
    CHECK_INT(lac_ratings_skipped(r), 1);
    lac_ratings_destroy(&r);
    /* names only, "nan" and "inf" among them, make a header */
    r = read_text("h6.csv", "user,item,nan\n2,2,3\n", LAC_RATINGS_CSV, 0, 0);
    CHECK_INT(lac_ratings_count(r), 1);
    CHECK_INT(lac_ratings_skipped(r), 0);
    lac_ratings_destroy(&r);
    /* a header-like line after the first is malformed */
    refused("h7.csv", "user,item,rating\n1,2,3\nuser,item,rating\n", LAC_RATINGS_CSV, ":3:");
}

static lac_ratings_t read_pairs(const char *name, const char *text, lac_ratings_format format, lac_status expect)
{
    char path[512];
    harness_temp_path(path, sizeof path, name);
    write_text(path, text);
    lac_ratings_read_params p = lac_ratings_read_params_default();
    p.format = format;
    p.pairs = 1;
    lac_ratings_t r = NULL;
    CHECK_STATUS(ctx, lac_ratings_read(ctx, path, &p, &r), expect);
    remove(path);
    return r;
}

/* Interaction data: with `pairs`, "user item" lines read as rating 1 in
 * whitespace, MovieLens and CSV files (a line with a rating keeps it; a
 * first CSV line of two names is the header); without it they are refused,
 * the message saying where pairs are read. */
TEST(interaction_pairs_read_as_one_only_when_asked)
{
    static const entry pairs[] = {{"u1", "i9", 1.0f}, {"42", "i9", 2.5f}, {"u1", "007", 1.0f}};
    lac_ratings_t r = read_pairs("p.txt", "# seen\nu1 i9\n42\ti9 2.5\nu1 007\n", LAC_RATINGS_AUTO, 0);
    check_entries(r, pairs, 3);
    lac_ratings_destroy(&r);
    r = read_pairs("p.dat", "u1::i9\n42::i9::2.5::978300760\nu1::007\n", LAC_RATINGS_AUTO, 0);
    check_entries(r, pairs, 3);
    lac_ratings_destroy(&r);
    r = read_pairs("p.csv", "user,item\nu1,i9\n42,i9,2.5\nu1,007\n", LAC_RATINGS_AUTO, 0);
    check_entries(r, pairs, 3);
    lac_ratings_destroy(&r);
    r = read_pairs("p2.csv", "1,9\n2,9\n", LAC_RATINGS_CSV, 0);   /* numeric ids: no header */
    CHECK_INT(lac_ratings_count(r), 2);
    lac_ratings_destroy(&r);
    read_pairs("p3.txt", "u1\n", LAC_RATINGS_TRIPLES, LAC_ERR_FORMAT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "expected 'user item [rating [timestamp]]'");
    read_pairs("p4.csv", "1,9\nu1,\"\"\n", LAC_RATINGS_CSV, LAC_ERR_FORMAT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), ":2: empty user or item id");
    refused("p5.txt", "u1 i9\n", LAC_RATINGS_AUTO, "split --pairs");
    refused("p6.csv", "1,9\n", LAC_RATINGS_CSV, ":1:");
}

TEST(writers_quote_or_refuse_ids_they_cannot_hold)
{
    /* CSV quotes: every id comes back as it was */
    lac_ratings_t r = read_text("w.csv", "u,i,r\n\"a,b\",\" pad \",1\n\"q\"\"x\",\"two\nlines\",2\nplain,#i,3\n", LAC_RATINGS_CSV, 0, 0);
    static const entry want[] = {{"a,b", " pad ", 1}, {"q\"x", "two\nlines", 2}, {"plain", "#i", 3}};
    check_entries(r, want, 3);
    char path[512];
    harness_temp_path(path, sizeof path, "w-out");
    CHECK_OK(ctx, lac_ratings_write(ctx, path, LAC_RATINGS_CSV, r));
    lac_ratings_t back = NULL;
    CHECK_OK(ctx, lac_ratings_read(ctx, path, NULL, &back));
    check_entries(back, want, 3);
    lac_ratings_destroy(&back);
    /* formats without quoting refuse such ids, naming one, and write nothing */
    remove(path);
    CHECK_STATUS(ctx, lac_ratings_write(ctx, path, LAC_RATINGS_TRIPLES, r), LAC_ERR_VALUE);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "'a,b' cannot be written as triples");
    CHECK_STATUS(ctx, lac_ratings_write(ctx, path, LAC_RATINGS_UDATA, r), LAC_ERR_VALUE);
    CHECK_STATUS(ctx, lac_ratings_write(ctx, path, LAC_RATINGS_MOVIELENS, r), LAC_ERR_VALUE);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "item id ' pad '");
    FILE *fp = fopen(path, "r");
    CHECK(fp == NULL);
    if (fp) fclose(fp);
    lac_ratings_destroy(&r);
    r = read_text("w2.csv", "u,i,r\n\"a b\",x,1\n", LAC_RATINGS_CSV, 0, 0);
    CHECK_STATUS(ctx, lac_ratings_write(ctx, path, LAC_RATINGS_TRIPLES, r), LAC_ERR_VALUE);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "space or a tab");
    CHECK_OK(ctx, lac_ratings_write(ctx, path, LAC_RATINGS_MOVIELENS, r));   /* "a b" is fine between '::' */
    lac_ratings_destroy(&r);
    r = read_text("w3.csv", "u,i,r\n#a,x,1\n", LAC_RATINGS_CSV, 0, 0);
    CHECK_STATUS(ctx, lac_ratings_write(ctx, path, LAC_RATINGS_TRIPLES, r), LAC_ERR_VALUE);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "comment");
    CHECK_OK(ctx, lac_ratings_write(ctx, path, LAC_RATINGS_MATRIX_MARKET, r));   /* positions, not ids */
    lac_ratings_destroy(&r);
    remove(path);
}

TEST(matrix_market_broken_forms)
{
    read_text("mm1.mtx", "%%MatrixMarket matrix coordinate real general\n2 2 3\n1 1 1\n2 2 2\n", LAC_RATINGS_AUTO, 0,
              LAC_ERR_FORMAT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "truncated");
    read_text("mm2.mtx", "%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1\n", LAC_RATINGS_AUTO, 0,
              LAC_ERR_FORMAT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), ":3:");
    read_text("mm3.mtx", "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 1\n", LAC_RATINGS_AUTO, 0,
              LAC_ERR_FORMAT);
    read_text("mm4.mtx", "%%MatrixMarket matrix coordinate real general\nfoo\n", LAC_RATINGS_AUTO, 0, LAC_ERR_FORMAT);
    CHECK_STR_CONTAINS(lac_last_error(ctx), ":2:");
}

TEST(skip_bad_counts_and_skips)
{
    lac_ratings_t r = read_text("skip.txt", "u1 i9 4.5\nbroken\n42 i9 1\nx y nan\nu1 007 3\n", LAC_RATINGS_AUTO, 1, 0);
    check_entries(r, three, 3);
    CHECK_INT(lac_ratings_skipped(r), 2);
    lac_ratings_destroy(&r);
}

TEST(empty_inputs_are_value_errors)
{
    read_text("empty.txt", "", LAC_RATINGS_AUTO, 0, LAC_ERR_VALUE);
    read_text("comments.txt", "# only\n\n", LAC_RATINGS_AUTO, 0, LAC_ERR_VALUE);
    read_text("allbad.txt", "a b c\n", LAC_RATINGS_TRIPLES, 1, LAC_ERR_VALUE);
    lac_ratings_t r = NULL;
    CHECK_STATUS(ctx, lac_ratings_read(ctx, "/nonexistent/dir/r.txt", NULL, &r), LAC_ERR_IO);
    CHECK(r == NULL);
}

TEST(duplicates_are_kept_as_read)
{
    lac_ratings_t r = read_text("dup.txt", "a x 1\na x 2\n", LAC_RATINGS_AUTO, 0, 0);
    static const entry want[] = {{"a", "x", 1.0f}, {"a", "x", 2.0f}};
    check_entries(r, want, 2);
    lac_ratings_destroy(&r);
}

TEST(every_writer_round_trips)
{
    lac_ratings_t r = read_text("rt.txt", "u1 i9 4.5\n42 i9 1\nu1 007 3\n", LAC_RATINGS_AUTO, 0, 0);
    lac_ratings_format formats[] = {LAC_RATINGS_TRIPLES, LAC_RATINGS_MOVIELENS, LAC_RATINGS_UDATA, LAC_RATINGS_CSV};
    char path[512];
    harness_temp_path(path, sizeof path, "rt-out");
    for (int f = 0; f < 4; f++) {
        CHECK_OK(ctx, lac_ratings_write(ctx, path, formats[f], r));
        lac_ratings_t back = NULL;
        CHECK_OK(ctx, lac_ratings_read(ctx, path, NULL, &back));
        check_entries(back, three, 3);
        lac_ratings_destroy(&back);
    }
    /* Matrix Market keeps positions, not ids: dense index + 1 */
    static const entry mm[] = {{"1", "1", 4.5f}, {"2", "1", 1.0f}, {"1", "2", 3.0f}};
    CHECK_OK(ctx, lac_ratings_write(ctx, path, LAC_RATINGS_MATRIX_MARKET, r));
    lac_ratings_t back = NULL;
    CHECK_OK(ctx, lac_ratings_read(ctx, path, NULL, &back));
    check_entries(back, mm, 3);
    lac_ratings_destroy(&back);
    CHECK_STATUS(ctx, lac_ratings_write(ctx, path, LAC_RATINGS_AUTO, r), LAC_ERR_ARGUMENT);
    remove(path);
    lac_ratings_destroy(&r);
}

TEST(from_arrays_and_format_names)
{
    int64_t users[] = {10, 20, 10}, items[] = {7, 7, 8};
    float values[] = {1, 2, 3};
    lac_ratings_t r = NULL;
    CHECK_OK(ctx, lac_ratings_from_arrays(ctx, 3, users, items, values, &r));
    CHECK_INT(lac_ratings_num_users(r), 2);
    CHECK(strcmp(lac_ratings_user_id(r, 1), "20") == 0);
    CHECK(lac_ratings_user_id(r, 2) == NULL);
    CHECK_STATUS(NULL, lac_ratings_get(r, 3, NULL, NULL, NULL), LAC_ERR_RANGE);
    lac_ratings_destroy(&r);
    values[1] = NAN;
    CHECK_STATUS(ctx, lac_ratings_from_arrays(ctx, 3, users, items, values, &r), LAC_ERR_VALUE);
    CHECK_STR_CONTAINS(lac_last_error(ctx), "ratings[1]");
    lac_ratings_format f;
    CHECK_OK(NULL, lac_ratings_format_parse("movielens", &f));
    CHECK_INT(f, LAC_RATINGS_MOVIELENS);
    CHECK_STATUS(NULL, lac_ratings_format_parse("xml", &f), LAC_ERR_ARGUMENT);
}

int main(void)
{
    lac_ctx_params p = lac_ctx_params_default();
    p.backend = LAC_BACKEND_CPU;
    if (lac_ctx_create(&p, &ctx) != 0) return 1;
    RUN(reads_whitespace_triples);
    RUN(reads_movielens_udata_and_csv);
    RUN(reads_matrix_market);
    RUN(malformed_lines_name_file_and_line);
    RUN(csv_quoting_by_rfc_4180);
    RUN(csv_first_line_is_a_header_only_by_the_rule);
    RUN(interaction_pairs_read_as_one_only_when_asked);
    RUN(writers_quote_or_refuse_ids_they_cannot_hold);
    RUN(matrix_market_broken_forms);
    RUN(skip_bad_counts_and_skips);
    RUN(empty_inputs_are_value_errors);
    RUN(duplicates_are_kept_as_read);
    RUN(every_writer_round_trips);
    RUN(from_arrays_and_format_names);
    lac_ctx_destroy(&ctx);
    return harness_finish();
}
