"""fusekit's compiled core: use the functions of the fusekit package instead."""

from typing import List, Optional, Tuple

__version__: str

class Error(Exception):
    """A model fusekit could not read, fuse or write; the message is one line."""

def fuse_bytes(model: bytes, target: str, rules: Optional[List[str]], num_heads: Optional[int],
               explain: bool) -> Tuple[bytes, str]: ...
def fuse_path(path: str, target: str, rules: Optional[List[str]], num_heads: Optional[int],
              explain: bool) -> Tuple[bytes, str]: ...
def fuse_file(src: str, dst: str, target: str, rules: Optional[List[str]],
              num_heads: Optional[int], explain: bool) -> str: ...
def inspect_bytes(model: bytes, target: str, rules: Optional[List[str]],
                  num_heads: Optional[int]) -> str: ...
def inspect_path(path: str, target: str, rules: Optional[List[str]],
                 num_heads: Optional[int]) -> str: ...
def cli(argv: List[str]) -> int: ...
