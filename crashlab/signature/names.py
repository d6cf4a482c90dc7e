"""C++ names as a signature writes them: small named rules over a demangled name, Socorro style.

A kernel name carries what changes between builds of the same code (nvcc's per-file namespace
hash, lambda numbering, a clone suffix, how the demangler spaces ``> >``) and, for CUTLASS and
CuTe, kilobytes of tile shapes. Each rule below removes one such thing and says so when it fires
(the signature's notes list them), after Mozilla Socorro's siggen
(socorro/signature/rules.py, CSignatureTool.normalize_cpp_function): drop the return type and the
parameters, collapse what varies, keep what names the code.

What is kept: namespaces, class and function names, and the kernel's own template arguments
and the arguments of those (dtype, tile size, the functor or lambda an elementwise kernel runs,
a CUTLASS collective's policy): a kernel template's arguments are the code it runs, so
``merge_attn_states_kernel<__nv_bfloat16, 128u>`` and ``<float, 128u>`` stay apart (a
dtype-specific bug is common), and collapsing them all, as Socorro does for host code, would make
every PyTorch elementwise op one ``vectorized_elementwise_kernel<T>``. Deeper arguments are
collapsed to ``<…>``; so are ``cute::`` arguments (layouts, tuples, integral constants: tile
shapes) wherever they stand; a CUTLASS collective keeps only its dispatch policy (its first
argument, which selects the implementation); a wrapper kernel that only launches its template
argument (``cutlass::device_kernel<Op>``) is named by that argument; a name still longer than
LONGEST keeps only the kernel's own arguments.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

#: A template argument list collapsed by a rule.
COLLAPSED = "<…>"
#: Template arguments deeper than this are collapsed (1: the kernel's own arguments).
KEPT_DEPTH = 2
#: A normalised name longer than this keeps only depth-1 arguments.
LONGEST = 400
#: Kernels whose only job is to run the operator they are instantiated with.
WRAPPERS = ("cutlass::device_kernel", "cutlass::Kernel", "cutlass::Kernel2")
#: CUTLASS 3.x collectives, whose first template argument is the dispatch policy.
COLLECTIVES = ("cutlass::gemm::collective::CollectiveMma", "cutlass::epilogue::collective::CollectiveEpilogue",
               "cutlass::conv::collective::CollectiveConv")

_NVCC_NAMESPACE = re.compile(r"_GLOBAL__N__\w*|_GLOBAL__N_\d+")
_ANONYMOUS = re.compile(r"\(anonymous namespace\)::|`anonymous namespace'::")
_CLANG_LAMBDA = re.compile(r"\$_\d+")
_LAMBDA_CALL = re.compile(r"\{lambda\}::operator\(\)\s*(?:\(\))?(?:\s*const)?")
_BRACKETS = {"(": re.compile(r"[()]"), "<": re.compile(r"[<>]")}
_OPEN_PARENTHESIS = re.compile(r"\(")
_ANGLES = _BRACKETS["<"]
_ANGLES_OR_PARENTHESIS = re.compile(r"[<>(]")
_NESTING_OR_SPACE = re.compile(r"[<>(){} ]")
_CLONE = re.compile(r"\s*\[clone [^\]]*\]|\.(?:cold|constprop|isra|part|lto_priv|llvm)(?:\.\d+)*(?=$|[\s(<>,:])")


@dataclass(frozen=True)
class Rule:
    """One normalisation: its name (as notes print it), what it does, and the function."""

    name: str
    why: str
    apply: Callable[[str], str]


def _nvcc_namespace(name: str) -> str:
    """nvcc names a file's anonymous namespace ``_GLOBAL__N__<hash>_<n>_<file>_<hash>``, hashing
    the build's path: two builds of one file differ in it."""
    return _NVCC_NAMESPACE.sub("(anonymous namespace)", name)


def _lambdas(name: str) -> str:
    """``{lambda(float, float)#1}`` (GCC/libiberty), ``$_0`` (clang): the parameter types repeat
    the code around them and the ordinal moves when a lambda is added above; ``::operator()()
    const`` of a lambda only says it is called."""
    out, at = [], 0
    while (start := name.find("{lambda(", at)) >= 0:
        end = _closing(name, start + len("{lambda"), "(", ")")
        close = name.find("}", end)
        if close < 0:
            break
        out.append(name[at:start] + "{lambda}")
        at = close + 1
    name = "".join(out) + name[at:]
    name = _CLANG_LAMBDA.sub("{lambda}", name)
    return _LAMBDA_CALL.sub("{lambda}", name)


_INNER_RETURN = re.compile(r"([<,] ?)void (?=[A-Za-z_][\w:]*[<(])")


def _return_type(name: str) -> str:
    """The demangler writes a template function's return type first (``void f<int>(int)``);
    cpp_demangle also writes it for the function enclosing a lambda in a template argument."""
    name = _INNER_RETURN.sub(r"\1", name)
    end = _top_level_parameters(name)
    head = name if end is None else name[:end[0]]
    cut = _last_top_level_space(head)
    return name if cut is None else name[cut + 1:]


def _parameters(name: str) -> str:
    """A parameter list, at any depth (a kernel's, or a function's that encloses a lambda), with
    a member function's ``const``: kernels are told apart by name and template arguments, and
    CUTLASS's ``(Params)`` says nothing. Casts in template arguments (``(cute::UMMA::Major)0``)
    and ``operator()`` stay."""
    out, i = [], 0
    for found in _OPEN_PARENTHESIS.finditer(name):
        start = found.start()
        if start < i or _is_cast(name, start) or name.endswith("operator", 0, start):
            continue
        out.append(name[i:start])
        i = _closing(name, start, "(", ")") + 1
        while name.startswith(" const", i) or name.startswith(" volatile", i):
            i += len(" const") if name.startswith(" const", i) else len(" volatile")
    return "".join(out) + name[i:]


def _wrapper(name: str) -> str:
    """``cutlass::device_kernel<GemmUniversal<…>>`` runs its argument: name it by that."""
    for wrapper in WRAPPERS:
        if name.startswith(wrapper + "<") and name.endswith(">"):
            return name[len(wrapper) + 1:-1].strip()
    return name


def _cute(name: str) -> str:
    """CuTe's layouts, tuples and integral constants (``cute::tuple<cute::C<128>, …>``) are a
    kernel's tile shapes: thousands of characters that change with every tuning."""
    out, i = [], 0
    while (start := name.find("cute::", i)) >= 0:
        open_ = _identifier_end(name, start)
        out.append(name[i:open_])
        if open_ < len(name) and name[open_] == "<":
            out.append(COLLAPSED)
            i = _closing(name, open_, "<", ">") + 1
        else:
            i = open_
    return "".join(out) + name[i:]


def _collectives(name: str) -> str:
    """``CollectiveMma<MainloopSm100…<6, 8, 2, …>, cute::tuple<…>, …>``: the policy says which
    mainloop runs; the rest are its shapes and element types."""
    for collective in COLLECTIVES:
        out, i = [], 0
        while (start := name.find(collective + "<", i)) >= 0:
            open_ = start + len(collective)
            close = _closing(name, open_, "<", ">")
            first = _first_argument(name, open_ + 1, close)
            out.append(name[i:open_] + "<" + first.strip() + ">")
            i = close + 1
        name = "".join(out) + name[i:]
    return name


def _length(name: str) -> str:
    """A name past LONGEST characters keeps only the kernel's own template arguments."""
    return _depth(name, 1) if len(name) > LONGEST else name


def _depth(name: str, kept: int = KEPT_DEPTH) -> str:
    """Template arguments below depth ``kept`` collapse to ``<…>``."""
    out, depth, i = [], 0, 0
    for found in _ANGLES.finditer(name):
        at = found.start()
        if at < i:
            continue
        if found[0] == "<" and not name.endswith("operator", 0, at):
            if depth == kept:
                out.append(name[i:at] + COLLAPSED)
                i = _closing(name, at, "<", ">") + 1
                continue
            depth += 1
        elif found[0] == ">" and depth:
            depth -= 1
    return "".join(out) + name[i:]


#: cpp_demangle writes an integer template argument as a cast, libiberty with a suffix.
_LITERAL_SUFFIX = {"int": "", "unsigned int": "u", "long": "l", "unsigned long": "ul",
                   "long long": "ll", "unsigned long long": "ull"}
_CAST_LITERAL = re.compile(r"\((" + "|".join(sorted(_LITERAL_SUFFIX, key=len, reverse=True))
                           + r"|bool)\)(-?\d+)")


def _literals(name: str) -> str:
    """``(unsigned int)128`` (cpp_demangle) is ``128u`` (libiberty), ``(bool)1`` is ``true``."""
    def libiberty(found: re.Match) -> str:
        if found[1] == "bool":
            return "false" if found[2] == "0" else "true"
        return found[2] + _LITERAL_SUFFIX[found[1]]
    return _CAST_LITERAL.sub(libiberty, name)


def _spacing(name: str) -> str:
    """libiberty writes ``> >`` and ``int const*``, cpp_demangle (CUTLASS's long names) ``>>``:
    one spelling whichever demangler read the name."""
    name = re.sub(r"\s+", " ", name).strip()
    while "> >" in name:
        name = name.replace("> >", ">>")
    name = re.sub(r"\s*,\s*", ", ", name)
    name = re.sub(r"<\s+", "<", re.sub(r"\s+>", ">", name))
    return re.sub(r"\s+([*&])", r"\1", name)


RULES: tuple[Rule, ...] = (
    Rule("clone-suffix", "compiler clone suffixes ([clone .cold], .constprop.0, .isra.0) dropped",
         lambda name: _CLONE.sub("", name)),
    Rule("nvcc-namespace", "nvcc's per-file namespace _GLOBAL__N__<hash>_<file>_<hash> read as "
         "an anonymous namespace", _nvcc_namespace),
    Rule("anonymous-namespace", "(anonymous namespace):: dropped", lambda name: _ANONYMOUS.sub("", name)),
    Rule("lambda", "lambdas written {lambda} (no parameter types, ordinal or operator())", _lambdas),
    Rule("return-type", "the return type dropped", _return_type),
    Rule("parameters", "parameter lists dropped", _parameters),
    Rule("wrapper-kernel", "a launch wrapper (cutlass::device_kernel<Op>) named by its operator",
         _wrapper),
    Rule("cutlass-collective", "a CUTLASS collective named by its dispatch policy", _collectives),
    Rule("cute-shapes", "CuTe layouts, tuples and constants collapsed to cute::Name<…>", _cute),
    Rule("template-depth", f"template arguments below depth {KEPT_DEPTH} collapsed to <…>",
         _depth),
    Rule("length", f"still over {LONGEST} characters: only the kernel's own template arguments kept",
         _length),
    Rule("integer-literals", "integer template arguments written as libiberty does (128u)",
         _literals),
    Rule("spacing", "spacing of the demangler's output made one", _spacing),
)


@lru_cache(maxsize=1024)
def _normalised(name: str) -> tuple[str, tuple[str, ...]]:
    if name.startswith("_Z"):
        return name, ("mangled: no demangler read this name; kept as it is",)
    fired = []
    for rule in RULES:
        changed = rule.apply(name)
        if changed != name:
            fired.append(rule.name)
            name = changed
    return name, tuple(fired)


def normalise(name: str) -> tuple[str, list[str]]:
    """``name`` (demangled) as a signature writes it, and the names of the rules that changed it.
    A name no demangler could read (still ``_Z…``) is kept as it is. Cached: a dump names one
    kernel many times, and a fleet's dumps name few kernels."""
    normal, fired = _normalised(name)
    return normal, list(fired)


def base_name(name: str) -> str:
    """The unqualified name, for titles and issue search: ``at::native::f<…>`` -> ``f``."""
    normal, _ = normalise(name)
    plain = _depth_zero(normal)
    return plain.rsplit("::", 1)[-1] or normal


def _depth_zero(name: str) -> str:
    out, depth, i = [], 0, 0
    for found in _ANGLES.finditer(name):
        if depth == 0:
            out.append(name[i:found.start()])
        depth = depth + 1 if found[0] == "<" else max(0, depth - 1)
        i = found.end()
    return "".join(out) + (name[i:] if depth == 0 else "")


def _closing(text: str, start: int, open_: str, close: str) -> int:
    """Index of the bracket closing the one at ``start`` (or the last index if it is never closed:
    names come from strangers' dumps)."""
    depth = 0
    for found in _BRACKETS[open_].finditer(text, start):
        if found[0] == open_:
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return found.start()
    return len(text) - 1


def _first_argument(text: str, start: int, end: int) -> str:
    depth = 0
    for i in range(start, end):
        if text[i] in "<(":
            depth += 1
        elif text[i] in ">)":
            depth -= 1
        elif text[i] == "," and depth == 0:
            return text[start:i]
    return text[start:end]


def _top_level_parameters(name: str) -> tuple[int, int] | None:
    depth = 0
    for found in _ANGLES_OR_PARENTHESIS.finditer(name):
        char, i = found[0], found.start()
        if char == "<":
            depth += 1
        elif char == ">":
            depth = max(0, depth - 1)
        elif depth == 0 and not name.endswith("operator", 0, i) and not _is_cast(name, i):
            return i, _closing(name, i, "(", ")")
    return None


def _last_top_level_space(head: str) -> int | None:
    depth, space = 0, None
    for found in _NESTING_OR_SPACE.finditer(head):
        char = found[0]
        if char in "<({":
            depth += 1
        elif char in ">)}":
            depth = max(0, depth - 1)
        elif depth == 0:
            space = found.start()
    return space


def _is_cast(text: str, start: int) -> bool:
    """``(cute::UMMA::Major)0``: a parenthesised type before a literal is a template argument."""
    end = _closing(text, start, "(", ")")
    return end + 1 < len(text) and (text[end + 1].isdigit() or text[end + 1] == "-")


def _identifier_end(text: str, start: int) -> int:
    i = start
    while i < len(text) and (text[i].isalnum() or text[i] in "_:"):
        i += 1
    return i
