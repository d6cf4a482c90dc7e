"""Turn what the reader found in a coredump into a TriageReport.

Inputs are finished values (the CoreDump for its tables, the located faults, the SASS views and
a map of PCs to functions); nothing here reads the file or runs a tool.

The models are made with ``model_construct``: the values are crashlab's own, checked against each
field's type by mypy (pydantic's plugin types model_construct as it types the constructor) and,
in tests/test_real_dumps.py, by validating the JSON of every real dump's report. Running the
validators here would build them (their core schemas) on every inspect, a tenth of a second the
terminal view, which prints the report and never validates or serialises it, has no use for.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..coredump import exceptions
from ..coredump.constants import generation_flag_names
from ..coredump.core import CoreDump
from ..coredump.fault import DETAILED_GROUPS, FaultGroup, Location, Residency
from ..cubin.nvinfo import ParamLayout
from ..demangle import demangle
from ..notation import counted, dim, short_source
from ..sass.finder import CodeLocation
from ..sass.instruction import Instruction
from ..sass.view import SassView
from ..version import __version__
from . import model, places
from .params import kernel_params
from .suspects import flag_arguments, known_memory, params_missing
from .text import kernel_name, sm_phrase

#: Distinct PCs listed per kernel in ``warps_at``; the rest are counted in the totals.
MAX_POSITIONS = 16


def _hex(value: int | None) -> str | None:
    return None if value is None else f"{value:#x}"


def _exception(kind: exceptions.ExceptionKind) -> model.ExceptionInfo:
    signal = kind.cuda_gdb_signal
    return model.ExceptionInfo.model_construct(
        code=kind.code,
        name=kind.name,
        display=kind.display,
        display_from_cuda_gdb=kind.display_from_cuda_gdb,
        cuda_gdb_signal=None if signal is None else f"CUDA_EXCEPTION_{signal}",
        scope=kind.scope,
        known=kind.known,
    )


def _clustered(dim: tuple | None) -> tuple | None:
    """A cluster shape, or None where the launch used no clusters (all zeros)."""
    return dim if dim and any(dim) else None


def named_words(values: list | None, prefix: str) -> dict | None:
    """``{'R0': .., 'R1': ..}`` from a register file read as a list; None stays None."""
    return None if values is None else {f"{prefix}{i}": v for i, v in enumerate(values)}


def _source(chain) -> list[places.SourceLine]:
    return [places.SourceLine.model_construct(file=s.file, line=s.line) for s in chain]


def _sass(view: SassView) -> model.Sass:
    return model.Sass.model_construct(
        instructions=[
            model.SassInstruction.model_construct(
                address=f"{ins.address:#x}",
                text=ins.text,
                faulting=ins.faulting,
                current=ins.current,
                source=_source(ins.source),
            )
            for ins in view.instructions
        ],
        source=_source(view.source),
        section=view.location.text_section if view.location else None,
        tool=view.tool,
        unavailable_reason=view.unavailable_reason,
    )


def _fault(found: FaultGroup, view: SassView, code: dict[int, CodeLocation | None],
           layout: tuple[ParamLayout | None, str]) -> model.Fault:
    site = found.site
    return model.Fault.model_construct(exception=_exception(found.exception), kernel_inferred=found.grid_inferred,
                   **_thread(site), **_launch(site), **_code_place(site, view), **_extent(found),
                   **_state(found, code), params=_params(found, layout),
                   notes=list(found.notes), sass=_sass(view))


def _thread(site) -> dict:
    """Where on the GPU: device, SM, warp and lane, and the block and thread they run."""
    cta, warp, lane = site.cta, site.warp, site.lane
    return dict(
        device=site.device.dev_id,
        device_name=site.device.name,
        sm_type=site.device.sm_type,
        sm=site.sm.sm_id,
        warp=warp.warp_id if warp else None,
        lane=lane.ln if lane else None,
        block_idx=cta.block_idx if cta else None,
        thread_idx=lane.thread_idx if lane else None,
    )


def _launch(site) -> dict:
    """The grid: its kernel and dims, and the cluster of the block."""
    grid, cta = site.grid, site.cta
    cluster_dim = _clustered(cta.cluster_dim if cta else None) or _clustered(
        grid.cluster_dim if grid else None)
    return dict(
        grid_id=grid.grid_id if grid else None,
        kernel=model.KernelRef.model_construct(name=demangle(grid.function), mangled=grid.function) if grid else None,
        grid_dim=grid.grid_dim if grid else None,
        block_dim=grid.block_dim if grid else None,
        cluster_dim=cluster_dim,
        cluster_idx=cta.cluster_idx if cta and cluster_dim else None,
        cluster_target_block=_cluster_target(site.sm),
    )


def _cluster_target(sm) -> tuple | None:
    if not sm.cluster_target_block_valid:
        return None
    return sm.cluster_target_block_x, sm.cluster_target_block_y, sm.cluster_target_block_z


def _code_place(site, view: SassView) -> dict:
    """The PC, where it came from, and the function and offset holding it."""
    function, offset = _function_offset(site, view)
    return dict(function=function, function_offset=offset, pc=_hex(site.pc),
                pc_source=site.pc_source,
                current_pc=_hex(site.lane.virtual_pc) if site.lane else None)


def _function_offset(site, view: SassView) -> tuple[str | None, int | None]:
    """The function the cubin's symbols place the PC in, else only the offset from the kernel's
    entry (nothing where the PC or the grid is unknown)."""
    place = view.location
    if place is not None and place.function_offset is not None:
        return demangle(place.function), place.function_offset
    if site.grid is not None and site.pc is not None:
        return None, site.pc - site.grid.function_entry
    return None, None


def _extent(found: FaultGroup) -> dict:
    """How far the fault reaches: lanes, warps, blocks and threads, SMs, candidate warps."""
    return dict(
        faulting_lanes=found.faulting_lanes,
        faulting_warps=found.faulting_warps,
        blocks=model.Range.model_construct(**vars(found.blocks)) if found.blocks else None,
        threads=model.Range.model_construct(**vars(found.threads)) if found.threads else None,
        reported_by_sm=found.reported_by_sm,
        sms=list(found.sms),
        candidates=[_candidate(c) for c in found.candidates],
    )


def _candidate(c) -> model.Candidate:
    return model.Candidate.model_construct(sm=c.sm.sm_id, warp=c.warp.warp_id, grid_id=c.cta.grid_id,
                       kernel=demangle(c.grid.function) if c.grid and c.grid.function else None,
                       block_idx=c.cta.block_idx, error_pc=_hex(c.warp.valid_error_pc),
                       broken=bool(c.warp.is_warp_broken))


def _state(found: FaultGroup, code: dict[int, CodeLocation | None]) -> dict:
    """What the dump kept of the thread: registers, predicates, backtrace, constant banks."""
    return dict(
        registers=named_words(found.registers, "R"),
        predicates=named_words(found.predicates, "P"),
        uniform_registers=named_words(found.uniform_registers, "UR"),
        uniform_predicates=named_words(found.uniform_predicates, "UP"),
        backtrace=[_frame(frame.level, frame.virtual_return_address, code)
                   for frame in found.backtrace],
        const_banks=[model.ConstBank.model_construct(bank=b.bank_id, address=f"{b.address:#x}", size=b.size)
                     for b in found.const_banks],
    )


def _params(found: FaultGroup, layout: tuple[ParamLayout | None, str]) -> model.Params | None:
    if not found.params:
        return None
    grid = found.site.grid
    return kernel_params(found.params, *layout, demangle(grid.function) if grid else "")


def _frame(level: int, pc: int, code: dict[int, CodeLocation | None]) -> model.Frame:
    """A caller, numbered as cuda-gdb numbers it: frame #0 is the faulting function itself, so
    the dump's backtrace row of level L (counted from 0, libcudacore's key) is frame #L+1."""
    place = code.get(pc)
    return model.Frame.model_construct(
        level=level + 1,
        pc=f"{pc:#x}",
        function=demangle(place.function) if place and place.function else None,
        function_offset=place.function_offset if place else None,
    )


def _position(position, code: dict[int, CodeLocation | None],
              stands: dict[int, Instruction | None]) -> model.WarpPosition:
    place, at = code.get(position.pc), stands.get(position.pc)
    return model.WarpPosition.model_construct(
        pc=_hex(position.pc),
        function_offset=place.function_offset if place else None,
        warps=position.warps,
        function=demangle(place.function) if place and place.function else None,
        source=_source(at.source) if at else [],
        instruction=at.text if at and at.text else None,
    )


def _kernel(stats: Residency, code: dict[int, CodeLocation | None],
            stands: dict[int, Instruction | None]) -> model.Kernel:
    grid = stats.grid
    return model.Kernel.model_construct(
        device=grid.device.dev_id,
        grid_id=grid.grid_id,
        name=demangle(grid.function),
        mangled=grid.function,
        grid_dim=grid.grid_dim,
        block_dim=grid.block_dim,
        cluster_dim=_clustered(grid.cluster_dim),
        status=grid.grid_status,
        resident_sms=len(stats.sms),
        resident_blocks=stats.blocks,
        resident_warps=stats.warps,
        warps_at=[_position(position, code, stands)
                  for position in stats.sorted_positions()[:MAX_POSITIONS]],
    )


def build(
    core: CoreDump,
    location: Location,
    views: list[SassView],
    code: dict[int, CodeLocation | None],
    warnings: list[str],
    layouts: Sequence[tuple[ParamLayout | None, str]] = (),
    stands: dict[int, Instruction | None] | None = None,
) -> model.TriageReport:
    """``code`` names the functions of the PCs the report mentions besides the faults';
    ``layouts`` gives each fault's kernel parameter layout (or why there is none); ``stands``
    holds the instruction (and its source lines) where each group of warps stands."""
    meta = core.metadata
    memory_sections, memory_bytes = core.memory_totals()
    dump = model.Dump.model_construct(
        abi_version=core.image.abi_version,
        section_count=core.image.section_count,
        memory_sections=memory_sections,
        memory_bytes=memory_bytes,
    )
    if meta is not None:
        dump.generator = meta.generator or None
        if meta.driver_version_major is not None:
            dump.driver_version = f"{meta.driver_version_major}.{meta.driver_version_minor:02d}"
            dump.cuda_version = f"{meta.cuda_version_major}.{meta.cuda_version_minor}"
        dump.generation_flags = generation_flag_names(meta.flags or 0)
        dump.timestamp = meta.timestamp
    faults = [_fault(found, views[i] if i < len(views) else SassView(
        unavailable_reason="not disassembled: only the most relevant faults are"), code,
        layouts[i] if i < len(layouts) else (None, ""))
        for i, found in enumerate(location.faults)]
    _check_arguments(core, location, faults, dump.generation_flags if meta is not None else None)
    kernels = [_kernel(stats, code, stands or {}) for stats in location.residency]
    report = model.TriageReport.model_construct(
        tool=model.Tool.model_construct(version=__version__),
        status="fault" if faults else "no-exception",
        summary="",
        source=model.Source.model_construct(path=core.path, size_bytes=core.image.file_size, kind="cuda-coredump",
                        compressed=core.image.compressed),
        dump=dump,
        devices=[
            model.Device.model_construct(index=d.dev_id, name=d.name, sm_type=d.sm_type, num_sms=d.num_sms,
                     warps_per_sm=d.num_warps_per_sm, lanes_per_warp=d.num_lanes_per_warp,
                     regs_per_lane=d.num_regs_per_lane, pci_bus_id=d.pci_bus_id,
                     pci_dev_id=d.pci_dev_id)
            for d in core.devices
        ],
        kernels=kernels,
        faults=faults,
        omitted_faults=location.omitted_groups,
        warnings=warnings,
    )
    report.summary = summarize(report)
    return report


def _check_arguments(core: CoreDump, location: Location, faults: list[model.Fault],
                     flags: list[str] | None) -> None:
    """Flag each detailed fault's suspect arguments, or say why its kernel's parameter buffer
    is missing (the faults past DETAILED_GROUPS were never looked up: nothing is said of them)."""
    detailed = list(zip(location.faults[:DETAILED_GROUPS], faults, strict=False))
    known = known_memory(core) if any(f.params is not None for _, f in detailed) else None
    for found, fault in detailed:
        if fault.params is not None:
            flag_arguments(fault, known)
        elif found.site.grid is not None:
            fault.params_missing = params_missing(flags)


def summarize(report: model.TriageReport) -> str:
    """One line a human reads first."""
    if not report.faults:
        resident = [k for k in report.kernels if k.resident_warps]
        names = ", ".join(kernel_name(k.name, k.grid_id) for k in resident[:3]) + (
            " ..." if len(resident) > 3 else "")
        return (
            f"No exception in this dump (user-triggered or taken on abort?); "
            f"{counted(len(resident), 'kernel')} resident" + (f": {names}" if names else "")
        )
    fault = report.faults[0]
    where = kernel_name(fault.kernel.name if fault.kernel else "", fault.grid_id)
    parts = [f"{fault.exception.display} in {where}"]
    if fault.block_idx is not None:
        parts.append(f"block {dim(fault.block_idx)} thread {dim(fault.thread_idx)}")
    parts.append(f"device {fault.device} {sm_phrase(fault)}")
    if fault.pc:
        offset = f" (+{fault.function_offset:#x})" if fault.function_offset is not None else ""
        parts.append(f"PC {fault.pc}{offset}")
    if fault.sass.source:
        parts.append(f"at {short_source(fault.sass.source)}")
    more = len(report.faults) - 1 + report.omitted_faults
    text = ", ".join(parts)
    return text + (f" (+{more} more fault group{'s' if more > 1 else ''})" if more else "")


