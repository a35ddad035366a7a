"""Files graphloc writes and reads back: atomic writes, and checked loads.

Below ``nn`` and ``datasets`` (both use it), above nothing but torch. Every dict that
``atomic_save`` writes carries a SHA-256 of its contents under ``CHECKSUM_KEY``, and
``load_file`` verifies it: a flipped byte in a processed dataset or a checkpoint is an error
that names the file, never different numbers loaded quietly. The files stay plain torch
files (``torch.load`` reads them; the checksum is one more string entry).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from contextlib import contextmanager

import numpy as np
import torch
from torch import Tensor

CHECKSUM_KEY = "graphloc_sha256"


def content_digest(obj) -> str:
    """SHA-256 of a saved object's contents: tensor bytes with their dtype and shape, dict
    entries in key order, sequences in order, other values by ``repr``. It depends on the
    values only, not on how torch serialises them, so it is recomputed after loading."""
    digest = hashlib.sha256()
    _feed(digest, obj)
    return digest.hexdigest()


def _feed(digest, obj) -> None:
    if isinstance(obj, Tensor):
        t = obj.detach().cpu().contiguous()
        digest.update(f"tensor {t.dtype} {tuple(t.shape)};".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(obj, np.ndarray):
        digest.update(f"array {obj.dtype} {obj.shape};".encode())
        digest.update(np.ascontiguousarray(obj).tobytes())
    elif isinstance(obj, dict):
        digest.update(f"dict {len(obj)};".encode())
        for key in sorted(obj, key=repr):
            digest.update(f"{key!r}:".encode())
            _feed(digest, obj[key])
    elif isinstance(obj, (list, tuple)):
        digest.update(f"{type(obj).__name__} {len(obj)};".encode())
        for item in obj:
            _feed(digest, item)
    else:
        digest.update(f"{type(obj).__name__} {obj!r};".encode())


def atomic_save(obj, path: str) -> None:
    """``torch.save`` that never leaves a half-written file at ``path``; a dict gets its
    content checksum (``CHECKSUM_KEY``) for ``load_file`` to verify."""
    if isinstance(obj, dict):
        obj = {**{k: v for k, v in obj.items() if k != CHECKSUM_KEY},
               CHECKSUM_KEY: content_digest({k: v for k, v in obj.items()
                                             if k != CHECKSUM_KEY})}
    with atomic_file(path) as tmp:
        torch.save(obj, tmp)


def load_file(path: str, what: str, weights_only: bool = True, keys=(),
              rebuild: str = "delete it to have it rebuilt"):
    """``torch.load`` of a file graphloc wrote, checked: FileNotFoundError when missing;
    ValueError naming the file and saying how to rebuild it (``rebuild``) when it is not a
    readable torch file, its checksum does not match its contents, or it is not a dict
    holding ``keys``. Returns the object without its checksum entry."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"no {what} at {path}")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=weights_only)
    except Exception as err:  # torch raises several types for damaged archives
        raise ValueError(f"{path} is not a readable {what} ({type(err).__name__}: {err}): "
                         f"truncated or corrupt? {rebuild}") from err
    if keys and not isinstance(obj, dict):
        raise ValueError(f"{path} is not a {what}: it holds a {type(obj).__name__}, not a "
                         f"dict with {', '.join(keys)}. {rebuild}")
    if isinstance(obj, dict) and CHECKSUM_KEY in obj:
        stored = obj.pop(CHECKSUM_KEY)
        if stored != content_digest(obj):
            raise ValueError(f"{path}: the checksum of this {what} does not match its "
                             f"contents (a damaged or altered file). {rebuild}")
    missing = [k for k in keys if k not in obj]
    if missing:
        raise ValueError(f"{path} is not a complete {what}: it lacks {', '.join(missing)}. "
                         f"{rebuild}")
    return obj


@contextmanager
def atomic_file(path: str, suffix: str = ".tmp"):
    """Yields a temporary path in ``path``'s folder, renamed to ``path`` (with a new file's
    usual permissions) when the block succeeds and removed when it raises: a crash never
    leaves a half-written file at ``path``."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=suffix)
    os.close(fd)
    try:
        yield tmp
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would hide it from other users
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json(obj, path: str, indent: int | None = None) -> None:
    """``json.dump`` that never leaves a half-written file at ``path`` (an object that
    does not serialise raises before anything is there). A NaN or infinite number (an R
    of seeds without influence, the accuracy of an empty split) is written as ``null``:
    Python's ``NaN`` and ``Infinity`` are not JSON, and strict readers (JavaScript, jq)
    refuse the whole file."""
    with atomic_file(path) as tmp, open(tmp, "w") as f:
        json.dump(_finite_or_null(obj), f, indent=indent, allow_nan=False)


def _finite_or_null(obj):
    """``obj`` with every non-finite float in its dicts, lists and tuples replaced by None."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite_or_null(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite_or_null(v) for v in obj]
    return obj


def check_writable(path: str, what: str) -> None:
    """Raises ``ValueError`` naming ``what`` if no file can be written at ``path`` (its
    folder cannot be made or written to, or ``path`` is a folder): for outputs written
    after a long computation, checked before it starts."""
    if os.path.isdir(path):
        raise ValueError(f"{what} {path} is a folder; give a file name")
    try:
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise ValueError(f"{what} {path} cannot be written ({err.strerror or err})") from err


def save_figure(fig, path: str, dpi: int = 120) -> None:
    """``fig.savefig(path)`` (a matplotlib figure) that never leaves a half-written image at
    ``path``; the format follows ``path``'s extension (PNG without one)."""
    extension = os.path.splitext(path)[1]
    with atomic_file(path, suffix=extension or ".png") as tmp:
        fig.savefig(tmp, dpi=dpi, format=extension[1:] or "png")
