"""STAND-IN for cuda-gdb, for tests only: the stand-in tests run where no cuda-gdb is installed.

It is a CLI program that reads commands on a terminal and answers with output shapes taken from
real cuda-gdb 12.4 transcripts of crashlab's flow (fixtures/transcripts/, recorded on this
project's dumps; tests/test_gdb_transcripts.py checks that the stand-in's answers read the same
as the real ones), so that crashlab's real pexpect driver, readers, triage flow and cross-check
run end to end behind a real pty. It reads no dump: the values it prints are the ones a test
planted in a SYNTHETIC dump (tests/scenarios.py), given as JSON in $STANDIN_SCENARIO. Like
cuda-gdb 12.4 it answers ``-cuda-focus-query`` with a sentence (``^done,"kernel 0, ..."`` with a
raw newline), a switch to the lane already in focus with ``^done,"CUDA focus unchanged.\n"``,
and prints every predicate register as ``<unavailable>``. Shapes older releases print (focus
line before the exception, the failure line of cuda-corelow.c) come from public transcripts:
vllm-project.github.io _posts/2025-12-03-improved-cuda-debugging.md and NVIDIA/cuda-gdb#18.
The real counterparts are tests/test_gdb_real_cuda_gdb.py (real cuda-gdb 12.4, no GPU) and
tests/test_gpu_debugger.py (marker ``gpu``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time


def _dim(values) -> str:
    return "(" + ",".join(str(v) for v in values) + ")"


def _focus_text(s) -> str:
    return (f"kernel 0, grid {s['grid']}, block {_dim(s['block'])}, thread {_dim(s['thread'])}, "
            f"device {s['device']}, sm {s['sm']}, warp {s['warp']}, lane {s['lane']}")


def _mi_focus(s) -> str:
    return (f'CudaFocus={{device="{s["device"]}",sm="{s["sm"]}",warp="{s["warp"]}",lane="{s["lane"]}",'
            f'kernel="0",grid="{s["grid"]}",blockIdx="{_dim(s["block"])}",threadIdx="{_dim(s["thread"])}"}}')


def _frame(s) -> str:
    where = f" at {s['file']}:{s['line']}" if s.get("frame_source", True) else ""
    return (f"#0  {s['current_pc']:#018x} in {s['short']}<<<{_dim(s['grid_dim'])},{_dim(s['block_dim'])}>>> "
            f"(){where}\n")


def _load(s, path: str) -> str:
    opening = f"Opening GPU coredump: {path}\n"
    if s.get("load_error"):
        return opening + s["load_error"] + "\n"
    try:
        with open(path, "rb") as dump:
            magic = dump.read(4)
    except OSError:
        magic = b""
    if magic != b"\x7fELF":  # like cuda-gdb, it cannot open what is not an ELF file (gzip, ...)
        return opening + "Failed to read core file: not an ELF core file\n"
    exception = (f"\nCUDA Exception: {s['exception']}\n"
                 f"The exception was triggered at PC {s['pc']:#x} ({s['file']}:{s['line']})\n")
    focus = f"[Current focus set to CUDA {_focus_text(s)}]\n"
    ordered = focus + exception if s.get("order") == "focus-first" else exception + focus
    return opening + "warning: CUDA ELF Image contains unknown ABI version: 8\n" + ordered + _frame(s)


def _symbol(s, address: int) -> str:
    return f"<{s['mangled']}+{address - s['entry']}>"


def _disassembly(s, count: int, start: int) -> str:
    lines = []
    for i in range(count):
        address = start + 16 * i
        marker = {(True, True): "*=> ", (True, False): "*> ", (False, True): "=> "}.get(
            (address == s["pc"], address == s["current_pc"]), "   ")
        text = "STG.E desc[UR4][R2.64], R5" if address == s["pc"] else "NOP"
        lines.append(f"{marker}{address:#x} {_symbol(s, address)}:\t{text} ")
    return "\n".join(lines) + "\n"


def _register(name: str, value: int | None, shown: str | None = None) -> str:
    if value is None:
        return f"{name:<15}<unavailable>\n"
    signed = value - (1 << 32) if value >= 1 << 31 else value
    return f"{name:<15}{value:<#20x}{shown or signed}\n"


def _registers(s) -> str:
    values = s["registers"] + [0] * (s.get("num_registers", 255) - len(s["registers"]))
    out = [_register(f"R{i}", v) for i, v in enumerate(values)] + [_register(f"R{len(values)}", None)]
    pc = f"{s['current_pc']:#x} <{s['name']}+{s['current_pc'] - s['entry']}>"
    out.append(_register("pc", s["current_pc"], pc))
    uniform = s.get("uniform_registers", []) + [0] * (63 - len(s.get("uniform_registers", [])))
    out += [_register(f"UR{i}", v) for i, v in enumerate(uniform)] + [_register("UR63", None)]
    upreds = s.get("uniform_predicates", []) + [0] * (7 - len(s.get("uniform_predicates", [])))
    out += [_register(f"UP{i}", v) for i, v in enumerate(upreds)] + [_register("UP7", None)]
    return "".join(out)


def _system_registers(s) -> str:
    errorpc = f"{s['pc']:#x} <{s['name']}+{s['pc'] - s['entry']}>"
    return ("".join(_register(f"P{i}", None) for i in range(8)) + _register("CC", 0)
            + _register("errorpc", s["pc"], errorpc))


def _line(s) -> str:
    if s.get("no_line_info"):
        return f"No line number information available for address {s['pc']:#x} {_symbol(s, s['pc'])}\n"
    return (f'Line {s["line"]} of "{s["file"]}" starts at address {s["pc"]:#x} {_symbol(s, s["pc"])} '
            f'and ends at {s["pc"] + 16:#x} {_symbol(s, s["pc"] + 16)}.\n')


def _window(s, where: str) -> int:
    """The start of ``x/Ni WHERE``: an address, or ``$errorpc-OFFSET``."""
    if where.startswith("$errorpc"):
        return s["pc"] - int(where[len("$errorpc-"):] or "0", 0)
    return int(where, 0)


def answer(s, command: str) -> str:
    mi = re.match(r'^interpreter-exec mi "(.*)"$', command)
    if mi:
        return _answer_mi(s, mi.group(1).replace('\\"', '"'))
    disassemble = re.match(r"^x/(\d+)i (\S+)$", command)
    if command == "show version":
        return ("NVIDIA (R) cuda-gdb 12.4\nPortions Copyright (C) 2007-2023 NVIDIA Corporation\n"
                "Based on GNU gdb 13.1\n")
    if command.startswith("target cudacore "):
        return _load(s, command.split(" ", 2)[2])
    if command == "bt":
        return _frame(s)
    if disassemble:
        return _disassembly(s, int(disassemble.group(1)), _window(s, disassemble.group(2)))
    if command == "info line *$errorpc":
        return _line(s)
    if command == "info registers":
        return _registers(s)
    if command == "info registers system":
        return _system_registers(s)
    return f'Undefined command: "{command.split()[0]}".  Try "help".\n'


def _answer_mi(s, command: str) -> str:
    if command == "-cuda-info-kernels":
        return ('^done,InfoCudaKernelsTable={nr_rows="1",nr_cols="10",hdr=[],body=[InfoCudaKernelsRow={'
                f'current="*",kernel="0",parent="-",device="{s["device"]}",grid="{s["grid"]}",'
                f'status="{s.get("status", "Active")}",sms_mask="0x00000001",gridDim="{_dim(s["grid_dim"])}",'
                f'blockDim="{_dim(s["block_dim"])}",invocation="{s["short"]}()"}}]}}\n')
    if command.startswith("-cuda-focus-query"):
        return f'^done,"{_focus_text(s)}\n"\n'  # cuda-gdb 12.4 prints the newline raw
    if command.startswith("-cuda-focus-switch"):
        wanted = [int(v) for v in re.findall(r"\d+", command)]
        if wanted != [s["device"], s["sm"], s["warp"], s["lane"]] and not s.get("ignore_switch"):
            return '^error,msg="Invalid coordinates requested. CUDA focus unchanged."\n'
        return '^done,"CUDA focus unchanged.\\n"\n'
    if command == "-cuda-info-lanes":
        return ('^done,InfoCudaLanesTable={nr_rows="1",nr_cols="6",hdr=[],body=[InfoCudaLanesRow={'
                f'current="*",lane="{s["lane"]}",state="active",physical_pc="{s["current_pc"]:#018x}",'
                f'threadIdx="{_dim(s["thread"])}",exception="{s["exception"]}"}}]}}\n')
    if command == "-data-evaluate-expression (long)$errorpc":
        return f'^done,value="{s["pc"]}"\n'
    return f'^error,msg="Undefined MI command: {command.split()[0][1:]}",code="undefined-command"\n'


def main() -> None:
    with open(os.environ["STANDIN_SCENARIO"]) as handle:
        scenario = json.load(handle)
    args = sys.argv[1:]
    prompt = "(cuda-gdb) "
    for flag, value in zip(args, args[1:], strict=False):
        if flag == "-iex" and value.startswith("set prompt "):
            prompt = value[len("set prompt "):]
    while True:
        sys.stdout.write(prompt)
        sys.stdout.flush()
        line = sys.stdin.readline()
        if not line or line.strip() == "quit":
            return
        command = line.strip()
        if command == scenario.get("die_on"):
            os.kill(os.getpid(), signal.SIGKILL)
        if command == scenario.get("hang_on"):
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a hang that Ctrl-C does not end
            time.sleep(3600)
        sys.stdout.write(answer(scenario, command))


if __name__ == "__main__":
    main()
