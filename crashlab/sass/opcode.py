"""An opcode's family and modifiers, worked out here and nowhere else.

nvdisasm prints an opcode as its family and dot-separated modifiers (``LDG.E.64``,
``IMAD.WIDE.U32``, ``BAR.SYNC.DEFER_BLOCKING``). Uniform-datapath forms of the integer ALU ops
(``UIMAD``, ``ULEA``, ``UIADD3``, ``UMOV``) compute what their vector forms compute, on uniform
registers: ``base`` names the vector family for them, and only for them (``UTMALDG``,
``UBLKCP`` and ``USETMAXREG`` are families of their own).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

#: integer ALU families that have a uniform-datapath twin (U + the family)
_UNIFORM_TWINS = frozenset({
    "IMAD", "IADD3", "IADD", "VIADD", "LEA", "MOV", "SHF", "SHL", "LOP3", "SEL", "ISETP", "IABS",
    "PRMT", "FLO", "POPC", "BREV", "SGXT", "BMSK", "PLOP3", "P2R", "R2P", "IMNMX", "VIMNMX",
})


@dataclass(frozen=True)
class Opcode:
    text: str
    family: str
    modifiers: tuple[str, ...]

    @property
    def base(self) -> str:
        """The family, a uniform twin as its vector family (``UIMAD`` -> ``IMAD``)."""
        if self.family.startswith("U") and self.family[1:] in _UNIFORM_TWINS:
            return self.family[1:]
        return self.family

    @property
    def uniform(self) -> bool:
        """A uniform-datapath twin of an ALU op."""
        return self.base != self.family

    def has(self, *modifiers: str) -> bool:
        """Whether every one of ``modifiers`` is among the opcode's."""
        return all(m in self.modifiers for m in modifiers)

    @property
    def shown(self) -> str:
        """The family and its first modifier (``BAR.SYNC``): the words a reader knows."""
        return ".".join((self.family, *self.modifiers[:1]))


@lru_cache(maxsize=4096)
def opcode(text: str) -> Opcode:
    """``LDG.E.64`` -> family LDG, modifiers (E, 64); the same object for the same text."""
    family, *modifiers = text.strip().split(".")
    return Opcode(text.strip(), family, tuple(modifiers))
