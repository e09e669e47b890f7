"""Writes src/util/unicode_data.c from Python's unicodedata: the character
classes and mappings that the chat-template interpreter (to behave as Python's
str methods in jinja2) and the WordPiece normalizer (as Hugging Face
`tokenizers`' BertNormalizer and BertPreTokenizer) need:

- general categories: "other" (Cc Cf Cn Co Cs: what BERT's clean_text drops),
  punctuation (P*), nonspacing marks (Mn: what strip_accents drops) and
  separators (Z*); str.isprintable() is "neither other nor a separator, or
  the space";
- cased and case-ignorable characters (str.lower()'s final-sigma rule),
  decimal digits (int() and float() read them);
- the case mappings of each character alone (str.upper/lower/title, which
  for lower is also Rust's char::to_lowercase), as runs of equal deltas plus
  the few characters that map to several;
- canonical decompositions (NFD; Hangul syllables are computed, not listed).

Run: python3 scripts/gen_unicode_data.py src/util/unicode_data.c"""
import sys
import unicodedata

ALL = range(0x110000)


def is_surrogate(cp):
    return 0xD800 <= cp <= 0xDFFF


def cat(cp):
    return unicodedata.category(chr(cp))


def runs(pred):
    r = []
    for cp in ALL:
        if pred(cp):
            if r and r[-1][1] == cp - 1:
                r[-1][1] = cp
            else:
                r.append([cp, cp])
    return r


def delta_runs(pairs):
    """(cp, mapped) pairs as [lo, hi, stride, delta]: lo, lo+stride, ..., hi
    map to cp + delta."""
    r = []
    for cp, m in pairs:
        d = m - cp
        if r and r[-1][3] == d and r[-1][2] in (0, cp - r[-1][1]):
            if r[-1][2] == 0:
                r[-1][2] = cp - r[-1][1]
            r[-1][1] = cp
        else:
            r.append([cp, cp, 0, d])
    for x in r:
        if x[2] == 0:
            x[2] = 1
    return r


def single(f):
    return [(cp, ord(f(chr(cp)))) for cp in ALL if len(f(chr(cp))) == 1 and f(chr(cp)) != chr(cp)]


def multi(f):
    return [(cp, f(chr(cp))) for cp in ALL if len(f(chr(cp))) > 1]


# Case_Ignorable is not in unicodedata; read it off str.lower()'s final-sigma
# rule: "a" c "Σ" ends in ς when c is ignorable or cased, "1" c "Σ" only when
# c is cased and not ignorable.
def case_ignorable(cp):
    c = chr(cp)
    return ("a" + c + "\u03a3").lower()[-1] == "\u03c2" and ("1" + c + "\u03a3").lower()[-1] != "\u03c2"


other = lambda cp: cat(cp) in ("Cc", "Cf", "Cn", "Co", "Cs")
separator = lambda cp: cat(cp).startswith("Z")
# The printable rule the C side applies must be Python's.
assert all(chr(cp).isprintable() == (cp == 0x20 or not (other(cp) or separator(cp))) for cp in ALL)
decimal_runs = runs(lambda cp: chr(cp).isdecimal())
assert all(unicodedata.decimal(chr(a)) == 0 and (b - a + 1) % 10 == 0 for a, b in decimal_runs)
nfd = [(cp, unicodedata.normalize("NFD", chr(cp))) for cp in ALL
       if not (0xAC00 <= cp <= 0xD7A3) and not is_surrogate(cp) and unicodedata.normalize("NFD", chr(cp)) != chr(cp)]

out = []
w = out.append
w("/* Unicode tables generated from Python %s's unicodedata (Unicode %s) by"
  % (sys.version.split()[0], unicodedata.unidata_version))
w(" * scripts/gen_unicode_data.py; do not edit. Data only: the lookups are in")
w(" * unicode.c. Every table is sorted by code point. */")
w('#include "util/unicode_tables.h"')
w("")
w("/* clang-format off */")


def emit_runs(name, rs):
    w("const unicode_range %s[] = {" % name)
    line = "   "
    for a, b in rs:
        item = " {0x%x, 0x%x}," % (a, b)
        if len(line) + len(item) > 110:
            w(line)
            line = "   "
        line += item
    w(line)
    w("};")
    w("const int %s_count = %d;" % (name, len(rs)))
    w("")


def emit_case(name, rs):
    w("const unicode_case_run %s[] = {" % name)
    line = "   "
    for a, b, s, d in rs:
        item = " {0x%x, 0x%x, %d, %d}," % (a, b, s, d)
        if len(line) + len(item) > 110:
            w(line)
            line = "   "
        line += item
    w(line)
    w("};")
    w("const int %s_count = %d;" % (name, len(rs)))
    w("")


def emit_map(name, pairs, width):
    w("const unicode_map%d %s[] = {" % (width, name))
    for cp, to in pairs:
        assert 0 < len(to) <= width, (cp, to)
        w("    {0x%x, {%s}}," % (cp, ", ".join("0x%x" % ord(c) for c in to)))
    w("};")
    w("const int %s_count = %d;" % (name, len(pairs)))
    w("")


emit_runs("unicode_other", runs(other))
emit_runs("unicode_punct", runs(lambda cp: cat(cp).startswith("P")))
emit_runs("unicode_mark_nonspacing", runs(lambda cp: cat(cp) == "Mn"))
emit_runs("unicode_separator", runs(separator))
emit_runs("unicode_cased", runs(lambda cp: chr(cp).islower() or chr(cp).isupper() or chr(cp).istitle()))
emit_runs("unicode_case_ignorable", runs(case_ignorable))
emit_runs("unicode_decimal", decimal_runs)
emit_case("unicode_upper_runs", delta_runs(single(str.upper)))
emit_map("unicode_upper_multi", multi(str.upper), 3)
emit_case("unicode_lower_runs", delta_runs(single(str.lower)))
emit_map("unicode_lower_multi", multi(str.lower), 3)
emit_case("unicode_title_runs", delta_runs(single(str.title)))
emit_map("unicode_title_multi", multi(str.title), 3)
emit_map("unicode_nfd_map", nfd, 4)
open(sys.argv[1], "w").write("\n".join(out) + "\n")
