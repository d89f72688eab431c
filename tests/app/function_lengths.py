"""The commands in src/app stay thin: no function (or method, or lambda at
namespace scope) longer than --max lines, counted from the line of its
opening brace to that of its closing one. Prints the longest ones and exits
1 naming each over the limit.

usage: python3 tests/app/function_lengths.py [--max 60] FILE...

A brace block is a function body when the text before it, since the last
';', '{' or '}', holds a ')' (a parameter list, possibly followed by
qualifiers, an initializer list or a trailing return type); namespace, class,
struct and enum bodies are scopes it descends into; anything else at those
levels (a table in braces) is data and not counted.
"""
import argparse
import re
import sys


def strip(text):
    """The source without comments, string and character literals, with
    its line breaks kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            k = text.find("(", i)
            end = ")" + text[i + 2:k] + '"'
            j = text.find(end, k)
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


SCOPE = re.compile(r"\b(namespace|class|struct|union|enum)\b")


def functions(path):
    """(lines, first line, head) of each function body outside any other."""
    text = strip(open(path, encoding="utf-8").read())
    found = []
    scopes = 0          # how many enclosing braces are scopes (namespace, class)
    depth = 0           # all enclosing braces
    body = None         # (depth it opened at, line, head) of the function being read
    head, line = "", 1
    for c in text:
        if c == "\n":
            line += 1
        if c == "{":
            if body is None and depth == scopes:
                statement = head.strip()
                if ")" in statement:
                    body = (depth, line, " ".join(statement.split())[-70:])
                elif SCOPE.search(statement):
                    scopes += 1
            depth += 1
            head = ""
        elif c == "}":
            depth -= 1
            if body is not None and depth == body[0]:
                found.append((line - body[1] + 1, body[1], body[2]))
                body = None
            elif body is None and depth < scopes:
                scopes = depth
            head = ""
        elif c == ";":
            head = ""
        else:
            head += c
    return found


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--max", type=int, default=60)
    p.add_argument("files", nargs="+")
    a = p.parse_args()
    every = sorted(((n, f, first, h) for f in a.files for n, first, h in functions(f)), reverse=True)
    if not every:
        sys.exit("function_lengths: no function found in " + " ".join(a.files))
    for n, f, first, h in every[:5]:
        print(f"{n:4d} lines  {f}:{first}  {h}")
    over = [e for e in every if e[0] > a.max]
    for n, f, first, h in over:
        print(f"function_lengths: {f}:{first} is {n} lines, over {a.max}: {h}", file=sys.stderr)
    sys.exit(1 if over else 0)


if __name__ == "__main__":
    main()
