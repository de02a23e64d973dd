"""The one registry type used by every extension point (tunnel kinds, generators)."""

from enum import StrEnum
from typing import Generic, TypeVar

from tunnelbench.errors import UserError

K = TypeVar("K", bound=StrEnum)
V = TypeVar("V")


class Registry(Generic[K, V]):
    """Maps a kind to its implementation; rejects duplicates; errors list what exists."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._items: dict[K, V] = {}

    def register(self, kind: K, item: V) -> None:
        if kind in self._items:
            raise ValueError(f"{self.what} {kind.value!r} is registered twice")
        self._items[kind] = item

    def get(self, kind: K) -> V:
        try:
            return self._items[kind]
        except KeyError:
            supported = ", ".join(k.value for k in self._items)
            raise UserError(
                f"unsupported {self.what} {kind.value!r}; supported: {supported}"
            ) from None

    def kinds(self) -> list[K]:
        return list(self._items)
