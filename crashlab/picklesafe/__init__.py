"""A pickle reader for strangers' files: it imports and calls nothing a pickle names.

``unpickler.loads`` decodes the opcodes (opcodes.py, what each does; calls.py, what a call may
make; allowlist.py, which names a pickle may use) into plain data and inert ``pickled.Instance``
records; ``bounds.check`` refuses trees whose shared references would blow up what walks them;
``writer.dumps`` writes such a tree back. What the tree means (an SGLang crash dump) is
crashlab.replay's business. Empty on purpose: importing a module of the package loads only what
that module needs.
"""
