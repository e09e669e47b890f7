"""Writes src/chat/template_builtin.c from the fixture templates in this
folder (the real upstream chat templates), so the built-in defaults are the
same bytes as the fixtures. tests/unit/test_template.c checks they match.

    python3 scripts/gen_chat_builtin.py src/chat/template_builtin.c
"""
import os
import sys

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "templates")

TEMPLATES = [
    ("gemma3", "Gemma 3 (google/gemma-3-*-it tokenizer_config.json)"),
    ("chatml", "ChatML as Qwen2-Instruct writes it (Qwen/Qwen2-7B-Instruct)"),
    ("llama3", "Llama 3 (meta-llama/Meta-Llama-3-8B-Instruct)"),
    ("mistral", "Mistral v0.3 [INST] format (mistralai/Mistral-7B-Instruct-v0.3)"),
]


def c_literal(text: str) -> str:
    """The text as C string literal lines, one per template line."""
    out = []
    data = text.encode("utf-8")
    line = '    "'
    for i, b in enumerate(data):
        ch = chr(b)
        if ch == "\\":
            line += "\\\\"
        elif ch == '"':
            line += '\\"'
        elif ch == "\n":
            line += '\\n"'
            out.append(line)
            line = '    "'
            continue
        elif ch == "?" and line.endswith("?"):
            line += "\\?"  # no trigraphs
        elif 0x20 <= b < 0x7F:
            line += ch
        else:
            line += "\\%03o" % b
    line += '"'
    if line != '    ""' or not out:
        out.append(line)
    return "\n".join(out)


def main() -> None:
    parts = [
        "/* The built-in chat templates: the upstream template texts of the model",
        " * families cllm serves, for models whose file carries none. Generated from",
        " * the .jinja files in tests/data/templates by scripts/gen_chat_builtin.py; do not",
        " * edit (tests/unit/test_template.c checks the two are identical). */",
        '#include "chat/template.h"',
        "",
        "/* clang-format off */",
        "#include <string.h>",
        "",
    ]
    for name, what in TEMPLATES:
        with open(os.path.join(HERE, name + ".jinja"), encoding="utf-8", newline="") as f:
            text = f.read()
        parts.append(f"/* {what} */")
        parts.append(f"static const char tpl_{name}[] =")
        parts.append(c_literal(text) + ";")
        parts.append("")
    parts += [
        "const char *chat_template_builtin(const char *arch, bool llama3_vocab) {",
        "    if (arch && strcmp(arch, \"gemma3\") == 0) return tpl_gemma3;",
        "    if (arch && strcmp(arch, \"llama\") == 0) return llama3_vocab ? tpl_llama3 : tpl_mistral;",
        "    return tpl_chatml;",
        "}",
        "",
    ]
    with open(sys.argv[1], "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(parts))


if __name__ == "__main__":
    main()
