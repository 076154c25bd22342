"""no_shortcuts' static layer: read the submission's AST (never run it) for forbidden calls and for hidden ones.

Sound rather than clever: any construct that could reach a function without naming it in the source (a
computed getattr, __dict__, vars(), eval, importlib, torch.ops, a function's __globals__ ...) is itself a
failure, so what the source names is what it can call, and the forbidden names are then found by name,
through import aliases (`import torch.nn.functional as G`, `from torch.nn import functional`) included.
"""
import ast
import sys

# Forbidden by the contract wherever they appear as an attribute, an imported name or a bare name.
FORBIDDEN_NAMES = {"scaled_dot_product_attention", "multi_head_attention_forward", "MultiheadAttention",
                   "Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
                   "TransformerDecoderLayer", "_native_multi_head_attention"}
# Substrings that name a shortcut, in an attribute, an imported name or a string constant (or constants joined
# with + or "".join): torch's private fused kernels (torch._scaled_dot_product_flash_attention_for_cpu, ...) too.
FORBIDDEN_STRINGS = ("scaled_dot_product", "multi_head_attention", "MultiheadAttention", "torch.nn.attention",
                     "_product_attention", "scaled_dot_attention", "flash_attention", "efficient_attention",
                     "transformer_encoder_layer")
# Builtins that reach a value by a name computed at run time, or run text as code.
DYNAMIC_BUILTINS = {"eval": "eval()", "exec": "exec()", "compile": "compile()", "__import__": "__import__()",
                    "globals": "globals()", "locals": "locals()", "vars": "vars()", "breakpoint": "breakpoint()",
                    "__builtins__": "__builtins__", "__loader__": "__loader__", "__spec__": "__spec__"}
ATTR_BUILTINS = ("getattr", "setattr", "delattr", "hasattr")
# The contract allows the standard library and torch; any other import (numpy.load, the harness' own modules) is
# code the grader cannot read.
ALLOWED_TOP = (set(sys.stdlib_module_names) | {"torch"}) - {"__main__", "antigravity", "this"}
# Modules whose purpose is to reach code indirectly (by name, by object graph, by bytes).
# (Each of these runs text as code, resolves a dotted name given as a string, or loads pickled code.)
FORBIDDEN_MODULES = ("importlib", "ctypes", "_ctypes", "inspect", "pickle", "_pickle", "pickletools", "marshal",
                     "builtins", "gc", "runpy", "code", "codeop", "imp", "pkgutil", "zipimport", "copyreg", "shelve",
                     "subprocess", "multiprocessing", "concurrent", "pty", "timeit", "doctest", "pdb", "bdb", "trace",
                     "profile", "cProfile", "pydoc", "unittest", "logging.config", "mmap", "dis", "sys.modules",
                     "torch.ops", "torch._C", "torch.nn.attention", "torch.library", "torch.overrides",
                     "torch.utils._python_dispatch", "torch.utils.cpp_extension", "torch.utils.model_zoo",
                     "torch.classes", "torch.load", "torch.serialization", "torch.package", "torch.hub",
                     "torch.export", "torch.jit.load", "torch.fx")
# Attributes anywhere: introspection that leads from an object to namespaces, frames or other functions.
FORBIDDEN_ATTRS = {"_C", "aten", "attrgetter", "methodcaller", "CompilationUnit", "_getframe", "f_globals",
                   "f_locals", "f_back", "f_builtins", "f_code", "tb_frame", "gi_frame", "cr_frame", "ag_frame",
                   "_current_frames", "settrace", "setprofile", "get_field", "get_type_hints", "ForwardRef",
                   "CodeType", "FunctionType", "LambdaType", "system", "popen", "execv", "execve", "execl",
                   "execlp", "execvp", "execvpe", "spawnv", "spawnl", "posix_spawn", "posix_spawnp", "resolve_name"}
# Dunder attributes a model legitimately touches; every other dunder attribute is introspection.
ALLOWED_DUNDERS = {"__init__", "__class__", "__name__", "__qualname__", "__doc__", "__call__", "__len__",
                   "__version__", "__repr__", "__str__", "__iter__", "__next__", "__enter__", "__exit__"}
# Attributes of the torch module itself that reach ops, the C layer or the dispatcher.
TORCH_ROOT_ATTRS = {"ops", "library", "overrides", "_C"}


FOLD_DEPTH = 32  # deeper constant expressions are not folded (their pieces are still scanned, and using one needs
# a computed getattr or eval, which fail on their own)


def forbidden_name(name: str) -> bool:
    """A name that is, or spells part of, a forbidden shortcut."""
    return name in FORBIDDEN_NAMES or any(sub in name for sub in FORBIDDEN_STRINGS)


def folded(node, depth: int = 0) -> str | None:
    """The string a constant expression spells: a literal, literals joined with +, or "".join of literals."""
    if depth > FOLD_DEPTH:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = folded(node.left, depth + 1), folded(node.right, depth + 1)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.JoinedStr):
        parts = [folded(v, depth + 1) for v in node.values]
        return "".join(parts) if all(p is not None for p in parts) else None
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join"
            and len(node.args) == 1 and isinstance(node.args[0], (ast.List, ast.Tuple))):
        sep = folded(node.func.value, depth + 1)
        parts = [folded(e, depth + 1) for e in node.args[0].elts]
        return sep.join(parts) if sep is not None and all(p is not None for p in parts) else None
    return None


class Scanner:
    """Collects (line, what) for every forbidden or hiding construct; aliases map local names to dotted paths.

    Iterative (ast.walk, two passes: aliases first, then every node on its own), so a source nested as deep as
    the parser allows cannot exhaust the judge's stack.
    """

    def __init__(self):
        self.hits: set[tuple[int, str]] = set()
        self.aliases: dict[str, str] = {}
        self.docstrings: set[int] = set()
        self.called: set[int] = set()  # Name nodes that are the function of a direct getattr(...) call

    def scan(self, tree) -> None:
        nodes = list(ast.walk(tree))
        for node in nodes:
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                self.docstrings.add(id(node.value))  # a docstring may mention what is forbidden
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                self.called.add(id(node.func))
        for node in nodes:  # imports and aliases (an alias is in force for the whole file: simple, and stricter)
            visit = {ast.Import: self.visit_Import, ast.ImportFrom: self.visit_ImportFrom,
                     ast.Assign: self.visit_Assign}.get(type(node))
            if visit:
                visit(node)
        for node in nodes:
            visit = {ast.Name: self.visit_Name, ast.Attribute: self.visit_Attribute, ast.Call: self.visit_Call,
                     ast.Constant: self.visit_Constant, ast.BinOp: self.visit_BinOp,
                     ast.MatchClass: self.visit_MatchClass}.get(type(node))
            if visit:
                visit(node)

    def hit(self, node, what: str) -> None:
        self.hits.add((getattr(node, "lineno", 0), what))

    def path(self, node) -> str | None:
        """The dotted path an expression names, through import and assignment aliases (None if not a plain path)."""
        attrs = []
        while isinstance(node, ast.Attribute) and len(attrs) < 64:
            attrs.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        return ".".join([self.aliases.get(node.id, node.id), *reversed(attrs)])

    def module_problem(self, dotted: str) -> str | None:
        """Why importing or naming this dotted path is forbidden, if it is."""
        for name in FORBIDDEN_MODULES:
            if dotted == name or dotted.startswith(name + "."):
                return f"uses {name}"
        parts = dotted.split(".")
        if parts[0] == "torch" and any(p.startswith("_") and not p.startswith("__") for p in parts[1:]):
            return f"uses the private torch API {dotted}"
        if any(forbidden_name(p) for p in parts):
            return f"uses {dotted}"
        return None

    # ---- imports: record aliases, refuse forbidden modules and names -------------------------------------------
    def visit_Import(self, node):
        for alias in node.names:
            why = self.module_problem(alias.name)
            if why:
                self.hit(node, f"imports {alias.name}")
            elif alias.name.split(".")[0] not in ALLOWED_TOP:
                self.hit(node, f"imports {alias.name}, which is neither the standard library nor torch")
            local = alias.asname or alias.name.split(".")[0]
            self.aliases[local] = alias.name if alias.asname else alias.name.split(".")[0]

    def visit_ImportFrom(self, node):
        module = node.module or ""
        if node.level == 0 and self.module_problem(module):
            self.hit(node, f"imports from {module}")
        elif node.level or module.split(".")[0] not in ALLOWED_TOP:
            self.hit(node, f"imports from {'.' * node.level}{module}, which is neither the standard library nor torch")
        for alias in node.names:
            full = f"{module}.{alias.name}" if module else alias.name
            if alias.name == "*":
                if module.startswith("torch"):
                    self.hit(node, f"imports * from {module} (name what you use)")
                continue
            if forbidden_name(alias.name) or alias.name in FORBIDDEN_ATTRS or alias.name in ATTR_BUILTINS \
                    or alias.name in DYNAMIC_BUILTINS or (node.level == 0 and self.module_problem(full)):
                self.hit(node, f"imports {alias.name} from {module}")
            self.aliases[alias.asname or alias.name] = full

    def visit_Assign(self, node):
        # `G = torch.nn.functional`: later uses of G resolve to the module
        target = self.path(node.value)
        if target is not None and target.split(".")[0] in ("torch", "math"):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    self.aliases[t.id] = target

    # ---- names and attributes --------------------------------------------------------------------------------------
    def visit_Name(self, node):
        # a bare name is the student's own (class Transformer is fine) unless an import bound it (flagged there)
        if node.id in DYNAMIC_BUILTINS:
            self.hit(node, f"uses {DYNAMIC_BUILTINS[node.id]}")
        elif node.id in self.aliases and self.aliases[node.id] != node.id and self.module_problem(self.aliases[node.id]):
            self.hit(node, f"uses {node.id} ({self.module_problem(self.aliases[node.id])})")
        elif node.id in ATTR_BUILTINS:
            # a direct call is judged in visit_Call; as a value (g = getattr) it hides every later call
            if id(node) not in self.called:
                self.hit(node, f"uses {node.id} as a value")

    def visit_Attribute(self, node):
        self.attribute(node, node.attr, self.path(node.value))

    def attribute(self, node, attr: str, base: str | None) -> None:
        """One attribute access, spelled .attr or getattr(obj, "attr")."""
        if forbidden_name(attr):
            self.hit(node, f"uses .{attr}")
        elif attr in FORBIDDEN_ATTRS:
            self.hit(node, f"uses .{attr}")
        elif attr.startswith("__") and attr.endswith("__") and attr not in ALLOWED_DUNDERS:
            self.hit(node, f"uses .{attr} (introspection that can hide what is called)")
        elif base == "sys" and attr == "modules":
            self.hit(node, "uses sys.modules")
        elif base is not None and base.split(".")[0] == "torch":
            why = self.module_problem(f"{base}.{attr}")
            if why or (base == "torch" and attr in TORCH_ROOT_ATTRS):
                self.hit(node, why or f"uses torch.{attr}")

    def visit_MatchClass(self, node):
        # `case object(scaled_dot_product_attention=f)` reads the attribute into f
        for name in node.kwd_attrs:
            self.attribute(node, name, None)

    def visit_Call(self, node):
        func = node.func
        if isinstance(func, ast.Name) and func.id in ATTR_BUILTINS:
            name = folded(node.args[1]) if len(node.args) >= 2 else None
            if name is None or not isinstance(node.args[1], ast.Constant):
                self.hit(node, f"{func.id} with a computed name (write the attribute out: obj.name)")
            else:
                self.attribute(node, name, self.path(node.args[0]))
        text = folded(node)
        if text is not None:
            self.string(node, text)

    # ---- strings ---------------------------------------------------------------------------------------------------
    def visit_Constant(self, node):
        if isinstance(node.value, str) and id(node) not in self.docstrings:
            self.string(node, node.value)

    def visit_BinOp(self, node):
        text = folded(node)
        if text is not None:
            self.string(node, text)

    def string(self, node, text: str) -> None:
        for name in FORBIDDEN_STRINGS:
            if name in text:
                self.hit(node, f"names {name} in a string")


def shortcut_uses(tree: ast.Module) -> list[str]:
    """Every forbidden or hiding construct in the source, as 'line N: what', in line order."""
    scanner = Scanner()
    scanner.scan(tree)
    return [f"line {line}: {what}" for line, what in sorted(scanner.hits)]
