# Type stubs for the part of FoundationDB's Python binding (untyped) that the app uses: the pure
# Python tuple layer and subspaces. Read by mypy only ([tool.mypy] mypy_path); anything else of the
# binding is Any.
from typing import Any

from . import subspace_impl as subspace_impl
from . import tuple as tuple
from .subspace_impl import Subspace as Subspace

def __getattr__(name: str) -> Any: ...
