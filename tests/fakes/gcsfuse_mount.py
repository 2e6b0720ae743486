"""A fake Cloud Storage FUSE mount: a local directory that stands for one prefix of a bucket (gcsfuse `only-dir`),
whose renames and deletes are checked against the identity's IAM grants as Cloud Storage checks them.

What it imitates, and from where:
- gcsfuse renames a file by copying its object to the new name and then deleting the old one
  (GoogleCloudPlatform/gcsfuse internal/fs/fs.go renameFile -> nonAtomicRename: `CloneToChildFile`, then
  `DeleteChildFile`, @005fde9e); its atomic path (enable-atomic-rename-object, zonal buckets) is a move, which
  also removes the source. A refused delete after the copy leaves both objects, as gcsfuse does.
- an unlink deletes the object (fs.go Unlink); a file that is not there is ENOENT before any request.
- a 403 from Cloud Storage reaches the caller as EACCES (internal/fs/wrappers/error_mapping.go errno:
  `case http.StatusForbidden, http.StatusUnauthorized: return syscall.EACCES`, @07d06537).
- the roles' object permissions (ROLE_PERMISSIONS) are Google's predefined roles as snapshotted by
  iann0036/iam-dataset gcp/roles/storage.object{Viewer,Creator,User}.json (repository head 2073fa52,
  2026-08-22): objectCreator "Does not give permission to view, delete, or replace objects".
- an IAM condition admits an object when `resource.name` (projects/_/buckets/B/objects/NAME) starts with its
  prefix (Cloud Storage "IAM Conditions"): a grant here is (role, object-name prefix or None for the bucket).

Opening and writing new files is left to the real directory (every role set a test gives it may create).
`mounted(...)` patches os.rename, os.replace, os.unlink and os.remove for the process: use it in a child process.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass

ROLE_PERMISSIONS = {
    "roles/storage.objectViewer": frozenset({"storage.objects.get", "storage.objects.list"}),
    "roles/storage.objectCreator": frozenset({"storage.objects.create"}),
    "roles/storage.objectUser": frozenset({"storage.objects.create", "storage.objects.delete",
                                           "storage.objects.get", "storage.objects.list", "storage.objects.move",
                                           "storage.objects.restore", "storage.objects.update"}),
}


@dataclass(frozen=True)
class Mount:
    root: str
    """The local directory the mount point stands for."""
    only_dir: str
    """The bucket prefix the mount shows (gcsfuse only-dir), without its trailing slash."""
    grants: tuple[tuple[str, str | None], ...]
    """(role, object-name prefix the grant's condition admits, or None for the whole bucket)."""

    def object_name(self, path: str) -> str | None:
        """The object a local path is, or None outside the mount."""
        relative = os.path.relpath(os.path.abspath(path), self.root)
        if relative.startswith(".."):
            return None
        return f"{self.only_dir}/{relative}"

    def allows(self, permission: str, name: str) -> bool:
        return any(permission in ROLE_PERMISSIONS.get(role, ()) and (prefix is None or name.startswith(prefix))
                   for role, prefix in self.grants)

    def require(self, permission: str, name: str, path: str) -> None:
        if not self.allows(permission, name):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)


@contextlib.contextmanager
def mounted(mount: Mount) -> Iterator[Mount]:
    real_rename, real_replace, real_unlink = os.rename, os.replace, os.unlink

    def delete(path, *args, **kwargs):
        name = mount.object_name(path)
        if name is not None:
            if not os.path.lexists(path):
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
            mount.require("storage.objects.delete", name, path)
        return real_unlink(path, *args, **kwargs)

    def rename(src, dst, *args, **kwargs):
        old, new = mount.object_name(src), mount.object_name(dst)
        if old is None and new is None:
            return real_replace(src, dst, *args, **kwargs)
        if old is None or new is None:
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), src, dst)  # another file system
        # CloneToChildFile: a new object at the new name (replacing one there is a delete of it too).
        mount.require("storage.objects.create", new, dst)
        if os.path.lexists(dst):
            mount.require("storage.objects.delete", new, dst)
        shutil.copyfile(src, dst)
        # DeleteChildFile: the old name's object.
        mount.require("storage.objects.delete", old, src)
        return real_unlink(src)

    os.rename, os.replace, os.unlink, os.remove = rename, rename, delete, delete
    try:
        yield mount
    finally:
        os.rename, os.replace, os.unlink, os.remove = real_rename, real_replace, real_unlink, real_unlink
