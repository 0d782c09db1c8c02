"""Users' own tokens for clusters that want them (``identity = "tokens"``; ``gridtoken``).

One token per user and cluster, kept by cigri in ``<home>/tokens/<cluster>/<user>``: directories
0700 and files 0600 of cigri's account, so that no one else (no user, no job) can read them,
and outside the database, so that no listing, dump or backup of it carries them. A token is
replaced atomically (written beside, then renamed over). Only its owner's jobs use it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from cigri.errors import InputError

# A user or cluster name that can name a file here (the configuration checks cluster names already)
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]{0,127}\Z")
MAX_TOKEN = 16384  # bytes: a JWT is a few hundred


class TokenStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, cluster: str, user: str) -> Path:
        for what, name in (("cluster", cluster), ("user", user)):
            if not _NAME.match(name):
                raise InputError(f"{what} {name!r}: cannot name a token")
        return self.root / cluster / user

    def get(self, cluster: str, user: str) -> str | None:
        try:
            return self._path(cluster, user).read_text().strip() or None
        except (FileNotFoundError, NotADirectoryError, InputError):
            return None

    def put(self, cluster: str, user: str, token: str) -> None:
        path = self._path(cluster, user)
        for directory in (self.root, path.parent):
            directory.mkdir(mode=0o700, exist_ok=True)
            os.chmod(directory, 0o700)  # whatever the umask made of it
        temporary = path.with_name(f".{user}.{os.getpid()}.new")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with open(fd, "w") as handle:
            handle.write(token + "\n")
        os.replace(temporary, path)

    def remove(self, cluster: str, user: str) -> bool:
        try:
            self._path(cluster, user).unlink()
        except FileNotFoundError:
            return False
        return True

    def clusters_of(self, user: str) -> dict[str, float]:
        """The clusters where ``user`` has a token, and when each was registered."""
        if not _NAME.match(user) or not self.root.is_dir():
            return {}
        found = {}
        for cluster in sorted(os.listdir(self.root)):
            try:
                found[cluster] = (self.root / cluster / user).stat().st_mtime
            except (FileNotFoundError, NotADirectoryError):
                continue
        return found


def check_token(token: str) -> str:
    """The token as stored: one line of printable ASCII, not empty, not huge."""
    token = token.strip()
    if not token:
        raise InputError("token: empty")
    if len(token) > MAX_TOKEN or not token.isascii() or not token.isprintable() or any(c.isspace() for c in token):
        raise InputError(f"token: expected one word of printable ASCII of at most {MAX_TOKEN} characters")
    return token
