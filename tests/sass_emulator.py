"""A forward SASS emulator for one thread of the planted-fault kernels (tests only).

The fault explainer (crashlab.explain) walks the SASS *backward* from a faulting access to its
roots. Its tests need dumps whose registers are what the code computes from chosen roots, made
by something that shares none of its assumptions: this module runs the kernel *forward* from its
entry, with its own reading of the operands nvdisasm prints, and stops at the faulting
instruction. It never imports crashlab.explain; the instruction list comes from
crashlab.sass.listing.parse_listing (opcode, guard, operands split at commas, branch targets).

It models exactly the opcodes the planted kernels and moe_align compile to on sm_80, sm_90 and
sm_100; anything else raises Unmodelled, so a truth is never guessed. Loads read only what the
caller put in memory (a missing word raises), constant bank 0 holds only the parameter buffer
and the launch slots the caller gives, and the run is bounded by a step limit.
"""

from __future__ import annotations

import re
import struct
import subprocess
from dataclasses import dataclass, field
from functools import cache

from crashlab.sass.instruction import Instruction
from crashlab.sass.listing import find_nvdisasm, parse_listing

MASK32 = 0xFFFF_FFFF
MASK64 = (1 << 64) - 1
#: Bank-0 slots of the launch, as the planted kernels' SASS reads them (nvcc 13.0): blockDim at
#: +0/+4/+8 and gridDim at +0xc/+0x10/+0x14 before Blackwell, 0x360/0x370 on sm_100; the initial
#: stack pointer at 0x28 (0x37c on sm_100); the 64-bit global-memory descriptor that `desc[UR]`
#: operands name.
BANK0_SLOTS = {
    "sm_80": {"block_dim": 0x0, "grid_dim": 0xC, "stack": 0x28, "descriptor": 0x118},
    "sm_90": {"block_dim": 0x0, "grid_dim": 0xC, "stack": 0x28, "descriptor": 0x208},
    "sm_100": {"block_dim": 0x360, "grid_dim": 0x370, "stack": 0x37C, "descriptor": 0x358},
}
MEMORY_OPCODES = {"LDG", "LDL", "LDS", "STL", "STS", "STG", "ATOMS"}
NO_OPERATION = {"BSSY", "BSYNC", "BAR", "WARPSYNC", "YIELD", "NOP"}
_REGISTER = re.compile(r"^(-|~)?(U?R)(\d+|Z)((?:\.(?:64|reuse|X4|X8|X16|U32))*)$")
_CONSTANT = re.compile(r"^c\[0x0\]\[(0x[0-9a-f]+|RZ)\]$")
_PREDICATE = re.compile(r"^(!)?(U?P)(T|\d)$")
_MEMORY = re.compile(r"^(?:desc\[UR\d+\])?\[([^\]]+)\]$")
_COMPARE = {
    "EQ": lambda a, b: a == b, "NE": lambda a, b: a != b, "LT": lambda a, b: a < b,
    "LE": lambda a, b: a <= b, "GT": lambda a, b: a > b, "GE": lambda a, b: a >= b,
}
_BOOLEAN = {"AND": lambda a, b: a and b, "OR": lambda a, b: a or b, "XOR": lambda a, b: a != b}


class Unmodelled(Exception):
    """An instruction, operand or memory word the emulator does not know: no truth from it."""


@dataclass
class Launch:
    """The chosen roots of one thread's run."""

    arch: str
    params: bytes
    #: where the parameter area starts in bank 0 (EIATTR_PARAM_CBANK, crashlab.cubin.nvinfo)
    param_bank_offset: int
    thread_idx: tuple[int, int, int]
    block_idx: tuple[int, int, int]
    block_dim: tuple[int, int, int]
    grid_dim: tuple[int, int, int]
    stack_top: int
    descriptor: int
    cta_rank: int = 0
    #: 32-bit words a global load may read, by address
    memory: dict[int, int] = field(default_factory=dict)

    def bank0(self) -> dict[int, int]:
        """Bank 0 as bytes by offset: the launch slots and the parameter area, nothing else."""
        slots = BANK0_SLOTS[self.arch]
        words = {slots["stack"]: self.stack_top, slots["descriptor"]: self.descriptor & MASK32,
                 slots["descriptor"] + 4: self.descriptor >> 32}
        for axis in range(3):
            words[slots["block_dim"] + 4 * axis] = self.block_dim[axis]
            words[slots["grid_dim"] + 4 * axis] = self.grid_dim[axis]
        bank = {offset + i: byte for offset, word in words.items()
                for i, byte in enumerate(struct.pack("<I", word))}
        bank.update((self.param_bank_offset + i, byte) for i, byte in enumerate(self.params))
        return bank


@dataclass
class Stopped:
    """One thread's state at the stop instruction, before it executes."""

    registers: dict[int, int]
    uniform_registers: dict[int, int]
    predicates: dict[int, bool]
    #: the stop instruction's effective address, from its memory operand (None: it has none)
    address: int | None
    instruction: Instruction
    #: the thread's local memory as its stores left it, by address
    local_memory: dict[int, int]
    #: the instruction that last wrote each general register
    writers: dict[int, Instruction] = field(default_factory=dict)

    def register_list(self, count: int, unwritten: int) -> list[int]:
        """R0..R(count-1) as a dump holds them; a register the run never wrote gets ``unwritten``."""
        return [self.registers.get(r, unwritten + r) & MASK32 for r in range(count)]

    def never_written(self, count: int) -> list[int]:
        return [r for r in range(count) if r not in self.registers]

    def predicate_list(self) -> list[int]:
        return [int(self.predicates.get(p, False)) for p in range(7)]


@cache
def function_listing(cubin_path: str, function: str) -> tuple[Instruction, ...]:
    """The instructions of ``function``'s text section, offsets from its start (nvdisasm -c)."""
    tool, why = find_nvdisasm()
    if tool is None:
        raise Unmodelled(f"no nvdisasm: {why}")
    text = subprocess.run([tool, "-c", cubin_path], check=True, capture_output=True, text=True,
                          timeout=120).stdout
    chunks = re.split(r"(?m)^\s*\.section\s+", text)
    for chunk in chunks:
        if chunk.startswith(f".text.{function},"):
            return tuple(parse_listing(chunk))
    raise Unmodelled(f"{cubin_path} has no .text.{function}")


def _signed(value: int, bits: int = 32) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


class _Thread:
    def __init__(self, launch: Launch, listing: tuple[Instruction, ...]):
        self.launch = launch
        self.bank = launch.bank0()
        self.by_address = {ins.address: ins for ins in listing}
        self.r: dict[int, int] = {}
        self.ur: dict[int, int] = {}
        self.p: dict[int, bool] = {}
        self.up: dict[int, bool] = {}
        self.local: dict[int, int] = {}
        self.shared: dict[int, int] = {}
        self.running: Instruction | None = None
        self.writers: dict[int, Instruction] = {}

    # -- operands ----------------------------------------------------------------------------
    def constant(self, text: str, size: int = 4) -> int:
        match = _CONSTANT.match(text)
        if not match:
            raise Unmodelled(f"constant operand {text!r}")
        offset = 0 if match[1] == "RZ" else int(match[1], 16)
        try:
            data = bytes(self.bank[offset + i] for i in range(size))
        except KeyError:
            raise Unmodelled(f"bank 0 slot {offset:#x} is not a launch slot or a parameter") from None
        return int.from_bytes(data, "little")

    def register(self, kind: str, number: str, wide: bool = False) -> int:
        if number == "Z":
            return 0
        bank, index = (self.r if kind == "R" else self.ur), int(number)
        try:
            low = bank[index]
            return low | bank[index + 1] << 32 if wide else low
        except KeyError:
            raise Unmodelled(f"{kind}{index} read before any write") from None

    def value(self, text: str, wide: bool = False) -> int:
        """A source operand's value: 32 bits, or 64 where ``wide`` (a register pair, 8 bytes)."""
        if match := _REGISTER.match(text):
            sign, kind, number, suffix = match.groups()
            if ".X" in suffix:
                raise Unmodelled(f"scaled register outside an address: {text}")
            got = self.register(kind, number, wide or ".64" in suffix)
            mask = MASK64 if wide else MASK32
            return {"-": -got & mask, "~": ~got & mask}.get(sign, got)
        if text.startswith("c["):
            return self.constant(text, 8 if wide else 4)
        if re.fullmatch(r"-?0x[0-9a-f]+", text):
            return int(text, 16) & (MASK64 if wide else MASK32)
        raise Unmodelled(f"operand {text!r}")

    def predicate(self, text: str) -> bool:
        match = _PREDICATE.match(text)
        if not match:
            raise Unmodelled(f"predicate {text!r}")
        negate, kind, which = match.groups()
        if which == "T":
            return not negate
        bank = self.p if kind == "P" else self.up
        if int(which) not in bank:
            raise Unmodelled(f"{kind}{which} read before any write")
        return bank[int(which)] != bool(negate)

    def address(self, text: str) -> int:
        """A memory operand's address: registers (``.64`` pairs, ``.X4`` scaled), URs, offset."""
        match = _MEMORY.match(text)
        if not match:
            raise Unmodelled(f"memory operand {text!r}")
        total = 0
        for term in match[1].split("+"):
            term = term.strip()
            if reg := _REGISTER.match(term):
                _sign, kind, number, suffix = reg.groups()
                scale = int(re.search(r"\.X(\d+)", suffix)[1]) if ".X" in suffix else 1
                total += self.register(kind, number, ".64" in suffix) * scale
            elif re.fullmatch(r"-?0x[0-9a-f]+", term):
                total += int(term, 16)
            else:
                raise Unmodelled(f"address term {term!r} in {text!r}")
        return total & MASK64

    # -- results -----------------------------------------------------------------------------
    def write(self, dest: str, value: int, wide: bool = False) -> None:
        match = _REGISTER.match(dest)
        if not match or match[1]:
            raise Unmodelled(f"destination {dest!r}")
        _sign, kind, number, _suffix = match.groups()
        if number == "Z":
            return
        bank, index = (self.r if kind == "R" else self.ur), int(number)
        bank[index] = value & MASK32
        if wide:
            bank[index + 1] = (value >> 32) & MASK32
        if kind == "R" and self.running is not None:
            self.writers.update((k, self.running) for k in range(index, index + 1 + wide))

    def write_predicate(self, dest: str, value: bool) -> None:
        match = _PREDICATE.match(dest)
        if not match or match[1]:
            raise Unmodelled(f"predicate destination {dest!r}")
        if match[3] != "T":
            (self.p if match[2] == "P" else self.up)[int(match[3])] = value


def _half(text: str) -> int:
    return struct.unpack("<H", struct.pack("<e", float(text)))[0]


def _predicate_runs(operands: tuple[str, ...]) -> tuple[list[str], list[str], list[str]]:
    """(the carry-out predicates after the destination, the word sources, the trailing carry-in
    predicates): ``IADD3 R6, P1, PT, R6, 0x80, RZ``, ``IADD3.X R3, RZ, R3, RZ, P1, !PT``."""
    rest = list(operands[1:])
    outs = []
    while rest and _PREDICATE.match(rest[0]):
        outs.append(rest.pop(0))
    ins = []
    while rest and _PREDICATE.match(rest[-1]):
        ins.insert(0, rest.pop())
    return outs, rest, ins


def _carried_sum(t: _Thread, words: list[int], outs: list[str], ins: list[str]) -> int:
    """A sum of 32-bit words plus its carry-in predicates (each 1 where it holds), its bit 32
    written to the first carry-out predicate; a sum that would carry twice is refused, as which
    predicate takes the second carry is not modelled."""
    total = sum(words) + sum(t.predicate(p) for p in ins)
    if outs:
        if total >> 33:
            raise Unmodelled(f"a sum carrying twice ({total:#x})")
        t.write_predicate(outs[0], bool(total >> 32 & 1))
    return total


def _integer(t: _Thread, base: str, mods: list[str], ops: tuple[str, ...]) -> int | None:
    """Integer arithmetic; the value to write, or None where ``base`` is not one of these."""
    if base in ("MOV", "UMOV"):
        return t.value(ops[1])
    if base in ("IMAD", "UIMAD"):
        _outs, sources, carries = _predicate_runs(ops)
        a, b, c = (t.value(o) for o in sources)
        if "HI" in mods or carries and "X" not in mods:
            raise Unmodelled(f"IMAD.{'.'.join(mods)}")
        # MOV/SHL/IADD/U32 are the same multiply-add, printed otherwise; .X adds the carry-in
        return a * b + c + sum(t.predicate(p) for p in carries)
    if base in ("IADD3", "UIADD3"):
        outs, sources, carries = _predicate_runs(ops)
        if carries and "X" not in mods:
            raise Unmodelled(f"IADD3 with carry-ins but no .X: {', '.join(ops)}")
        return _carried_sum(t, [t.value(o) for o in sources], outs, carries)
    if base in ("VIADD",):
        return t.value(ops[1]) + t.value(ops[2])
    if base in ("LEA", "ULEA"):
        if "HI" in mods:
            raise Unmodelled("LEA.HI")
        return (t.value(ops[1]) << int(ops[3], 16)) + t.value(ops[2])
    if base == "SHF":
        if mods[:2] != ["L", "U32"]:
            raise Unmodelled(f"SHF.{'.'.join(mods)}")
        return t.value(ops[1]) << (t.value(ops[2]) & 31)
    if (base, mods) in (("I2F", []), ("I2FP", ["F32", "S32"])):  # int to float, to nearest
        return struct.unpack("<I", struct.pack("<f", float(_signed(t.value(ops[1])))))[0]
    if base == "SEL":
        return t.value(ops[1]) if t.predicate(ops[3]) else t.value(ops[2])
    if base == "LOP3":
        a, b, c = (t.value(o) for o in ops[1:4])
        lut = int(ops[4], 16)
        return sum(((lut >> ((a >> i & 1) << 2 | (b >> i & 1) << 1 | (c >> i & 1))) & 1) << i
                   for i in range(32))
    return None


def _special(t: _Thread, name: str) -> int:
    launch = t.launch
    axis = {"X": 0, "Y": 1, "Z": 2}
    if name.startswith("SR_TID."):
        return launch.thread_idx[axis[name[-1]]]
    if name.startswith("SR_CTAID."):
        return launch.block_idx[axis[name[-1]]]
    if name == "SR_CgaCtaId":
        return launch.cta_rank
    raise Unmodelled(f"special register {name}")


def _memory(t: _Thread, base: str, mods: list[str], ops: tuple[str, ...]) -> bool:
    """Loads, stores and shared atomics before the stop; False where ``base`` is none of them."""
    if base not in MEMORY_OPCODES:
        return False
    wide = "64" in mods and base in ("LDS", "STS")  # a pair of words, as STS.64 [R9], R4
    if {"64", "128", "U8", "S8", "U16", "S16"} & set(mods) and not wide:
        raise Unmodelled(f"{base}.{'.'.join(mods)}: only 32-bit accesses and LDS/STS.64 are "
                         "modelled")
    if base == "LDG":
        address = t.address(ops[1])
        if address not in t.launch.memory:
            raise Unmodelled(f"global word at {address:#x} is not in the chosen memory")
        t.write(ops[0], t.launch.memory[address])
    elif base == "LDL":
        address = t.address(ops[1])
        if address not in t.local:
            raise Unmodelled(f"local word at {address:#x} was never stored")
        t.write(ops[0], t.local[address])
    elif base == "LDS":
        address = t.address(ops[1])
        words = [t.shared.get(address + 4 * k, 0) for k in range(2 if wide else 1)]
        t.write(ops[0], sum(w << 32 * k for k, w in enumerate(words)), wide=wide)
    elif base in ("STL", "STS", "STG"):
        store = {"STL": t.local, "STS": t.shared}.get(base)
        if store is not None:
            address, value = t.address(ops[0]), t.value(ops[1], wide=wide)
            for k in range(2 if wide else 1):
                store[address + 4 * k] = value >> 32 * k & MASK32
    elif mods[:2] == ["POPC", "INC"] and ops[0] == "RZ":  # ATOMS: atomicAdd(&shared, 1)
        address = t.address(ops[1])
        t.shared[address] = (t.shared.get(address, 0) + 1) & MASK32
    else:
        raise Unmodelled(f"{base}.{'.'.join(mods)}")
    return True


def _execute(t: _Thread, ins: Instruction) -> int | None:
    """Run one instruction; the next PC, or None to fall through."""
    base, *mods = ins.opcode.split(".")
    ops = ins.operands
    if base in NO_OPERATION:
        return None
    if base == "BRA":
        if ins.target is None:
            raise Unmodelled(f"branch without a target: {ins.text}")
        return ins.target
    if base == "EXIT":
        raise Unmodelled(f"the thread exited at +{ins.address:#x} before the stop")
    if base in ("S2R", "S2UR"):
        t.write(ops[0], _special(t, ops[1]))
    elif base in ("LDC", "ULDC", "LDCU"):
        wide = "64" in mods
        t.write(ops[0], t.value(ops[1], wide=wide), wide=wide)
    elif base in ("ISETP", "UISETP"):
        compare, unsigned, combine = mods[0], "U32" in mods, mods[-1]
        a, b = t.value(ops[2]), t.value(ops[3])
        if not unsigned:
            a, b = _signed(a), _signed(b)
        t.write_predicate(ops[0], _BOOLEAN[combine](_COMPARE[compare](a, b), t.predicate(ops[4])))
    elif base == "IMAD" and "WIDE" in mods:
        a, b = t.value(ops[1]), t.value(ops[2])
        if "U32" not in mods:
            a, b = _signed(a), _signed(b)
        t.write(ops[0], a * b + t.value(ops[3], wide=True), wide=True)
    elif base == "HFMA2" and ops[1:3] == ("-RZ", "RZ") and len(ops) == 5:
        t.write(ops[0], _half(ops[3]) << 16 | _half(ops[4]))  # 0*0 + (hi, lo): a move
    elif _memory(t, base, mods, ops):
        pass
    else:
        result = _integer(t, base, mods, ops)
        if result is None:
            raise Unmodelled(f"opcode {ins.opcode} ({ins.text})")
        t.write(ops[0], result)
    return None


def operand_address(operand: str, registers: dict[int, int], uniform_registers: dict[int, int]) -> int:
    """A memory operand's address from given register values (a debugger's, say)."""
    thread = _Thread(Launch("sm_90", b"", 0, (0, 0, 0), (0, 0, 0), (1, 1, 1), (1, 1, 1), 0, 0), ())
    thread.r, thread.ur = dict(registers), dict(uniform_registers)
    return thread.address(operand)


def load_destination(ins: Instruction) -> tuple[int, ...]:
    """The general registers a load writes (``LDG.E.64 R2`` writes R2 and R3); none for any
    other instruction."""
    base, *mods = ins.opcode.split(".")
    match = _REGISTER.match(ins.operands[0]) if ins.operands else None
    if base not in ("LDG", "LDS", "LDL", "LD") or not match or match[2] != "R" or match[3] == "Z":
        return ()
    width = 4 if "128" in mods else 2 if "64" in mods else 1
    return tuple(range(int(match[3]), int(match[3]) + width))


def address_registers(ins: Instruction) -> tuple[int, ...]:
    """The general registers the memory operand's address reads (``[R4.64]``: R4 and R5)."""
    found: list[int] = []
    operand = _MEMORY.match(memory_operand(ins) or "")
    for term in operand[1].split("+") if operand else ():
        match = _REGISTER.match(term.strip())
        if match and match[2] == "R" and match[3] != "Z":
            first = int(match[3])
            found += [first, first + 1] if ".64" in match[4] else [first]
    return tuple(found)


def memory_operand(ins: Instruction) -> str | None:
    """The instruction's memory operand (``[R2.64]``, ``desc[UR4][R2.64]``), not a constant."""
    return next((o for o in ins.operands if "[" in o and not o.startswith("c[")), None)


def run_to(listing: tuple[Instruction, ...], launch: Launch, stop: int, *, visit: int = 1,
           max_steps: int = 10_000) -> Stopped:
    """Run one thread from the function's entry until it reaches offset ``stop`` for the
    ``visit``-th time; its state there. Unmodelled where it leaves the modelled subset, exits
    first or runs past ``max_steps``."""
    t = _Thread(launch, listing)
    pc, seen = 0, 0
    for _step in range(max_steps):
        ins = t.by_address.get(pc)
        if ins is None:
            raise Unmodelled(f"no instruction at +{pc:#x}")
        taken = ins.predicate is None or t.predicate(ins.predicate.lstrip("@"))
        if pc == stop and taken:
            seen += 1
            if seen == visit:
                memory = memory_operand(ins)
                return Stopped(dict(t.r), dict(t.ur), dict(t.p),
                               None if memory is None else t.address(memory), ins, dict(t.local),
                               dict(t.writers))
        t.running = ins
        following = _execute(t, ins) if taken else None
        pc = pc + 16 if following is None else following
    raise Unmodelled(f"no stop at +{stop:#x} (visit {visit}) within {max_steps} steps")
