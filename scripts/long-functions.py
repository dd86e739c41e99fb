#!/usr/bin/env python3
"""Lists the functions outside #[cfg(test)] items whose span (the `fn` line
to its closing brace, inclusive) is over N lines (default 100), to keep
STYLE.md's "functions under 100". Comments, strings and char literals are
blanked first, so braces in them do not count.

Usage: scripts/long-functions.py [N] [ROOT]   (ROOT defaults to src)"""
import os, re, sys

def blank_literals(src):
    """Replaces comments, strings and char literals by spaces (keeping newlines)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith('//', i):
            j = src.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i)); i = j
        elif src.startswith('/*', i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith('/*', j): depth += 1; j += 2
                elif src.startswith('*/', j): depth -= 1; j += 2
                else: j += 1
            out.append(re.sub(r'[^\n]', ' ', src[i:j])); i = j
        elif re.match(r'b?r#*"', src[i:i+20]) and (i == 0 or not (src[i-1].isalnum() or src[i-1] == '_')):
            m = re.match(r'b?r(#*)"', src[i:i+20])
            end = '"' + m.group(1)
            j = src.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r'[^\n]', ' ', src[i:j])); i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == '\\' else 1
            j += 1
            out.append(re.sub(r'[^\n]', ' ', src[i:j])); i = j
        elif c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", src[i:i+12])
            if m:
                out.append(' ' * m.end()); i += m.end()
            else:
                out.append(c); i += 1
        else:
            out.append(c); i += 1
    return ''.join(out)

def match_brace(s, i):
    depth = 0
    for j in range(i, len(s)):
        if s[j] == '{': depth += 1
        elif s[j] == '}':
            depth -= 1
            if depth == 0: return j
    return len(s) - 1

def long_fns(path, limit):
    src = open(path, encoding='utf-8').read()
    s = blank_literals(src)
    # Blank every item under #[cfg(test)].
    for m in reversed(list(re.finditer(r'#\[cfg\(test\)\]', s))):
        k = m.end()
        semi, brace = s.find(';', k), s.find('{', k)
        if brace < 0 or (0 <= semi < brace): continue
        end = match_brace(s, brace)
        s = s[:m.start()] + re.sub(r'[^\n]', ' ', s[m.start():end+1]) + s[end+1:]
    found = []
    for m in re.finditer(r'\bfn\s+(\w+)', s):
        # The body's brace: the first `{` after the signature, unless a `;` comes first (a declaration).
        k = m.end(); depth = 0; j = k
        while j < len(s):
            ch = s[j]
            if ch in '([<': depth += 1
            elif ch in ')]>' and not (ch == '>' and s[j-1] == '-'): depth -= 1
            elif ch == ';' and depth <= 0: j = -1; break
            elif ch == '{' and depth <= 0: break
            j += 1
        if j < 0 or j >= len(s): continue
        end = match_brace(s, j)
        first = s.count('\n', 0, m.start()) + 1
        last = s.count('\n', 0, end) + 1
        if last - first + 1 > limit:
            found.append((last - first + 1, path, first, m.group(1)))
    return found

limit = int(sys.argv[1]) if len(sys.argv) > 1 else 100
root = sys.argv[2] if len(sys.argv) > 2 else 'src'
rows = []
for d, _, files in os.walk(root):
    for f in files:
        if f.endswith('.rs'):
            rows += long_fns(os.path.join(d, f), limit)
for lines, path, line, name in sorted(rows, key=lambda r: (r[1], r[2])):
    print(f'{lines:4} {path}:{line} {name}')
print(f'{len(rows)} functions over {limit} lines')
