"""Writes src/tokenizer/wordpiece_unicode_data.c from Python's unicodedata:
what the BERT normalizer and pre-tokenizer of Hugging Face `tokenizers`
(BertNormalizer, BertPreTokenizer) need: the "other" characters clean_text
drops (categories Cc, Cf, Cn, Co, Cs), punctuation (P*), nonspacing marks
(Mn, dropped by strip_accents), canonical decompositions (NFD, Hangul
syllables excepted: they are computed) and the lowercase mapping of each
character alone (Rust's char::to_lowercase). Run:
python3 scripts/gen_wordpiece_unicode.py src/tokenizer/wordpiece_unicode_data.c"""
import sys, unicodedata


def ranges(pred):
    r = []
    for cp in range(0x110000):
        if pred(cp):
            if r and r[-1][1] == cp - 1:
                r[-1][1] = cp
            else:
                r.append([cp, cp])
    return r


def nfd(cp):
    return unicodedata.normalize("NFD", chr(cp))


cat = lambda cp: unicodedata.category(chr(cp))
out = []
w = out.append
w("/* Unicode tables of the WordPiece normalizer, generated from Python %s's" % sys.version.split()[0])
w(" * unicodedata (Unicode %s) by scripts/gen_wordpiece_unicode.py; do not edit." % unicodedata.unidata_version)
w(" * Data only; the lookups are in wordpiece_norm.c. */")
w('#include "tokenizer/wordpiece_unicode.h"')
w("")
w("/* clang-format off */")


def emit_ranges(name, rs):
    w("const wp_range %s[] = {" % name)
    line = "   "
    for lo, hi in rs:
        item = " {0x%x, 0x%x}," % (lo, hi)
        if len(line) + len(item) > 110:
            w(line)
            line = "   "
        line += item
    w(line)
    w("};")
    w("const int %s_count = %d;" % (name, len(rs)))
    w("")


emit_ranges("wp_other", ranges(lambda cp: cat(cp) in ("Cc", "Cf", "Cn", "Co", "Cs")))
emit_ranges("wp_punct", ranges(lambda cp: cat(cp).startswith("P")))
emit_ranges("wp_mark_nonspacing", ranges(lambda cp: cat(cp) == "Mn"))


def emit_map(name, pairs, width):
    w("const wp_map %s[] = {" % name)
    for cp, to in pairs:
        assert 0 < len(to) <= width, (cp, to)
        w("    {0x%x, {%s}}," % (cp, ", ".join("0x%x" % ord(c) for c in to)))
    w("};")
    w("const int %s_count = %d;" % (name, len(pairs)))
    w("")


decomp = [(cp, nfd(cp)) for cp in range(0x110000)
          if not (0xAC00 <= cp <= 0xD7A3) and not (0xD800 <= cp <= 0xDFFF) and nfd(cp) != chr(cp)]
lower = [(cp, chr(cp).lower()) for cp in range(0x110000)
         if not (0xD800 <= cp <= 0xDFFF) and chr(cp).lower() != chr(cp)]
emit_map("wp_nfd", decomp, 4)
emit_map("wp_lower", lower, 4)
open(sys.argv[1], "w").write("\n".join(out))
