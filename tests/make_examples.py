"""Write the SYNTHETIC example dumps bundled in fixtures/synthetic/ (README's first command).

    python -m tests.make_examples [folder]

They are made by tests/coredump_builder.py around real nvcc-built cubins and are labelled
synthetic inside (the metadata section's generator name) and in fixtures/synthetic/PROVENANCE.md.
tests/test_examples.py checks that the committed files are exactly what this script writes.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests import coredump_builder, scenarios

FOLDER = coredump_builder.ROOT / "fixtures" / "synthetic"


def examples() -> dict[str, scenarios.Scenario]:
    return {
        # The MoE routing bug behind a real SGLang crash: garbage top-k ids index shared memory.
        "moe_align_out_of_range.nvcudmp": scenarios.fault(
            "moe_align.sm_90.cubin:shared-out-of-range", scenarios.WARP_OUT_OF_RANGE_ADDRESS),
        # The same fault with the registers the kernel's code computes (a forward run of its SASS
        # from chosen roots, tests/sass_emulator.py): the fault explained, from the dump alone.
        "moe_align_explained.nvcudmp": scenarios.explained("moe", "sm_90"),
        # A hang: no exception anywhere, two kernels spinning (what a user-triggered dump shows).
        "hang_no_exception.nvcudmp": scenarios.hang(),
    }


def main(folder: Path = FOLDER) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, scenario in examples().items():
        coredump_builder.write(scenario.spec, folder / name)
        print(folder / name)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else FOLDER)
