"""STAND-IN for SGLang in crashlab's tests and fixtures (see tests/standin/README.md); not SGLang.

Two halves: a small server behind ``python -m sglang.launch_server`` (launch_server.py, rank.py,
driver.py) that imitates SGLang's process tree and crash path, and classes under SGLang's real
module paths (srt/: GenerateReqInput, EmbeddingReqInput, ServerArgs, ImageData, LoRARef) whose
pickles name what SGLang's do, with SGLang's field names and defaults read from the 0.5.6.post2,
0.5.12 and 0.5.23 wheels; SGLANG_STANDIN_VERSION picks the version (default 0.5.23). The request
dumps of the server and of fixtures/sglang_dumps/make_dumps.py are made from those classes.
"""

__version__ = "standin"
