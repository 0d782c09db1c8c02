"""Who is acting, and who is an admin.

The acting user is the process's effective Unix user, read from the password database:
environment variables such as ``USER`` or ``LOGNAME`` are not trusted, since anyone can set
them. Every use case in :mod:`cigri.api` takes the user as a parameter; only the CLI asks
:func:`acting_user`. Admins are ``root``, the owner of the database file (the account cigri
runs as), the users listed in ``cigri.admins`` and the members of ``cigri.admin_group``.
"""

from __future__ import annotations

import grp
import os
import pwd

from cigri.config import Config
from cigri.errors import Forbidden


def acting_user() -> str:
    uid = os.geteuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:  # a uid with no name (containers): still a distinct, unforgeable identity
        return str(uid)


def _name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def is_admin(config: Config, user: str) -> bool:
    settings = config.settings
    if user == "root" or user in settings.admins.replace(",", " ").split():
        return True
    if settings.admin_group:
        try:
            group = grp.getgrnam(settings.admin_group)
        except KeyError:
            group = None
        if group is not None and (user in group.gr_mem or _primary_gid(user) == group.gr_gid):
            return True
    try:
        return owner_of(config.owned_path) == user
    except OSError:
        return False


def owner_of(path: os.PathLike[str] | str) -> str:
    """The Unix account owning ``path``: for the database, the account cigri runs as."""
    return _name(os.stat(path).st_uid)


def grid_account(config: Config) -> str | None:
    """The account the grid is: the owner of its database, else of its home (whoever runs the
    grid's first command there makes the database); None before either exists."""
    found = next((path for path in (config.owned_path, config.home) if path.exists()), None)
    return None if found is None else owner_of(found)


def _primary_gid(user: str) -> int | None:
    try:
        return pwd.getpwnam(user).pw_gid
    except KeyError:
        return None


def require_admin(config: Config, user: str, what: str) -> None:
    """Forbidden (exit 1, HTTP 403) unless ``user`` has the admin role."""
    if not is_admin(config, user):
        raise Forbidden(f"{what}: needs the admin role, and {user} is not an admin")
