"""What the GPU ran, as SASS: nvdisasm's listings and their on-disk cache (listing, cache), the
function holding a PC (finder), one decoded Instruction (instruction: its opcode from opcode, its
operands from operands, its memory accesses from access), what integer instructions compute
(semantics), one control-flow graph (flow), and the windows a report shows (view). The fault's
explanation (crashlab.explain) and the hang's readings (crashlab.waits) read the code through it."""
