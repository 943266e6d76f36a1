"""``torchdx.install()``: diagnose uncaught exceptions after their traceback.

``torchdx.install()`` and ``torchdx.install.install()`` are the same function: importing
this module makes it callable. ``python -m torchdx.install --enable|--disable|--status``
turns the hook on for every run of this Python environment through a ``.pth`` file
(see :func:`torchdx._hooks.main`). ``TORCHDX_DISABLE=1`` turns it off.
"""

import sys
import types

from ._hooks import (
    ENV_DISABLE,
    PTH_NAME,
    disabled,
    install,
    is_installed,
    main,
    uninstall,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["install", "uninstall", "is_installed", "disabled", "main", "ENV_DISABLE", "PTH_NAME"]


class _CallableModule(types.ModuleType):
    """The module ``torchdx.install`` that is also the function ``install()``."""

    def __call__(self, **kwargs: "Any") -> None:
        install(**kwargs)


if __name__ == "__main__":
    sys.exit(main())
else:
    # `import torchdx.install` rebinds the package attribute `install` to this module;
    # being callable, it still does what `torchdx.install()` did.
    sys.modules[__name__].__class__ = _CallableModule
