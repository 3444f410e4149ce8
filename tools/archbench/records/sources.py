"""The source lines a kernel's line table names (PC sampling's -lineinfo records), looked for
where the table says and in the folders given."""

import os

# tools/, the package's folder (its lib/ and build*/lib beside it: run.inject.locate)
TOOLS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Sources:
    """Source lines by (file, dir), looked for where the line table says, then in --source-dir
    folders, the current folder and archbench's own kernels/cuda (NVRTC names its files bare)."""

    def __init__(self, dirs=()):
        self.dirs = list(dirs) + [os.getcwd(), os.path.join(TOOLS, "..", "kernels", "cuda")]
        self.cache = {}

    def line(self, file, folder, no):
        key = (file, folder)
        if key not in self.cache:
            self.cache[key] = None
            cands = [os.path.join(folder, file) if folder else file, file] + [
                os.path.join(d, os.path.basename(file)) for d in self.dirs]
            for c in cands:
                try:
                    with open(c, encoding="utf-8", errors="replace") as f:
                        self.cache[key] = f.read().splitlines()
                    break
                except OSError:
                    continue
        lines = self.cache[key]
        return lines[no - 1].strip() if lines and 0 < no <= len(lines) else None
