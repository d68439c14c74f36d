from __future__ import annotations

import os
import tempfile

# Tests never share var/ (SQLite file, filesystem broker queue) with a running `make run`.
os.environ.setdefault("KVDASH_VAR_DIR", tempfile.mkdtemp(prefix="kvdash-test-var-"))
os.environ.setdefault("KVDASH_ENV", "test")
