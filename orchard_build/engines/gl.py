"""Choose MuJoCo's offscreen OpenGL platform before `mujoco` is imported.

MuJoCo reads ``MUJOCO_GL`` once, when it is first imported, and PyOpenGL reads ``PYOPENGL_PLATFORM``
when it is first imported. So :func:`configure` must run before either import; every module of this
package that needs MuJoCo calls it first.

Policy: an explicit ``MUJOCO_GL`` is respected as it is. Otherwise EGL is tried (in a short child
process, so a broken EGL cannot poison this interpreter); if it cannot make a context, OSMesa is used
(``MUJOCO_GL=osmesa`` and ``PYOPENGL_PLATFORM=osmesa``; Debian package ``libosmesa6``).
"""
from __future__ import annotations

import os
import subprocess
import sys

_PROBE = (
    "import mujoco\n"
    "ctx = mujoco.GLContext(8, 8)\n"
    "ctx.make_current()\n"
    "ctx.free()\n"
)

_chosen: str | None = None


def _probe(platform: str) -> bool:
    env = dict(os.environ, MUJOCO_GL=platform, PYOPENGL_PLATFORM=platform)
    try:
        res = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return res.returncode == 0


def configure() -> str:
    """Set MUJOCO_GL (and PYOPENGL_PLATFORM) if unset; returns the platform in use."""
    global _chosen
    if _chosen is not None:
        return _chosen
    if os.environ.get("MUJOCO_GL"):
        _chosen = os.environ["MUJOCO_GL"]
        if _chosen in ("egl", "osmesa"):
            os.environ.setdefault("PYOPENGL_PLATFORM", _chosen)
        return _chosen
    platform = "egl"
    if not _probe("egl"):
        platform = "osmesa"
    os.environ["MUJOCO_GL"] = platform
    os.environ["PYOPENGL_PLATFORM"] = platform
    _chosen = platform
    return platform


def context_class():
    """The GLContext class of the configured platform.

    Works even when `mujoco` was imported before :func:`configure` (then `mujoco.GLContext` may be
    GLFW, which needs a display), as long as PyOpenGL has not yet been imported for another platform.
    """
    platform = configure()
    if platform == "egl":
        from mujoco.egl import GLContext
    elif platform == "osmesa":
        from mujoco.osmesa import GLContext
    else:
        from mujoco import GLContext
    return GLContext
