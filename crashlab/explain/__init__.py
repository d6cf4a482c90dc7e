"""The fault explained: which access faulted, at what address, against which bound, and where
the address came from. One concern per module: operands (the SASS operand grammar),
access (what an opcode does to memory)."""
