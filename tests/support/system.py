"""Another local user, for tests of what one user can plant for another."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def throwaway_user() -> Iterator[int | None]:
    """The uid of a user made with useradd for the test and removed after it
    (root only; None elsewhere, where no other user can be made)."""
    if os.getuid() != 0 or shutil.which("useradd") is None:
        yield None
        return
    name = f"lbt{uuid.uuid4().hex[:8]}"
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        check=True,
        capture_output=True,
        timeout=60,
    )
    try:
        import pwd

        yield pwd.getpwnam(name).pw_uid
    finally:
        subprocess.run(["userdel", name], capture_output=True, timeout=60)
