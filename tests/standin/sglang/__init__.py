"""STAND-IN for SGLang in crashlab's tests (see tests/standin/README.md); not SGLang."""
