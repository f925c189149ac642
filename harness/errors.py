"""Exceptions the harness raises for bad input, each naming the file and field at fault."""

from __future__ import annotations


class HarnessInputError(ValueError):
    """A definition, workload, tensor or solution file is malformed.

    The message always starts with the file (and, where known, the field) at
    fault, so a user can fix the input without reading a traceback.
    """

    def __init__(self, path, field: str | None, problem: str):
        self.path = str(path)
        self.field = field
        self.problem = problem
        where = f"{self.path}: field '{field}'" if field else self.path
        super().__init__(f"{where}: {problem}")


class SolutionUnsupported(RuntimeError):
    """Raised by a solution (while loading) when this machine cannot run it:
    an unsupported GPU architecture, say. The harness reports SKIPPED with the
    message, not COMPILE_ERROR."""
