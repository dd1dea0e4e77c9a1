"""A small document layout engine: text, breaks, groups and nesting.

A document lays out on lines of a given width. A `group` prints flat (each break as
its text) when all of it fits in what is left of the line, and otherwise prints each
of its own breaks as a newline indented by the enclosing `nest`s. This is the layout
JAX's printer uses for programs, so impl's programs print as JAX's do.
"""
from __future__ import annotations


class Doc:
    __slots__ = ("width",)   # the width of the document printed flat

    def __add__(self, other):
        return concat([self, other])


class _Text(Doc):
    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text
        self.width = len(text)


class _Break(Doc):
    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text
        self.width = len(text)


class _Group(Doc):
    __slots__ = ("child",)

    def __init__(self, child):
        self.child = child
        self.width = child.width


class _Nest(Doc):
    __slots__ = ("indent", "child")

    def __init__(self, indent, child):
        self.indent = indent
        self.child = child
        self.width = child.width


class _Color(Doc):
    __slots__ = ("child", "style")

    def __init__(self, child, style):
        self.child = child
        self.style = style
        self.width = child.width


class _Concat(Doc):
    __slots__ = ("children",)

    def __init__(self, children):
        self.children = children
        self.width = sum(c.width for c in children)


def text(s: str) -> Doc:
    return _Text(s)


def brk(s: str = " ") -> Doc:
    """A newline where the enclosing group breaks, `s` where it prints flat."""
    return _Break(s)


def group(doc: Doc) -> Doc:
    return _Group(doc)


def nest(n: int, doc: Doc) -> Doc:
    return _Nest(n, doc)


# ANSI styles as (foreground, intensity) codes; JAX's keywords and type annotations.
_PLAIN = (39, 22)
KEYWORD = (34, 1)           # bright blue
TYPE_ANNOTATION = (35, 22)  # magenta


def color(doc: Doc, style) -> Doc:
    """`doc` in `style` when printed with colours; as is otherwise."""
    return _Color(doc, style)


def concat(docs) -> Doc:
    return _Concat(list(docs))


def join(sep: Doc, docs) -> Doc:
    docs = list(docs)
    out = docs[:1]
    for d in docs[1:]:
        out += [sep, d]
    return _Concat(out)


def format(doc: Doc, width: int = 80, use_color: bool = False) -> str:  # noqa: A001
    """Lay `doc` out on lines of `width`. With `use_color`, ANSI codes switch the style
    just before the text (or a break printed flat) that needs it, as JAX's printer
    does: a newline and its indentation keep the style before them."""
    out, column, shown = [], 0, _PLAIN
    todo = [(0, False, _PLAIN, doc)]   # (indent, flat, style, document), last first
    while todo:
        indent, flat, style, d = todo.pop()
        kind = type(d)
        if kind is _Text or (kind is _Break and flat):
            if use_color and style != shown:
                codes = [str(new) for new, old in zip(style, shown) if new != old]
                out.append("\x1b[" + ";".join(codes) + "m")
                shown = style
            out.append(d.text)
            column += d.width
        elif kind is _Break:
            out.append("\n" + " " * indent)
            column = indent
        elif kind is _Concat:
            todo.extend((indent, flat, style, c) for c in reversed(d.children))
        elif kind is _Nest:
            todo.append((indent + d.indent, flat, style, d.child))
        elif kind is _Color:
            todo.append((indent, flat, d.style, d.child))
        else:
            todo.append((indent, flat or d.width <= width - column, style, d.child))
    return "".join(out)
